"""Hint templates: levels grow, never show the final answer, repeat no level, and the
hinted prompt keeps the prompt as it was. Checked over every answer-only reference of a
range of lengths and over worked solutions of 1..12 steps (the class, not examples)."""

from __future__ import annotations

import pytest

from curate.hinting.templates import (
    HINT_PREFIX,
    LEVELS,
    hinted_id,
    hinted_text,
    split_reference,
    template_hint,
    template_hints,
)


def test_gsm8k_solution_splits_at_its_last_final_line() -> None:
    text = "Tom has 3 apples.\n\nHe buys 4 more: 3 + 4 = 7.\n#### 7\n"
    ref = split_reference(text)
    assert ref.steps == ("Tom has 3 apples.", "He buys 4 more: 3 + 4 = 7.")
    assert ref.final == "7"


def test_plain_lines_split_into_steps_and_last_line() -> None:
    ref = split_reference("a = 2\nb = a * 3\n6")
    assert ref == split_reference("  a = 2 \n\nb = a * 3\n 6 ")
    assert ref.steps == ("a = 2", "b = a * 3") and ref.final == "6"
    assert split_reference("").final == "" and split_reference("").steps == ()


@pytest.mark.parametrize("answer", ["45", "101", "56232", "3.14159", "-17", "abcdefghij"])
def test_answer_only_hints_are_growing_proper_prefixes(answer: str) -> None:
    shown = []
    for level in LEVELS:
        hint = template_hint(answer, level)
        assert hint is not None and hint.startswith("the answer starts with ")
        prefix = hint.removeprefix("the answer starts with ")
        assert answer.startswith(prefix) and 1 <= len(prefix) < len(answer)
        shown.append(len(prefix))
    assert shown == sorted(shown)


@pytest.mark.parametrize("length", range(1, 13))
def test_hint_levels_are_distinct_and_never_the_answer(length: int) -> None:
    answer = "".join(str((7 * i + 3) % 10) for i in range(length))
    hints = template_hints(answer)
    assert len(set(hints.values())) == len(hints)
    assert all(answer not in h.removeprefix("the answer starts with ") for h in hints.values())
    assert not hints if length == 1 else 1 in hints
    steps = "\n".join(f"step {i}: x{i} = {i * 11}" for i in range(length))
    worked = template_hints(f"{steps}\n#### {answer}")
    assert len(set(worked.values())) == len(worked) >= (1 if length > 1 else 0)
    for hint in worked.values():
        if length >= 2:  # a worked solution: its leading steps, never the last
            assert hint.startswith("step 0:") and f"step {length - 1}:" not in hint
        else:  # one step: the answer-only form
            assert hint.startswith("the answer starts with ")


def test_a_level_outside_one_to_three_is_refused() -> None:
    with pytest.raises(ValueError, match="hint level"):
        template_hint("45", 4)


def test_hinted_text_appends_the_hint_on_its_own_line() -> None:
    assert hinted_text("What is 5 * 9?", "the answer starts with 4") == (
        f"What is 5 * 9?\n{HINT_PREFIX}the answer starts with 4"
    )
    assert hinted_id("q1", 2) == "q1@hint2"
