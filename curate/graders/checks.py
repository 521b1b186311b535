r"""The reference self-check: before any rollout is generated, grade every reference
against itself written as a correct completion. A reference the grader cannot parse,
or a correct answer it does not accept, would score every rollout of that sample 0 (or
make it an error row): better to find out, and refuse to start, before paying for
generation.

"Written as a correct completion" means the forms a model that answers correctly
writes, tried in order until one earns full credit: ``The answer is \boxed{REF}.``,
the bare ``REF``, ``#### REF``, ``The answer is REF.`` (a reference that already holds
a ``\boxed{}`` is used as it is). Only the references a form failed are tried with the
next form, so the usual cost is one grading pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from curate.core.outcome import PASS_SCORE
from curate.graders.base import (
    Grader,
    GradeResult,
    SampleContext,
    describe_exception,
    grade,
    one_line,
)
from curate.graders.references import extract_reference
from curate.graders.simple import ExactGrader, RegexGrader, reference_text

DEFAULT_EXAMPLES = 5
# The CLI's default for --max-bad-references.
DEFAULT_MAX_BAD_FRACTION = 0.01

_FORMS: tuple[Callable[[str], str], ...] = (
    lambda ref: ref if "\\boxed" in ref else f"The answer is \\boxed{{{ref}}}.",
    lambda ref: ref,
    lambda ref: f"#### {ref}",
    lambda ref: f"The answer is {ref}.",
)


@dataclass(frozen=True, slots=True)
class BadReference:
    """One reference the grader could not use, and what went wrong."""

    sample_id: str
    reference: str  # shortened, for display
    problem: str


@dataclass(frozen=True, slots=True)
class ReferenceCheck:
    """How many references the grader can grade, and the first few it cannot."""

    grader: str
    total: int
    unparsable: int  # every correct answer was an error row (bad or missing reference)
    rejected: int  # graded, but no correct answer earned full credit
    examples: tuple[BadReference, ...]
    # Why the check was not made (a grader whose every call is paid: the judge).
    skipped: str | None = None
    # References accepted without a check: the grader knows no correct answer to try
    # (a code data set without canonical solutions; its tests were read, though).
    unchecked: int = 0
    # The samples whose reference every correct answer failed on with an error: every
    # rollout of theirs is a grader error, on every re-run (curate.core.settled).
    unusable: frozenset[str] = frozenset()

    @property
    def bad(self) -> int:
        return self.unparsable + self.rejected

    @property
    def bad_fraction(self) -> float:
        return self.bad / self.total if self.total else 0.0

    def exceeds(self, max_bad_fraction: float = DEFAULT_MAX_BAD_FRACTION) -> bool:
        """True when the run should not start (more bad references than allowed)."""
        return self.bad_fraction > max_bad_fraction

    @property
    def summary(self) -> str:
        """One line: the counts, then the first example."""
        if self.skipped is not None:
            return f"grader {self.grader!r}: references not checked ({self.skipped})"
        if not self.bad:
            text = f"grader {self.grader!r} accepts all {self.total} references"
            if self.unchecked:
                text += f" ({self.unchecked} read but not run: no known-correct answer to try)"
            return text
        text = (
            f"grader {self.grader!r} cannot use {self.bad} of {self.total} references "
            f"({self.bad_fraction:.1%}): {self.unparsable} unparsable, "
            f"{self.rejected} not accepted as a correct answer"
        )
        if self.examples:
            first = self.examples[0]
            text += f"; e.g. sample {first.sample_id} {first.reference}: {first.problem}"
        return text


def correct_completions(reference: object) -> list[str]:
    """The completions a model answering `reference` correctly might write."""
    if isinstance(reference, list | tuple):
        if not reference:
            return []
        reference = reference[0]
    if reference is None:
        return ["The answer is None."]  # the grader's own error names the problem
    text = reference_text(reference).strip()
    return list(dict.fromkeys(form(text) for form in _FORMS))


def worked_solution(reference: object) -> str | None:
    """Why `reference` looks like a worked solution rather than an answer, or None.

    String-comparing graders accept such a reference written back verbatim, so the
    self-check alone cannot see the problem: a model's "68" never equals a rationale.
    """
    if not isinstance(reference, str):
        return None
    for mode, what in (("gsm8k", "its '####' line"), ("boxed", "its last \\boxed{}")):
        answer = extract_reference(reference, mode)
        if answer is not None and answer != reference.strip():
            return (
                f"looks like a worked solution, not an answer ({what} says {answer!r}); "
                "extract the answers first"
            )
    if "\n" in reference.strip():
        return "looks like a worked solution (several lines), not an answer"
    return None


def _shown(reference: object) -> str:
    """The reference as written (a string's backslashes are not doubled, as repr does)."""
    if isinstance(reference, str):
        return one_line(f"'{reference}'", 80)
    try:
        text = repr(reference)
    except Exception:  # a huge int refuses repr()
        text = f"<{type(reference).__name__}>"
    return one_line(text, 80)


def check_references(
    grader: Grader,
    references: Mapping[str, object],
    *,
    contexts: Mapping[str, SampleContext] | None = None,
    max_examples: int = DEFAULT_EXAMPLES,
) -> ReferenceCheck:
    """Grade each reference against itself as a correct completion (see module docstring).

    `contexts` (sample id -> row) is handed to graders that read it (verl, trl). A
    grader may define ``expected_answer(reference, context)`` to say which answer its
    correct completion holds (verl's lives in ``reward_model.ground_truth``), or
    ``correct_completions(reference, context)`` to give the completions to try itself
    (None: none known, the reference is accepted unchecked; raising: it is unusable).
    A grader with ``reads_references = False`` (a reward model) has nothing to check,
    and one with ``checks_references = False`` (a judge) is not checked: every reference
    counts as usable.
    """
    # A reward model reads no reference (nothing to check); a judge's check would be a
    # paid call per reference. Either way every reference counts as usable, and says why.
    reads = getattr(grader, "reads_references", True)
    if not reads or not getattr(grader, "checks_references", True):
        return ReferenceCheck(
            grader=getattr(grader, "name", type(grader).__name__),
            total=len(references),
            unparsable=0,
            rejected=0,
            examples=(),
            skipped="the grader reads no reference"
            if not reads
            else "each check would be a paid call",
        )
    expected: Callable[[object, SampleContext | None], object] = getattr(
        grader, "expected_answer", lambda reference, context: reference
    )
    own_forms = getattr(grader, "correct_completions", None)
    first_error: dict[str, str] = {}
    best: dict[str, tuple[float, str]] = {}
    failing = {sid for sid in references}  # until some correct form earns full credit
    unchecked = 0
    candidates: dict[str, list[str]] = {}
    for sid, ref in references.items():
        context = (contexts or {}).get(sid)
        if own_forms is None:
            candidates[sid] = correct_completions(expected(ref, context))
            continue
        try:
            forms = own_forms(ref, context)
        except Exception as exc:
            first_error[sid] = describe_exception(exc)
            forms = []
        if forms is None:
            failing.discard(sid)
            unchecked += 1
            forms = []
        candidates[sid] = list(forms)
    solutions: dict[str, str] = {}
    if isinstance(grader, ExactGrader | RegexGrader):
        for sid, reference in references.items():
            why = worked_solution(reference)
            if why is not None:
                solutions[sid] = why
                candidates[sid] = []  # nothing to try: it is the reference that is wrong
    rounds = max((len(forms) for forms in candidates.values()), default=0)
    for round_index in range(rounds):
        batch = [sid for sid in references if sid in failing and round_index < len(candidates[sid])]
        if not batch:
            break
        completions = [candidates[sid][round_index] for sid in batch]
        rows = [(contexts or {}).get(sid) or {} for sid in batch] if contexts else None
        results: list[GradeResult] = grade(
            grader, completions, [references[sid] for sid in batch], rows
        )
        for sid, completion, result in zip(batch, completions, results, strict=True):
            if result.score is not None and result.score >= PASS_SCORE:
                failing.discard(sid)
            elif result.score is not None:
                if sid not in best or result.score > best[sid][0]:
                    best[sid] = (result.score, completion)
            elif sid not in first_error:
                first_error[sid] = result.error or "grader error"
    unparsable = rejected = 0
    unusable: set[str] = set()
    examples: list[BadReference] = []
    for sid in references:  # in data set order
        if sid not in failing:
            continue
        if sid in solutions:
            rejected += 1
            problem = solutions[sid]
        elif sid in best:
            rejected += 1
            score, completion = best[sid]
            problem = f"best score {score:g}, for {one_line(completion, 80)!r}"
        else:
            unparsable += 1
            unusable.add(sid)
            problem = first_error.get(sid, "no answer to try (empty list of alternatives)")
        if len(examples) < max_examples:
            examples.append(BadReference(sid, _shown(references[sid]), problem))
    return ReferenceCheck(
        grader=getattr(grader, "name", type(grader).__name__),
        total=len(references),
        unparsable=unparsable,
        rejected=rejected,
        examples=tuple(examples),
        unchecked=unchecked,
        unusable=frozenset(unusable),
    )
