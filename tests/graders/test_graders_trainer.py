"""The trainer's own reward as a grader: verl's compute_score and TRL reward functions.

verl is not installed in the development environment (it pulls in CUDA torch and ray),
so the verl tests call functions written to verl's documented custom-reward signature;
`test_verl_default_routing` runs only where verl is importable.
"""

from __future__ import annotations

import importlib.util
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from curate.errors import MissingExtraError, UsageError
from curate.graders import GradeResult, get_grader
from curate.graders.base import grade, needs_context
from curate.graders.checks import check_references
from curate.graders.trainer import TrlGrader, VerlGrader, is_conversational, trl_arguments

# The documented verl signature, with the shapes verl's own scorers return.
VERL_REWARDS = textwrap.dedent(
    '''
    import re, time

    def gsm8k_style(data_source, solution_str, ground_truth, extra_info=None):
        """Strict '#### N' format, as verl's GSM8K example scores it."""
        found = re.findall(r"#### (\\-?[0-9\\.\\,]+)", solution_str)
        if not found:
            return 0.0
        return 1.0 if found[-1].replace(",", "") == ground_truth else 0.0

    def as_dict(data_source, solution_str, ground_truth, extra_info=None):
        pred = solution_str.strip().split()[-1]
        return {"score": float(pred == ground_truth), "acc": pred == ground_truth, "pred": pred}

    def signed(data_source, solution_str, ground_truth, extra_info=None):
        return 1.0 if solution_str.strip() == ground_truth else -1.0

    def context(data_source, solution_str, ground_truth, extra_info=None):
        ok = data_source == "my/source" and extra_info == {"split": "test"}
        return float(ok and ground_truth == "9")

    def no_score(data_source, solution_str, ground_truth, extra_info=None):
        return {"acc": 1.0}

    def slow(data_source, solution_str, ground_truth, extra_info=None):
        if solution_str == "hang":
            time.sleep(60)
        return 1.0

    def wrong_shape(completion, reference):
        return 1.0
    '''
)

TRL_REWARDS = textwrap.dedent(
    """
    def length_reward(prompts, completions, **kwargs):
        return [float(len(c if isinstance(c, str) else c[0]["content"])) for c in completions]

    def only_some(prompts, completions, kind, **kwargs):
        return [1.0 if k == "a" else None for k in kind]

    def seen(prompts, completions, answer, **kwargs):
        ok = []
        for p, c, a in zip(prompts, completions, answer):
            ok.append(float(isinstance(p, list) and c == [{"role": "assistant", "content": a}]))
        return ok

    def short(prompts, completions, **kwargs):
        return [1.0]

    def words(prompts, completions, **kwargs):
        return ["yes" for _ in completions]

    def no_completions(prompts, answers):
        return []
    """
)


@pytest.fixture
def rewards(tmp_path: Path) -> Path:
    (tmp_path / "verl_rewards.py").write_text(VERL_REWARDS)
    (tmp_path / "trl_rewards.py").write_text(TRL_REWARDS)
    return tmp_path


@pytest.fixture
def open_graders() -> Iterator[list[object]]:
    graders: list[object] = []
    yield graders
    for grader in graders:
        grader.close()  # type: ignore[attr-defined]


def build(spec: str, graders: list[object], **options: object) -> object:
    grader = get_grader(spec, **options)  # type: ignore[arg-type]
    graders.append(grader)
    return grader


# -- verl --------------------------------------------------------------------------------


def test_verl_file_reward_reads_ground_truth_from_the_row(
    rewards: Path, open_graders: list[object]
) -> None:
    grader = build(f"verl:{rewards}/verl_rewards.py:gsm8k_style", open_graders)
    assert isinstance(grader, VerlGrader) and needs_context(grader)
    rows = [
        {"data_source": "openai/gsm8k", "reward_model": {"ground_truth": "72", "style": "rule"}},
        {"data_source": "openai/gsm8k", "reward_model": {"ground_truth": "72"}},
        {},  # no reward_model: the reference is the ground truth
    ]
    results = grade(
        grader,  # type: ignore[arg-type]
        ["So 48 + 24 = 72.\n#### 72", "The answer is 72", "<think>x</think>#### 1,234"],
        ["ignored", "ignored", "1234"],
        rows,
    )
    # verl sees the completion as the trainer does: no think stripping, strict format.
    assert results == [GradeResult(1.0, None), GradeResult(0.0, None), GradeResult(1.0, None)]


