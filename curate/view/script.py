"""The one place that turns data into JavaScript the site loads: a call of a registration
function with a JSON argument, safe to load with <script src> whatever the text holds.

Browsers block fetch() of file:// URLs, so data files are scripts; a script's text must
then never end early or change meaning because of what a completion says. JSON is a JS
expression (ES2019 allows U+2028/2029 in strings, older engines do not), and these
replacements keep it one: `<` and `>` (no `</script>`, `<!--` or `-->` can form), `&`, and
the two line separators become \\u escapes, which JSON.parse and JS read as the same
characters.
"""

from __future__ import annotations

import json
import math
from typing import Any

_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def safe_json(value: Any) -> str:
    """`value` as compact JSON that cannot break out of a script (module docstring).
    NaN and infinity become null (JSON has neither)."""
    try:
        text = _dumps(value)
    except ValueError:  # a NaN or infinity somewhere: walk the value only then
        text = _dumps(_finite(value))
    return escape_json(text)


def escape_json(text: str) -> str:
    """JSON text made safe for a script (module docstring). The escaped characters occur
    in JSON only inside strings, where the escapes mean the same characters."""
    # One pass of str.replace per character (memchr-fast) rather than str.translate,
    # which goes through a dict per character: a chunk file is megabytes.
    for char, escape in _ESCAPES.items():
        if char in text:
            text = text.replace(char, escape)
    return text


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def js_call(function: str, *args: Any) -> str:
    """`curateView.FUNCTION(ARG, ...);` with every argument as `safe_json`."""
    return js_call_json(function, *(safe_json(a) for a in args))


def js_call_json(function: str, *encoded: str) -> str:
    """`curateView.FUNCTION(...)` of arguments that are JSON text already (escaped here)."""
    if not function.isidentifier():
        raise ValueError(f"not a function name: {function!r}")
    body = ",".join(escape_json(a) for a in encoded)
    return f"curateView.{function}({body});\n"


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
