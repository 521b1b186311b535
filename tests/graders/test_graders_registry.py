"""Spec parsing, the default spec, and the public contract."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from typing import ClassVar

import pytest

import curate.graders as graders
from curate.core.options import OptionSchema, option
from curate.core.registry import Entry
from curate.errors import MissingExtraError, UsageError
from curate.graders import GRADER_NAMES, Grader, GradeResult, default_grader_spec, get_grader
from curate.graders.base import GraderOptions, InProcessGrader
from curate.graders.registry import GRADERS, grader_options, options_schema


def test_public_api() -> None:
    assert set(graders.__all__) == {
        "GRADER_NAMES",
        "GradeResult",
        "Grader",
        "default_grader_spec",
        "get_grader",
    }
    assert GRADER_NAMES == (
        "exact",
        "numeric",
        "math",
        "regex:PATTERN",
        "python:FILE.py:FUNCTION",
        "python:module:function",
        # Added later: multiple choice and the trainers' own rewards.
        "choice",
        "verl",
        "verl:FILE.py:FUNCTION",
        "trl:FILE.py:FUNCTION",
        "trl:module:function",
        # Added later: an LLM judge; programs run against the sample's tests.
        "judge",
        "code",
        "code:score=fraction",
        # Added later: a reward model served over HTTP.
        "reward-model",
        # Added later: DRO's reasoning reflection reward (no verifier).
        "r3",
        "r3:tau=X",
    )


def test_grade_result_invariants() -> None:
    assert GradeResult(score=0.5, extracted="x").error is None
    assert GradeResult(score=None, extracted=None, error="boom").score is None
    with pytest.raises(ValueError):
        GradeResult(score=None, extracted=None)
    with pytest.raises(ValueError):
        GradeResult(score=1.0, extracted=None, error="both")
    with pytest.raises(ValueError):
        GradeResult(score=1.5, extracted=None)
    with pytest.raises(ValueError):
        GradeResult(score=float("nan"), extracted=None)
    result = GradeResult(score=1.0, extracted="a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.score = 0.0  # type: ignore[misc]
    assert not hasattr(result, "__dict__")  # slots


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        ("exact", "ExactGrader"),
        ("  EXACT ", "ExactGrader"),
        ("numeric", "NumericGrader"),
        ("numeric:rel_tol=1e-3", "NumericGrader"),
        ("numeric:abs_tol=0.5", "NumericGrader"),
        ("numeric: rel_tol = 0 , abs_tol = 1", "NumericGrader"),
        ("regex:(\\d+)", "RegexGrader"),
        ("Regex:a:b", "RegexGrader"),
    ],
)
def test_good_specs(spec: str, kind: str) -> None:
    grader = get_grader(spec)
    assert type(grader).__name__ == kind
    assert grader.name == spec.strip()
    assert isinstance(grader, Grader)
    grader.close()
    grader.close()  # idempotent


def test_numeric_spec_options_reach_the_grader() -> None:
    from curate.graders.simple import NumericGrader

    grader = get_grader("numeric:rel_tol=0,abs_tol=0.5")
    assert isinstance(grader, NumericGrader)
    assert (grader.tolerance.rel_tol, grader.tolerance.abs_tol) == (0.0, 0.5)


@pytest.mark.parametrize(
    "spec",
    [
        "bogus",
        "exact:strict",
        "math:fast",
        "regex:",
        "regex:(",
        "regex:[a-",
        "numeric:",
        "numeric:rel_tol",
        "numeric:rel_tol=abc",
        "numeric:tol=1",
        "numeric:rel_tol=-1",
        "numeric:rel_tol=nan",
        "numeric:abs_tol=inf",
        "numeric:rel_tol=1,rel_tol=2",
        "python",
        "python:",
    ],
)
def test_bad_specs_name_the_spec(spec: str) -> None:
    with pytest.raises(UsageError) as caught:
        get_grader(spec)
    assert repr(spec) in str(caught.value)


@pytest.mark.parametrize("spec", ["", "   "])
def test_empty_spec(spec: str) -> None:
    with pytest.raises(UsageError, match="empty grader spec"):
        get_grader(spec)


def test_unknown_spec_lists_the_choices() -> None:
    with pytest.raises(UsageError, match="regex:PATTERN"):
        get_grader("fuzzy")


def test_math_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec

    def no_math_verify(name: str, package: str | None = None) -> object:
        return None if name == "math_verify" else real_find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", no_math_verify)
    with pytest.raises(MissingExtraError, match=r"pip install 'curate\[math\]'"):
        get_grader("math")


@pytest.mark.parametrize("timeout_s", [0.0, -1.0, float("nan"), float("inf")])
def test_math_timeout_must_be_positive(timeout_s: float) -> None:
    pytest.importorskip("math_verify")
    with pytest.raises(UsageError, match="timeout"):
        get_grader("math", timeout_s=timeout_s)


@pytest.mark.parametrize(
    ("references", "spec"),
    [
        (
            [1, 2.5, "3", "1,234", "12%", "$5", "(45)", "3/4", "-7", "1e-5", "$1.2 million"],
            "numeric",
        ),
        ([0.1, 2], "numeric"),
        (["1", "two"], "exact"),
        (["5 kg"], "exact"),  # a number with a unit is not "a number"
        ([True, False], "exact"),
        ([float("nan")], "exact"),
        ([None], "exact"),
        ([[1, 2]], "exact"),
        (["Paris"], "exact"),
        ([], "exact"),
    ],
)
def test_default_grader_spec(references: list[object], spec: str) -> None:
    assert default_grader_spec(references) == spec
    assert default_grader_spec(tuple(references)) == spec


# -- each kind's own options ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _ToyOptions(OptionSchema):
    label: ClassVar[str] = "--grader toy"
    flag_prefix: ClassVar[str] = "--toy-"

    target: str = option(help="the answer the toy grader wants")
    partial: float = option(0.0, "the score of a near miss", min=0.0, max=1.0)


class _ToyGrader(InProcessGrader):
    def __init__(self, spec: str, options: _ToyOptions) -> None:
        super().__init__(spec)
        self.options = options

    def grade_one(self, answer_text: str, reference: object) -> GradeResult:
        if answer_text.strip() == self.options.target:
            return GradeResult(score=1.0, extracted=answer_text)
        return GradeResult(score=self.options.partial, extracted=answer_text)


def _toy_factory(spec: str, argument: str | None, options: GraderOptions) -> _ToyGrader:
    assert isinstance(options.kind_options, _ToyOptions), options.kind_options
    return _ToyGrader(spec, options.kind_options)


_toy_factory.options = _ToyOptions  # type: ignore[attr-defined]


@pytest.fixture
def toy_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    """A grader kind registered the way a plugin's factory is: with an `options` schema."""
    GRADERS.names()  # scan the installed plugins first, so the entries below stay
    monkeypatch.setitem(GRADERS._entries, "toy", Entry("toy", "tests:<object>", "toy"))
    monkeypatch.setitem(GRADERS._loaded, "toy", _toy_factory)