def test_verl_dict_scores_and_context(rewards: Path, open_graders: list[object]) -> None:
    grader = build(f"verl:{rewards}/verl_rewards.py:as_dict", open_graders)
    assert grade(grader, ["so 5", "so 6"], ["5", "5"], [{}, {}]) == [  # type: ignore[arg-type]
        GradeResult(1.0, "5"),
        GradeResult(0.0, "6"),
    ]
    grader = build(f"verl:{rewards}/verl_rewards.py:context", open_graders)
    row = {"data_source": "my/source", "extra_info": {"split": "test"}}
    assert grade(grader, ["x"], ["9"], [row])[0].score == 1.0  # type: ignore[arg-type]
    grader = build(f"verl:{rewards}/verl_rewards.py:no_score", open_graders)
    [result] = grade(grader, ["x"], ["9"], [{}])  # type: ignore[arg-type]
    assert result.error == "verl reward returned a dict without 'score' (keys: ['acc'])"


def test_score_range_maps_to_unit_interval_and_keeps_the_raw_value(
    rewards: Path, open_graders: list[object]
) -> None:
    spec = f"verl:{rewards}/verl_rewards.py:signed"
    unranged = build(spec, open_graders)
    assert grade(unranged, ["b"], ["a"], [{}])[0].error == (  # type: ignore[arg-type]
        "verl reward returned -1.0, outside [0, 1]"
    )
    ranged = build(spec, open_graders, score_range=(-1.0, 1.0))
    assert grade(ranged, ["a", "b"], ["a", "a"], [{}, {}]) == [  # type: ignore[arg-type]
        GradeResult(1.0, None, raw_score=1.0),
        GradeResult(0.0, None, raw_score=-1.0),
    ]
    narrow = build(spec, open_graders, score_range=(0.0, 1.0))
    assert grade(narrow, ["b"], ["a"], [{}])[0].error == (  # type: ignore[arg-type]
        "verl reward returned -1.0, outside score_range [0, 1]"
    )


def test_verl_hang_is_an_error_row(rewards: Path, open_graders: list[object]) -> None:
    grader = build(f"verl:{rewards}/verl_rewards.py:slow", open_graders, timeout_s=1.0, workers=1)
    results = grade(grader, ["ok", "hang", "ok2"], ["1", "1", "1"], [{}, {}, {}])  # type: ignore[arg-type]
    assert results == [
        GradeResult(1.0, None),
        GradeResult(None, None, "grader timeout after 1s"),
        GradeResult(1.0, None),
    ]


def test_verl_reference_check_uses_the_ground_truth(
    rewards: Path, open_graders: list[object]
) -> None:
    grader = build(f"verl:{rewards}/verl_rewards.py:gsm8k_style", open_graders)
    contexts = {"a": {"reward_model": {"ground_truth": "72"}}, "b": {}}
    check = check_references(grader, {"a": "whole rationale", "b": "18"}, contexts=contexts)  # type: ignore[arg-type]
    assert check.bad == 0, check.summary  # accepted as "#### 72" and "#### 18"


@pytest.mark.parametrize(
    ("suffix", "message"),
    [
        (":", "expected verl, verl:FILE.py:FUNCTION or verl:module:function"),
        (":{dir}/verl_rewards.py:wrong_shape", "must accept (data_source, solution_str"),
        (":{dir}/verl_rewards.py:absent", "has no function 'absent'"),
    ],
)
def test_bad_verl_specs(rewards: Path, suffix: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        get_grader("verl" + suffix.format(dir=rewards))
    assert message in str(caught.value)


def test_score_range_only_for_reward_functions() -> None:
    with pytest.raises(UsageError, match="scores in \\[0, 1\\]"):
        get_grader("numeric", score_range=(0, 10))
    with pytest.raises(UsageError, match="low < high"):
        get_grader("python:operator:eq", score_range=(1, 1))


@pytest.mark.skipif(importlib.util.find_spec("verl") is not None, reason="verl is installed")
def test_bare_verl_without_verl_names_the_install() -> None:
    with pytest.raises(MissingExtraError) as caught:
        get_grader("verl")
    assert str(caught.value) == (
        "grader 'verl' needs verl; pip install verl (its default reward routing), "
        "or name your function: verl:FILE.py:FUNCTION"
    )


@pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="verl is not installed")
def test_verl_default_routing(open_graders: list[object]) -> None:
    from verl.utils.reward_score import default_compute_score

    grader = build("verl", open_graders, timeout_s=120.0, workers=1)
    completions = ["48 + 24 = 72\n#### 72", "#### 71", "The answer is 72"]
    rows = [{"data_source": "openai/gsm8k", "reward_model": {"ground_truth": "72"}}] * 3
    results = grade(grader, completions, ["72"] * 3, rows)  # type: ignore[arg-type]
    expected = [float(default_compute_score("openai/gsm8k", c, "72")) for c in completions]
    assert [r.score for r in results] == expected == [1.0, 0.0, 0.0]


# -- TRL ---------------------------------------------------------------------------------

