"""The checks for what the layout catalogue does not know: references that index a list
column, and answers that never share a form with the references."""

from __future__ import annotations

import polars as pl

from curate.data.samples import FieldMap
from curate.data.sanity import FORM_MIN, FormWatch, form_of, index_warnings


def _frame(refs: list[object], options: list[list[str]]) -> pl.DataFrame:
    return pl.DataFrame(
        {"sample_id": [f"s{i}" for i in range(len(refs))], "options": options, "gold": refs}
    )


FIELDS = FieldMap(prompt_field="query", messages_field=None, answer_field="gold", id_field=None)


def test_indices_into_a_list_column_are_flagged_with_the_fix() -> None:
    refs = [0, 3, 1, 2, 2, 0, 1, 3, 0, 1]
    frame = _frame(refs, [["a", "b", "c", "d"]] * 10)
    (line,) = index_warnings(frame, FIELDS, {f"s{i}": r for i, r in enumerate(refs)})
    assert "look like indices into 'options' (10 of 10" in line
    assert "--layout mmlu" in line


def test_values_that_do_not_fit_the_lists_are_not_indices() -> None:
    refs = [12, 7, 30, 2, 41, 5, 9, 18, 3, 77]  # answers, most past the 4 options
    frame = _frame(refs, [["a", "b", "c", "d"]] * 10)
    assert index_warnings(frame, FIELDS, {f"s{i}": r for i, r in enumerate(refs)}) == []


def test_a_recognised_layout_reads_its_own_references() -> None:
    refs = [0, 1, 2, 3]
    frame = _frame(refs, [["a", "b", "c", "d"]] * 4)
    fields = FieldMap("question", None, "gold", None, layout="mmlu")
    assert index_warnings(frame, fields, {f"s{i}": r for i, r in enumerate(refs)}) == []


def test_forms() -> None:
    assert form_of("B") == "letter" and form_of("(c)") == "letter"
    assert form_of("42") == "number" and form_of(3) == "number"
    assert form_of(3, indices=True) == "index" and form_of(42, indices=True) == "number"
    assert form_of("Paris") == "text"


def _watch(refs: list[object], kind: str = "numeric", indices: bool = False) -> FormWatch:
    return FormWatch(kind, {f"s{i}": r for i, r in enumerate(refs)}, indices=indices)


def test_letters_against_numbers_stop_with_the_likely_fix() -> None:
    watch = _watch(["7", "12", "3"] * 4)
    texts = ["Thinking...\nAnswer: B"] * FORM_MIN
    watch.observe([None] * FORM_MIN, [0.0] * FORM_MIN, texts)
    reason = watch.verdict()
    assert reason is not None and "letters (e.g. 'B')" in reason and "numbers" in reason


def test_values_against_indices_stop() -> None:
    watch = _watch([0, 2, 1, 3] * 3, kind="numeric", indices=True)
    watch.observe(["81"] * FORM_MIN, [0.0] * FORM_MIN, ["81"] * FORM_MIN)
    reason = watch.verdict()
    assert reason is not None and "indices" in reason and "--layout mmlu" in reason


def test_no_stop_when_forms_meet_or_anything_scored_or_too_little_is_seen() -> None:
    numbers = _watch(["7", "12"] * 6)
    numbers.observe(["8"] * FORM_MIN, [0.0] * FORM_MIN, ["8"] * FORM_MIN)
    assert numbers.verdict() is None  # wrong, but the same form: the model, not the data
    scored = _watch(["7", "12"] * 6)
    scored.observe(["B"] * FORM_MIN, [0.0] * (FORM_MIN - 1) + [1.0], ["B"] * FORM_MIN)
    assert scored.verdict() is None
    early = _watch(["7"] * 12)
    early.observe(["B"] * (FORM_MIN - 1), [0.0] * (FORM_MIN - 1), ["B"] * (FORM_MIN - 1))
    assert early.verdict() is None and not early.decided


def test_free_text_and_test_running_graders_are_never_judged() -> None:
    text = _watch([r"\frac{1}{2}"] * 12, kind="math")
    text.observe(["0.5"] * FORM_MIN, [0.0] * FORM_MIN, ["0.5"] * FORM_MIN)
    assert text.verdict() is None
    code = _watch(["7"] * 12, kind="code")
    code.observe(["B"] * FORM_MIN, [0.0] * FORM_MIN, ["B"] * FORM_MIN)
    assert code.verdict() is None


def test_small_answers_against_small_references_are_not_taken_for_indices() -> None:
    # A set whose answers are small counts and whose rows happen to hold a list column:
    # a weak model's wrong small numbers do not stop the run.
    watch = _watch([0, 2, 1, 3] * 3, kind="numeric", indices=True)
    watch.observe(["4"] * FORM_MIN, [0.0] * FORM_MIN, ["4"] * FORM_MIN)
    assert watch.verdict() is None