def test_each_kind_names_its_own_schema(toy_kind: None) -> None:
    from curate.graders.judge import JudgeConfig
    from curate.graders.reward_model import RewardModelConfig

    assert options_schema("judge") is JudgeConfig
    assert options_schema("reward-model") is RewardModelConfig
    assert options_schema("toy") is _ToyOptions
    assert options_schema("exact") is None and options_schema("code:score=fraction") is None
    with pytest.raises(UsageError, match="unknown grader 'jduge'"):
        options_schema("jduge")


def test_assignments_reach_any_kind_that_declares_options(toy_kind: None) -> None:
    """The class: a kind curate does not know (a plugin's) gets its options from -O as
    the built-in ones do, validated by its own schema, and its factory receives them."""
    toy = grader_options("toy", ["toy.target=42", "toy.partial=0.25"])
    grader = get_grader("toy", kind_options=toy)
    assert [r.score for r in grader.grade_batch(["42", "41"], [None, None])] == [1.0, 0.25]
    with pytest.raises(UsageError, match=r"--toy-partial must be at most 1, not 2.0"):
        grader_options("toy", ["toy.target=42", "toy.partial=2"])
    with pytest.raises(UsageError, match=r"^--grader toy needs --toy-target$"):
        grader_options("toy", ["toy.partial=0.5"])
    with pytest.raises(UsageError, match=r"_ToyOptions are not its options"):
        get_grader("exact", kind_options=toy)


def test_assignments_lay_over_the_flags_and_never_set_one_twice() -> None:
    from curate.graders.judge import JudgeConfig

    flags = JudgeConfig(model="m", concurrency=4)
    judge = grader_options("judge", ["judge.timeout=30", "judge.rubric_path=r.txt"], flags)
    assert isinstance(judge, JudgeConfig)
    assert (judge.model, judge.concurrency, judge.timeout) == ("m", 4, 30.0)
    assert judge.rubric_path == Path("r.txt")
    assert judge.remote.timeout == 30.0 and judge.remote.concurrency == 4  # one validation
    with pytest.raises(UsageError, match=r"--judge-concurrency and --option judge\.concurrency"):
        grader_options("judge", ["judge.concurrency=8"], flags)
    with pytest.raises(UsageError, match=r"--judge-concurrency must be at least 1, not 0"):
        grader_options("judge", ["judge.model=m", "judge.concurrency=0"])
    alone = grader_options("judge", ["judge.model=m2"])
    assert isinstance(alone, JudgeConfig) and alone.model == "m2"


def test_an_unknown_grader_option_is_one_line_listing_the_others() -> None:
    with pytest.raises(UsageError) as info:
        grader_options("judge", ["judge.temprature=0"])
    text = str(info.value)
    assert text.startswith("--option judge.temprature: not an option of --grader judge (")
    assert "judge.model, judge.base_url" in text and "judge.cache_path" not in text
    with pytest.raises(UsageError, match=r"--option exact\.x: --grader exact takes no options"):
        grader_options("exact", ["exact.x=1"])
