"""curate.view.script: data as scripts that text cannot break out of."""

from __future__ import annotations

import json

import pytest

from curate.view.script import js_call, safe_json
from tests.view.runs import HOSTILE, HOSTILE_ID, PAYLOAD


@pytest.mark.parametrize("text", [*HOSTILE, PAYLOAD, HOSTILE_ID], ids=range(len(HOSTILE) + 2))
def test_hostile_text_round_trips_and_cannot_close_the_script(text: str) -> None:
    out = safe_json({"c": text, "list": [text]})
    assert json.loads(out) == {"c": text, "list": [text]}
    # Nothing an HTML parser would read inside a <script> element, nor a JS line break.
    for needle in ("<", ">", "&", "\u2028", "\u2029"):
        assert needle not in out


def test_the_class_of_script_breaking_sequences_is_escaped() -> None:
    # Every case variant of the closing tag and comment openers, not one spelling.
    for text in ("</script>", "</SCRIPT >", "</sCrIpT\t>", "<!--", "-->", "<script"):
        out = js_call("chunk", 0, [text])
        assert "</" not in out.lower() and "<!--" not in out and "-->" not in out


def test_nan_and_infinity_become_null_and_names_are_checked() -> None:
    assert json.loads(safe_json([float("nan"), float("inf"), 1.5])) == [None, None, 1.5]
    assert js_call("index", {"a": 1}).startswith('curateView.index({"a":1});')
    with pytest.raises(ValueError):
        js_call("x); alert(1", 1)