CHAT_PROMPT = [{"role": "user", "content": "What is 1/3 as a fraction?"}]


def test_trl_accuracy_reward_matches_trl_itself(open_graders: list[object]) -> None:
    pytest.importorskip("math_verify")
    from trl.rewards import accuracy_reward

    completions = [
        r"The answer is \boxed{\frac{1}{3}}",
        r"My answer is \boxed{\frac{1}{2}}",
        r"$\boxed{0.5}$",
        "I do not know",
        r"So $x = \boxed{68}$",
        r"\boxed{72}",
    ]
    solutions = [r"$\frac{1}{3}$", r"$\frac{1}{3}$", r"$\frac{1}{2}$", "$5$", "$68$", "no math"]
    rows = [{"prompt": CHAT_PROMPT, "solution": solution} for solution in solutions]
    grader = build("trl:trl.rewards:accuracy_reward", open_graders, timeout_s=60.0)
    assert isinstance(grader, TrlGrader)
    results = grade(grader, completions, solutions, rows)  # type: ignore[arg-type]

    conversational = [[{"role": "assistant", "content": text}] for text in completions]
    expected = accuracy_reward(conversational, solutions)
    assert expected == [1.0, 0.0, 1.0, 0.0, 1.0, None]
    assert [r.score for r in results[:5]] == expected[:5]
    # TRL's None ("skip this example": the solution does not parse) is an error row.
    assert results[5] == GradeResult(
        None, None, "trl reward returned None (not applicable to this sample)"
    )


def test_trl_columns_batches_and_conversational_shape(
    rewards: Path, open_graders: list[object]
) -> None:
    spec = f"trl:{rewards}/trl_rewards.py:seen"
    grader = build(spec, open_graders)
    grader.batch_size = 2  # type: ignore[attr-defined]
    rows = [{"prompt": CHAT_PROMPT, "answer": text} for text in ["a", "b", "c"]]
    results = grade(grader, ["a", "b", "x"], ["?"] * 3, rows)  # type: ignore[arg-type]
    assert [r.score for r in results] == [1.0, 1.0, 0.0]

    plain = build(f"trl:{rewards}/trl_rewards.py:length_reward", open_graders, score_range=(0, 10))
    rows = [{"prompt": "Say something.", "kind": "a"}] * 2
    assert grade(plain, ["abcde", "ab"], ["?", "?"], rows) == [  # type: ignore[arg-type]
        GradeResult(0.5, None, raw_score=5.0),
        GradeResult(0.2, None, raw_score=2.0),
    ]


def test_trl_none_and_bad_returns_are_error_rows(rewards: Path, open_graders: list[object]) -> None:
    grader = build(f"trl:{rewards}/trl_rewards.py:only_some", open_graders)
    rows = [{"prompt": "p", "kind": kind} for kind in ["a", "b"]]
    results = grade(grader, ["x", "y"], ["?", "?"], rows)  # type: ignore[arg-type]
    assert results[0] == GradeResult(1.0, None)
    assert results[1].error == "trl reward returned None (not applicable to this sample)"
    short = build(f"trl:{rewards}/trl_rewards.py:short", open_graders)
    results = grade(short, ["x", "y"], ["?", "?"], [{}, {}])  # type: ignore[arg-type]
    assert {r.error for r in results} == {"trl reward returned 1 rewards for 2 completions"}
    words = build(f"trl:{rewards}/trl_rewards.py:words", open_graders)
    [result] = grade(words, ["x"], ["?"], [{}])  # type: ignore[arg-type]
    assert result.error == "trl reward returned str; expected a float in [0, 1] or a bool"
    # A column the function needs and the data set lacks: loud, per rollout.
    [result] = grade(grader, ["x"], ["?"], [{"prompt": "p"}])  # type: ignore[arg-type]
    assert result.error is not None and "kind" in result.error


def test_bad_trl_specs(rewards: Path) -> None:
    with pytest.raises(UsageError, match=r"expected trl:FILE\.py:FUNCTION or trl:module:function"):
        get_grader("trl")
    with pytest.raises(UsageError, match="must accept \\(prompts, completions\\)"):
        get_grader(f"trl:{rewards}/trl_rewards.py:no_completions")


def test_trl_arguments() -> None:
    assert is_conversational(CHAT_PROMPT)
    assert not is_conversational("text") and not is_conversational([])
    prompts, completions, columns = trl_arguments(
        ["x", "y"], [{"prompt": CHAT_PROMPT, "solution": "1"}, {"prompt": "p", "extra": 2}]
    )
    assert prompts == [CHAT_PROMPT, "p"]
    assert completions == [[{"role": "assistant", "content": "x"}], "y"]
    assert columns == {"solution": ["1", None], "extra": [None, 2]}
