"""Pure text helpers: think stripping, boxed/answer extraction, normalisation."""

from __future__ import annotations

import pytest

from curate.graders.text import (
    extract_final_answer,
    last_boxed,
    normalise_answer,
    strip_think,
    unwrap_boxes,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>reasoning</think>The answer is 5", "The answer is 5"),
        ("  \n<think>a\nb</think>\n42", "\n42"),
        ("<think>never closed, the answer is 5", None),
        ("<think>", None),
        ("<think></think>", ""),
        # The chat template opened the block in the prompt.
        ("reasoning about 5</think>6", "6"),
        ("no reasoning at all", "no reasoning at all"),
        ("", ""),
        # Only a *leading* block counts; a later mention is just text.
        ("answer: 5 <think>", "answer: 5 <think>"),
        ("x</think>y<think>z</think>", "y<think>z</think>"),
        ("<think>a</think>b</think>c", "b</think>c"),
    ],
)
def test_strip_think(text: str, expected: str | None) -> None:
    assert strip_think(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"\boxed{5}", "5"),
        (r"so \boxed{\frac{1}{2}} done", r"\frac{1}{2}"),
        (r"\boxed{\boxed{5}}", "5"),
        (r"\boxed{a \boxed{b} c}", "a b c"),
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),
        (r"first \boxed{5} then \boxed{6}", "6"),
        (r"\fbox{7}", "7"),
        (r"\boxed 5$ end", "5"),
        (r"\boxed {  8 }", "8"),
        # Truncated output: the unbalanced box is ignored, the earlier one stands.
        (r"\boxed{7} and then \boxed{8", "7"),
        (r"\boxed{", None),
        (r"\boxedx{3}", None),
        ("no box", None),
    ],
)
def test_last_boxed(text: str, expected: str | None) -> None:
    assert last_boxed(text) == expected


def test_unwrap_boxes_keeps_surrounding_text() -> None:
    assert unwrap_boxes(r"x = \boxed{\boxed{2}} and \boxed{3}") == "x = 2 and 3"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is 42", "42"),
        ("The final answer is 42.", "42"),
        ("The answer is Paris. It is the capital of France.", "Paris"),
        ("Answer: 1,234.5", "1,234.5"),
        ("**Answer:** 17", "17"),
        ("**Answer**: (B)", "(B)"),
        ("answer = x + 1", "x + 1"),
        ("The answer is: $5$. I hope it is correct.", "$5$"),
        ("Answer:\n\n   17\n", "17"),
        ("first answer is 1\nanswer is 2", "2"),
        ("Natalia sold 72 clips.\n#### 72", "72"),
        # \boxed wins over an answer phrase.
        (r"The answer is 5. \boxed{6}", "6"),
        ("To answer this we need 5 steps", None),
        ("", None),
        ("答案是 42", None),
    ],
)
def test_extract_final_answer(text: str, expected: str | None) -> None:
    assert extract_final_answer(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('  "Paris."  ', "paris"),
        ("New   York\n\tCity", "new york city"),
        ("Straße", "strasse"),
        ("ＰＡＲＩＳ", "paris"),  # full-width letters, NFKC
        (r"\text{Paris}", "paris"),
        (r"\boxed{\text{Paris}}", "paris"),
        (r"\text{a} + \text{b}", r"\text{a} + \text{b}"),
        ("$5$", "5"),
        ("**B**", "b"),
        ("`code`", "code"),
        ("“quoted”", "quoted"),
        ("'", "'"),
        ("", ""),
        ("...", ""),
        ("🙂", "🙂"),
        ("e.g.", "e.g"),
    ],
)
def test_normalise_answer(text: str, expected: str) -> None:
    assert normalise_answer(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('"a" and "b"', '"a" and "b"'),
        ("$x$ and $y$", "$x$ and $y$"),
        ("**a** or **b**", "**a** or **b**"),
        ('"**`Paris`**."', "paris"),
    ],
)
def test_normalise_only_strips_real_wrappers(text: str, expected: str) -> None:
    assert normalise_answer(text) == expected
