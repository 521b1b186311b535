"""`--grader r3` on the real engine (slow): the bundled reasoning model (tiny-think) on the
bundled arithmetic, offline and through a loopback `vllm serve`.

* the two paths generate the same completions (same seeds) and give the same R3 scores,
  within RAW_TOLERANCE on the raw (log-likelihood) value: the same token ids through the
  same engine, batched differently;
* R3, which never sees a verifier, separates the rollouts the numeric grader calls right
  from the wrong ones: AUROC at least MIN_AUROC (scripts/r3_auroc.py measures 0.99+ on
  100 problems; see docs/guides/verifier-free.md);
* a resume prefills nothing already stored.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import polars as pl
import pytest

from tests.conftest import ARITHMETIC, ROOT, TEST_ENGINE_OPTIONS, TINY_THINK

pytestmark = pytest.mark.slow

SAMPLES = 24
RUNS = 4
MAX_TOKENS = 96
# |raw offline - raw served| per rollout; float32 logits batched two ways differ ~1e-6.
RAW_TOLERANCE = 1e-3
MIN_AUROC = 0.9


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("r3_auroc", ROOT / "scripts" / "r3_auroc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("r3-data") / "arith.jsonl"
    path.write_text("\n".join(ARITHMETIC.read_text().splitlines()[:SAMPLES]) + "\n")
    return path


def _evaluate(data: Path, out: Path, backend: str, engine: dict[str, Any]) -> Any:
    from curate.evaluation.evaluate import evaluate
    from curate.evaluation.options import EvalOptions

    return evaluate(
        EvalOptions(
            data=data,
            model=str(TINY_THINK),
            backend=backend,
            runs=RUNS,
            out=out,
            grader="r3",
            max_tokens=MAX_TOKENS,
            seed=0,
            engine_options=engine,
        )
    )


def _rollouts(run: Path) -> pl.DataFrame:
    from curate.store.run_dir import RolloutStore

    return RolloutStore(run).rollouts().sort("sample_id", "rollout_idx")


@pytest.fixture(scope="module")
def runs(
    tiny_think_server: Any, data: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("r3-runs")
    offline = _evaluate(data, root / "offline", "vllm", dict(TEST_ENGINE_OPTIONS))
    served = _evaluate(data, root / "served", "openai", {"base_url": tiny_think_server.base_url})
    for outcome in (offline, served):
        assert outcome.result.errors == 0
        assert outcome.result.prefills > 0 and outcome.result.prefill_tokens > 0
    return {"offline": offline.run_dir, "served": served.run_dir}


def test_offline_and_server_give_the_same_scores(runs: dict[str, Path]) -> None:
    from curate.store.certainty import read_certainties

    offline, served = _rollouts(runs["offline"]), _rollouts(runs["served"])
    same = ["sample_id", "rollout_idx", "reasoning", "completion"]
    assert offline.select(same).equals(served.select(same))
    both = offline.join(served, on=["sample_id", "rollout_idx"], suffix="_served")
    scored = both.filter(pl.col("raw_score").is_not_null())
    assert scored.height > SAMPLES  # most rollouts reach an answer
    gap = (scored["raw_score"] - scored["raw_score_served"]).abs().max()
    assert gap is not None and gap <= RAW_TOLERANCE  # type: ignore[operator]
    assert both.filter(pl.col("raw_score").is_null())["score"].drop_nulls().eq(0).all()
    tokens = read_certainties(runs["offline"])["tokens"]
    assert tokens.equals(read_certainties(runs["served"])["tokens"])


def test_r3_separates_right_from_wrong_rollouts(runs: dict[str, Path]) -> None:
    result = _script().separation(runs["offline"])
    assert result.right > 10 and result.wrong > 10
    assert result.auroc >= MIN_AUROC, result


def test_the_reflective_tokens_are_the_answer_digits(runs: dict[str, Path]) -> None:
    """tiny-think writes its answer once in the thought ('so 85') and again after it:
    the reference's digits carry the spread, and a sample whose rollouts all reason
    the same way has none."""
    from curate.analysis.reflective import load_reflective

    samples = load_reflective(runs["offline"])
    assert len(samples) >= SAMPLES - 2
    spread = [max(item.spread) for item in samples.values()]
    assert any(s > 0.2 for s in spread) and any(s < 0.01 for s in spread)
    for item in samples.values():
        assert all(token.isdigit() for token in item.tokens), item


def test_a_resume_prefills_nothing_stored(
    tiny_think_server: Any, data: Path, runs: dict[str, Path]
) -> None:
    before = _rollouts(runs["served"])
    outcome = _evaluate(data, runs["served"], "openai", {"base_url": tiny_think_server.base_url})
    assert outcome.result.rollouts == 0 and outcome.result.prefills == 0
    assert _rollouts(runs["served"]).equals(before)
