"""The one reasoning split, and the truncation policy's names and manifest default."""

from __future__ import annotations

import pytest

from curate.core.reasoning import (
    DEFAULT_TRUNCATION,
    ReasoningSplit,
    cut_short,
    joined,
    separated,
    split_reasoning,
    truncation_of,
)
from curate.graders.text import strip_think


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("42", ReasoningSplit("42")),
        ("<think>add them</think>42", ReasoningSplit("42", "add them", True)),
        ("  \n<think>a</think> 42", ReasoningSplit(" 42", "a", True)),
        ("<think>still going", ReasoningSplit(None, "still going", False)),
        # The template opened the block in the prompt (Qwen3, DeepSeek-R1).
        ("so 2+2=4</think>4", ReasoningSplit("4", "so 2+2=4", True)),
        # A <think> in the middle of the text is text, not reasoning.
        ("the tag <think> is </think> odd", ReasoningSplit("the tag <think> is </think> odd")),
        ("<think></think>", ReasoningSplit("", "", True)),
    ],
)
def test_split_reasoning(text: str, expected: ReasoningSplit) -> None:
    assert split_reasoning(text) == expected
    # The graders' stripping is this split's answer, nothing else.
    assert strip_think(text) == expected.answer


def test_separated_by_the_backend() -> None:
    assert separated("42", "add", True) == ReasoningSplit("42", "add", True)
    assert separated(None, "add", True) == ReasoningSplit("", "add", True)
    assert separated(None, "add and", False) == ReasoningSplit(None, "add and", False)


def test_joined_is_the_text_a_trainer_reads() -> None:
    assert joined(ReasoningSplit("42")) == "42"
    assert joined(ReasoningSplit("42", "r", True)) == "<think>r</think>42"
    assert joined(ReasoningSplit(None, "r", False)) == "<think>r"


def test_cut_short() -> None:
    assert cut_short("length", ReasoningSplit("4"))
    assert cut_short("stop", ReasoningSplit(None, "r", False))
    assert not cut_short("stop", ReasoningSplit("4", "r", True))
    assert not cut_short(None, ReasoningSplit("4"))


def test_truncation_of_an_older_manifest_is_grade() -> None:
    assert DEFAULT_TRUNCATION == "grade"
    assert truncation_of({}) == "grade"
    assert truncation_of(None) == "grade"
    assert truncation_of({"truncation": "exclude"}) == "exclude"


def test_ended_is_the_closed_at_the_last_token_rule() -> None:
    from curate.core.reasoning import ReasoningSplit, at_last_token, ended

    assert ended("4", "length") and ended("", "stop") and ended(None, None)
    assert not ended("", "length") and not ended(None, "length")
    cut = at_last_token(ReasoningSplit("", "r", True), "length")
    assert (cut.answer, cut.reasoning, cut.closed) == (None, "r", False)
    kept = ReasoningSplit("4", "r", True)
    assert at_last_token(kept, "length") is kept
