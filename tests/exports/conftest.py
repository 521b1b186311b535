"""Runs made by `curate eval` (fake backend) to export, and what every export must hold."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from curate.evaluation.evaluate import evaluate
from curate.stats.analysis import analyze
from curate.store.scores import load_scores
from tests.conftest import fake_eval_options

SYSTEM = "Answer with a number."
N = 12
RUNS = 8
# Pass rate of sample i for the fake backend: never, always, or half the time.
RATES = (0.0, 1.0, 0.5)


def question(i: int) -> str:
    return f"What is {i} + {i}? (ünïcode ✓)"


def rows() -> list[dict[str, Any]]:
    return [
        {"id": f"q{i:02d}", "question": question(i), "answer": 2 * i, "meta": {"level": i % 3}}
        for i in range(N)
    ]


def fake_answers() -> dict[str, tuple[str, float]]:
    """Keyed by the prompt text the fake backend sees: the user message in chat mode,
    the system prompt and question in completion mode."""
    answers = {}
    for i in range(N):
        answers[question(i)] = (str(2 * i), RATES[i % 3])
        answers[f"{SYSTEM}\n\n{question(i)}"] = (str(2 * i), RATES[i % 3])
    return answers


def make_run(tmp: Path, *, mode: str = "chat", system: str | None = SYSTEM) -> Path:
    data = tmp / "data.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows()))
    run = tmp / f"run-{mode}"
    evaluate(fake_eval_options(data, run, fake_answers(), runs=RUNS, mode=mode, system=system))
    return run


@pytest.fixture(scope="session")
def chat_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A chat-mode run with a system prompt: 12 samples, 8 rollouts each."""
    return make_run(tmp_path_factory.mktemp("chat"))


@pytest.fixture(scope="session")
def completion_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same data evaluated in completion mode."""
    return make_run(tmp_path_factory.mktemp("completion"), mode="completion")


@dataclass
class Expected:
    """What the run says about each sample, computed without the exporters."""

    stats: dict[str, dict[str, Any]]
    kept: list[str]  # high-variance sample ids, in the data file's order
    question: dict[str, str]
    answer: dict[str, str]


def expected(run: Path) -> Expected:
    per = analyze(load_scores(run).rollouts).per_sample
    stats = {r["sample_id"]: r for r in per.iter_rows(named=True)}
    order = [f"q{i:02d}" for i in range(N)]
    kept = [s for s in order if stats[s]["category"] == "high_variance"]
    return Expected(
        stats=stats,
        kept=kept,
        question={f"q{i:02d}": question(i) for i in range(N)},
        answer={f"q{i:02d}": str(2 * i) for i in range(N)},
    )


def chat_prompt(question_text: str, system: str | None = SYSTEM) -> list[dict[str, str]]:
    msgs = [{"role": "system", "content": system}] if system else []
    return [*msgs, {"role": "user", "content": question_text}]


STATS = ("pass_rate", "smoothed_pass_rate", "variance", "n_rollouts")


def assert_stats(got: dict[str, Any], want: dict[str, Any]) -> None:
    """The four per-sample statistics every trainer export carries, exactly."""
    for name in STATS:
        assert got[name] == want[name], name  # floats round-trip exactly (JSON repr, Parquet)
    assert isinstance(got["n_rollouts"], int)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture(scope="session")
def chat_tokenizer() -> Any:
    """A real `transformers` tokenizer with a chat template (built offline, no download)."""
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]")), unk_token="[UNK]"
    )
    tok.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    return tok


def render(messages: list[dict[str, str]]) -> str:
    """What `chat_tokenizer` renders for `messages` with a generation prompt."""
    body = "".join(f"<|{m['role']}|>{m['content']}\n" for m in messages)
    return body + "<|assistant|>"


def frame_rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    return list(frame.iter_rows(named=True))
