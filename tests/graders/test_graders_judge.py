"""`--grader judge`: verdict parsing, the rubric, the on-disk cache, and the grader
against a fake OpenAI-compatible judge on loopback (tests/graders/fake_judge.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("openai")

from curate.errors import RunError, UsageError
from curate.graders import get_grader
from curate.graders.base import grade
from curate.graders.checks import check_references
from curate.graders.judge import (
    CACHE_FILE,
    DEFAULT_RUBRIC,
    JudgeCache,
    JudgeConfig,
    JudgeGrader,
    cache_key,
    fill_rubric,
    load_rubric,
    merge_usage,
    parse_verdict,
    verdict_result,
)
from tests.graders.fake_judge import FakeJudge, serve_judge

KEY = "sk-judge-test-KEY-0123456789"
KEY_ENV = "CURATE_TEST_JUDGE_KEY"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Fine work.\nSCORE: 7/10", (7.0, 10.0)),
        ("score: 3.5 / 5", (3.5, 5.0)),
        ("SCORE: **8**/10", (8.0, 10.0)),  # Markdown bold around the number
        ("SCORE: 2/10 at first, then on reflection SCORE: 9/10", (9.0, 10.0)),
        ('Verdict: {"score": 4, "max": 5}', (4.0, 5.0)),
        ('SCORE: 1/10 ... {"score": 3, "max": 4}', (3.0, 4.0)),  # the last verdict counts
        ("SCORE: 11/10", None),  # above the maximum
        ("SCORE: 3/0", None),
        ("SCORE: -1/10", None),
        ('{"score": "7", "max": 10}', None),  # a string is not a score
        ('{"score": true, "max": 1}', None),
        ("The answer looks right.", None),
        ("", None),
    ],
)
def test_parse_verdict(text: str, expected: tuple[float, float] | None) -> None:
    assert parse_verdict(text) == expected


def test_verdict_normalised_with_raw_score() -> None:
    result = verdict_result("ok\nSCORE: 7/10")
    assert result.score == pytest.approx(0.7)
    assert result.raw_score == 7.0
    assert result.extracted == "7/10"
    assert result.error is None


def test_unparsable_verdict_is_an_error_row_keeping_the_text() -> None:
    text = "I think the answer is plausible but I will not commit. " * 40
    result = verdict_result(text)
    assert result.score is None and result.error is not None
    assert "no verdict" in result.error and "I think the answer is plausible" in result.error
    assert len(result.error) < 400  # shortened in the message
    assert result.extracted == text[:1000]  # the text itself, kept


def test_fill_rubric_replaces_only_the_three_placeholders() -> None:
    rubric = 'Q: {prompt}\nA: {completion}\nR: {reference}\nAnswer {"score": x, "max": 10} {other}'
    filled = fill_rubric(rubric, "2+2?", "4 {completion}", "4")
    assert filled.startswith("Q: 2+2?\nA: 4 {completion}\nR: 4\n")
    assert '{"score": x, "max": 10} {other}' in filled


def test_load_rubric(tmp_path: Path) -> None:
    assert load_rubric(None) == DEFAULT_RUBRIC
    for name in ("prompt", "completion", "reference"):
        assert "{" + name + "}" in DEFAULT_RUBRIC
    with pytest.raises(UsageError, match=r"--rubric .*no such file"):
        load_rubric(tmp_path / "missing.txt")
    bad = tmp_path / "bad.txt"
    bad.write_text("Grade {prompt} against {reference}.")
    with pytest.raises(UsageError, match="no \\{completion\\} placeholder"):
        load_rubric(bad)


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"model": " "}, "--judge-model"),
        ({"concurrency": 0}, "--judge-concurrency"),
        ({"price_per_mtok": -1.0}, "--judge-price"),
        ({"price_per_mtok": float("nan")}, "--judge-price"),
        ({"max_tokens": 0}, "--judge-max-tokens"),
    ],
)
def test_judge_config_bad_values(fields: dict[str, object], needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        JudgeConfig(**{"model": "m", **fields})  # type: ignore[arg-type]


def test_registry_needs_judge_settings_and_refuses_them_elsewhere() -> None:
    with pytest.raises(UsageError, match="--judge-model"):
        get_grader("judge")
    with pytest.raises(UsageError, match="apply to --grader judge"):
        get_grader("numeric", judge=JudgeConfig(model="m", base_url="http://127.0.0.1:9/v1"))


def test_cache_skips_a_torn_line_and_appends_after_it(tmp_path: Path) -> None:
    path = tmp_path / CACHE_FILE
    cache = JudgeCache(path)
    cache.put("a", "SCORE: 1/2", 10, 2)
    with path.open("a") as f:
        f.write('{"key": "b", "text": "SCO')  # a writer killed mid-line
    cache = JudgeCache(path)
    assert set(cache.entries) == {"a"}
    cache.put("c", "SCORE: 2/2", 11, 3)
    again = JudgeCache(path)
    assert set(again.entries) == {"a", "c"}
    assert again.get("c") == {
        "key": "c",
        "text": "SCORE: 2/2",
        "prompt_tokens": 11,
        "completion_tokens": 3,
    }


def test_cache_key_covers_every_input() -> None:
    base = ("rubric", "model", "prompt", "completion", "reference")
    keys = {cache_key(*base)}
    for i in range(len(base)):
        changed = list(base)
        changed[i] += "!"
        keys.add(cache_key(*changed))  # type: ignore[arg-type]
    assert len(keys) == len(base) + 1


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def _grader(judge: FakeJudge, tmp_path: Path, **fields: object) -> JudgeGrader:
    config = JudgeConfig(
        model="judge-model",
        base_url=judge.url,
        api_key_env=KEY_ENV,
        cache_path=tmp_path / CACHE_FILE,
        **fields,  # type: ignore[arg-type]
    )
    grader = get_grader("judge", judge=config)
    assert isinstance(grader, JudgeGrader)
    return grader


CONTEXTS = [{"prompt": [{"role": "user", "content": "What is 5 + 7?"}]}] * 3


def test_judge_grades_caches_and_never_writes_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    with serve_judge() as judge:
        grader = _grader(judge, tmp_path, price_per_mtok=2.0)
        completions = ["The answer is 12", "It is 75", "The answer is 12"]
        results = grade(grader, completions, ["12", "12", "12"], CONTEXTS)
        assert [r.score for r in results] == [1.0, 0.2, 1.0]
        assert [r.raw_score for r in results] == [10.0, 2.0, 10.0]
        assert judge.requests == 2  # the repeated judgement is one call
        assert any("user: What is 5 + 7?" in m and "The answer is 12" in m for m in judge.messages)
        assert judge.auth == [f"Bearer {KEY}"] * 2
        usage = grader.usage
        assert (usage.calls, usage.cached) == (2, 0)
        assert usage.prompt_tokens > 0 and usage.cost_usd == pytest.approx(
            (usage.prompt_tokens + usage.completion_tokens) * 2.0 / 1e6
        )
        # A second grader on the same cache (a resumed run) pays for nothing.
        again = _grader(judge, tmp_path)
        assert [r.score for r in grade(again, completions, ["12"] * 3, CONTEXTS)] == [1.0, 0.2, 1.0]
        assert judge.requests == 2
        assert (again.usage.calls, again.usage.cached) == (0, 3)
        # A different rubric is a different judgement.
        rubric = tmp_path / "rubric.txt"
        rubric.write_text("Answer to grade:\n{completion}\n\nReference answer:\n{reference}\n")
        other = _grader(judge, tmp_path, rubric_path=rubric)
        grade(other, completions[:1], ["12"], CONTEXTS[:1])
        assert judge.requests == 3 and not judge.messages[-1].startswith("You are grading")
    text = (tmp_path / CACHE_FILE).read_text()
    assert KEY not in text and len(text.splitlines()) == 3
    assert all(
        set(json.loads(line)) == {"key", "text", "prompt_tokens", "completion_tokens"}
        for line in text.splitlines()
    )


def test_judge_json_verdicts_and_unparsable_answers(tmp_path: Path) -> None:
    with serve_judge(FakeJudge(mode="json")) as judge:
        results = grade(_grader(judge, tmp_path), ["12", "13"], ["12", "12"], CONTEXTS[:2])
        assert [r.score for r in results] == [1.0, 0.2]
        assert [r.raw_score for r in results] == [5.0, 1.0]
    with serve_judge(FakeJudge(mode="garbage")) as judge:
        results = grade(_grader(judge, tmp_path / "g"), ["12"], ["12"], CONTEXTS[:1])
        assert results[0].score is None
        assert "no verdict" in (results[0].error or "")
        assert results[0].extracted == "I cannot decide: the answer seems plausible."


def test_judge_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    with serve_judge(FakeJudge(status=401)) as judge:
        with pytest.raises(RunError, match=f"401.*\\${KEY_ENV}") as info:
            grade(_grader(judge, tmp_path), ["12"], ["12"], CONTEXTS[:1])
        assert KEY not in str(info.value)
    with serve_judge(FakeJudge(status=400)) as judge:
        results = grade(_grader(judge, tmp_path), ["12"], ["12"], CONTEXTS[:1])
        assert results[0].error is not None and "400" in results[0].error
    with serve_judge(FakeJudge(status=503)) as judge:
        results = grade(_grader(judge, tmp_path, max_retries=1), ["12"], ["12"], CONTEXTS[:1])
        assert results[0].score is None and "gave up after 2 attempts" in (results[0].error or "")
        assert judge.requests == 2
    assert not (tmp_path / CACHE_FILE).exists()  # nothing answered: nothing cached


def test_unreachable_judge_stops_with_one_line(tmp_path: Path) -> None:
    config = JudgeConfig(model="m", base_url="http://127.0.0.1:9/v1", max_retries=0)
    grader = get_grader("judge", judge=config)
    with pytest.raises(RunError, match="--judge-base-url"):
        grade(grader, ["12"], ["12"], CONTEXTS[:1])


def test_judge_needs_a_url_and_a_named_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(UsageError, match="--judge-base-url"):
        get_grader("judge", judge=JudgeConfig(model="m"))
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(UsageError, match=f"{KEY_ENV} is not set"):
        get_grader(
            "judge",
            judge=JudgeConfig(model="m", base_url="http://127.0.0.1:9/v1", api_key_env=KEY_ENV),
        )


def test_judge_is_not_self_checked_against_references(tmp_path: Path) -> None:
    with serve_judge() as judge:
        check = check_references(_grader(judge, tmp_path), {"a": "12", "b": "7"})
        assert judge.requests == 0
    assert check.bad == 0 and check.skipped is not None
    assert "not checked" in check.summary


def test_merge_usage_adds_sessions() -> None:
    first = {"calls": 3, "cached": 0, "prompt_tokens": 30, "completion_tokens": 6, "cost_usd": 0.1}
    second = {
        "calls": 1,
        "cached": 3,
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "cost_usd": 0.05,
    }
    merged = merge_usage(first, second)
    assert merged == {
        "calls": 4,
        "cached": 3,
        "prompt_tokens": 40,
        "completion_tokens": 8,
        "cost_usd": pytest.approx(0.15),
    }
    assert merge_usage(None, second) == second
