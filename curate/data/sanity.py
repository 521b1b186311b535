"""Sanity checks for the layouts the catalogue does not know.

Two mistakes cost a whole run and show nothing until the report: references that are
indices into a list column of the same row (an MMLU-like file under other field
names: the options never reach the prompt and the index is graded as a value), and
answers that can never match because the model writes one form (letters) and the
references another (numbers).

* `index_warnings` looks at the data before anything is generated: one line for the
  start lines, with the likely fix.
* `FormWatch` looks at the first graded rollouts: when no extracted answer shares a
  form with the references and none scored, it gives the reason to stop the run (the
  runner stops it, as it does for a grader that fails on everything).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from curate.graders.choice import reference_letter
from curate.graders.numeric import reference_number
from curate.graders.text import extract_final_answer

if TYPE_CHECKING:
    import polars as pl

    from curate.data.samples import FieldMap

# Share of references that must look like indices before the start lines say so.
INDEX_SHARE = 0.9
# Graded rollouts with an extracted answer the form check needs before it judges.
FORM_MIN = 8
# Graders whose `extracted` is the answer read from the completion (not a summary of
# test cases or a reward function's own notes).
ANSWER_GRADERS = frozenset({"exact", "numeric", "math", "choice", "regex"})
SMALL_INDEX = 10  # indices are into at most ten options
# The forms that never match each other under any answer grader.
FORMS = frozenset({"letter", "number", "index"})
# The share of references that must have one form for the check to judge.
REFERENCE_SHARE = 0.99


def _as_index(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def index_column(
    frame: pl.DataFrame, references: Mapping[str, object], *, exclude: str | None = None
) -> tuple[str, int] | None:
    """(a list column, how many references index into it) when at least INDEX_SHARE of
    the references are whole numbers within their row's list in that column."""
    import polars as pl

    if not references or "sample_id" not in frame.columns or not frame.height:
        return None
    ids = frame["sample_id"].cast(pl.String).to_list()
    for name, dtype in frame.schema.items():
        if not isinstance(dtype, pl.List) or name == exclude:
            continue
        lengths = frame[name].list.len().to_list()
        hits = sum(
            1
            for sid, length in zip(ids, lengths, strict=True)
            if (index := _as_index(references.get(sid))) is not None
            and length is not None
            and length >= 2
            and 0 <= index < length
        )
        if hits >= INDEX_SHARE * len(ids):
            return name, hits
    return None


def index_warnings(
    frame: pl.DataFrame, fields: FieldMap, references: Mapping[str, object]
) -> list[str]:
    """One line when the references look like indices into a list column of the same
    row (each within its row's list), with the likely fix; else nothing."""
    if fields.layout is not None:
        return []  # the layout reads its own references
    found = index_column(frame, references, exclude=fields.answer_field)
    if found is None:
        return []
    name, hits = found
    return [
        f"the references in '{fields.answer_field}' look like indices into '{name}' "
        f"({hits} of {frame.height} fall within their row's list): the prompt may not "
        f"show those options, and the grader compares the index as a value. Likely fix: "
        f"a multiple-choice layout (curate layouts; --layout mmlu reads question, "
        f"choices, answer), or --template with the options and --grader choice"
    ]


def form_of(value: object, *, indices: bool = False) -> str:
    """ "letter", "number", "index" (a small whole number, for references known to be
    indices) or "text"."""
    if isinstance(value, str) and reference_letter(value) is not None:
        return "letter"
    number = reference_number(value, strict=True)
    if number is None:
        return "text"
    if indices:
        index = _as_index(value if not isinstance(value, str) else value.strip())
        if index is not None and 0 <= index < SMALL_INDEX:
            return "index"
    return "number"


@dataclass
class FormWatch:
    """Whether the extracted answers and the references ever share a form, judged once
    on the first FORM_MIN (or more) graded rollouts that extracted an answer."""

    grader_kind: str
    references: Mapping[str, object]
    indices: bool = False  # the references index a list column (`index_column`)
    extracted: Counter[str] = field(default_factory=Counter)  # form -> count
    examples: dict[str, str] = field(default_factory=dict)  # form -> one extracted
    passed: int = 0
    small: int = 0  # extracted whole numbers 0..SMALL_INDEX-1 (they could be indices)
    decided: bool = False

    def __post_init__(self) -> None:
        refs = [r for r in self.references.values() if r is not None]
        self._indices = self.indices
        self.reference_forms: Counter[str] = Counter(
            form_of(r, indices=self._indices) for r in refs
        )

    @property
    def active(self) -> bool:
        return self.grader_kind in ANSWER_GRADERS and not self.decided

    def observe(
        self, extracted: Sequence[Any], scores: Sequence[Any], completions: Sequence[Any]
    ) -> None:
        """Count one stored part's rows; a rollout the grader extracted nothing from
        counts by the final answer its completion marks ("Answer: B"), if any."""
        if not self.active:
            return
        for value, score, text in zip(extracted, scores, completions, strict=True):
            if isinstance(score, int | float) and score > 0:
                self.passed += 1
            if value is None and isinstance(text, str):
                value = extract_final_answer(text)
            if value is None or (isinstance(value, str) and not value.strip()):
                continue
            form = form_of(value)  # an answer is a value, never an index
            if form == "number" and form_of(value, indices=True) == "index":
                self.small += 1
            self.extracted[form] += 1
            self.examples.setdefault(form, str(value)[:20])

    def verdict(self) -> str | None:
        """The reason to stop (None: carry on, or not enough seen yet); judged once."""
        if not self.active or sum(self.extracted.values()) < FORM_MIN:
            return None
        self.decided = True
        if self.passed or set(self.extracted) & set(self.reference_forms):
            return None
        got, _ = self.extracted.most_common(1)[0]
        want, count = self.reference_forms.most_common(1)[0]
        # Only forms that can never meet: free text may still match under some grader
        # (a LaTeX reference and a decimal answer under math).
        if not set(self.extracted) <= FORMS or want not in FORMS:
            return None
        if count < REFERENCE_SHARE * sum(self.reference_forms.values()):
            return None
        if want == "index" and self.small * 2 >= sum(self.extracted.values()):
            return None  # small whole numbers: perhaps a set of small answers, not indices
        ref = next(
            str(r)
            for r in self.references.values()
            if r is not None and form_of(r, indices=self._indices) == want
        )
        fixes = {
            ("letter", "index"): "the references are option indices: map them to letters "
            "with a multiple-choice layout (curate layouts; --layout mmlu)",
            ("letter", "number"): "the references are numbers: if they are option indices "
            "use a multiple-choice layout (curate layouts); else ask for a number",
            ("number", "letter"): "the prompt does not show lettered options: use a "
            "multiple-choice layout (curate layouts) or --template with the options",
            ("number", "index"): "the references are option indices, the answers values: "
            "show the options with a multiple-choice layout (--layout mmlu) or --template",
        }
        fix = fixes.get(
            (got, want), "check --answer-field and --reference-extract, or choose --grader"
        )
        return (
            f"no extracted answer shares a form with the references: the first "
            f"{sum(self.extracted.values())} answers are {_plural(got)} (e.g. "
            f"'{self.examples[got]}'), the references {_plural(want)} (e.g. '{ref[:20]}'), "
            f"and none scored. Stopped early; likely fix: {fix}"
        )


def _plural(form: str) -> str:
    return {"letter": "letters", "number": "numbers", "index": "indices"}.get(form, "text")
