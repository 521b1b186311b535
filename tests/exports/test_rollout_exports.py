"""`curate.exports.rollouts`: every format written from a run directory with reasoning,
cut-short and error rows, read back with `datasets` and checked with TRL's own data
utilities (the functions its trainers call on a dataset)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from curate.errors import InputError, RunError, UsageError
from curate.exports.rollouts import RolloutExportRequest, export_rollouts
from curate.exports.rollouts.pool import load_pools
from tests.conftest import TINY_MODEL
from tests.exports.rollout_run import ROLLOUTS, write_run

datasets = pytest.importorskip("datasets")
trl_data = pytest.importorskip("trl.data_utils")


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run")


def _export(run: Path, out: Path, kind: str, **options: Any) -> list[dict[str, Any]]:
    export_rollouts(RolloutExportRequest(run, out, kind, **options))
    if out.suffix == ".parquet":
        return datasets.load_dataset("parquet", data_files=str(out), split="train").to_list()
    return datasets.load_dataset("json", data_files=str(out), split="train").to_list()


def _tokenizer() -> Any:
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(TINY_MODEL))


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_sft_keeps_distinct_right_completions_never_cut_short(
    run: Path, tmp_path: Path, suffix: str
) -> None:
    rows = _export(run, tmp_path / f"sft{suffix}", "sft")
    by_prompt: dict[str, list[str]] = {}
    for row in rows:
        assert trl_data.is_conversational(row)
        assert row["messages"][-1]["role"] == "assistant"
        by_prompt.setdefault(row["sample_id"], []).append(row["messages"][-1]["content"])
        stored = ROLLOUTS[row["sample_id"]][row["rollout_idx"]]
        assert stored[0] == 1.0 and not stored[3] and stored[4] is None  # right, whole, no error
    # q1: two equal right texts count once; the cut-short right one never appears.
    assert by_prompt["q1"] == ["<think>2+2 is 4</think>4", "<think>sum</think>The answer is 4"]
    assert len(by_prompt["q3"]) == 1  # eight equal texts
    assert "q4" not in by_prompt  # never right
    # TRL renders each row with the model's chat template (what SFTTrainer does).
    text = trl_data.maybe_apply_chat_template(rows[0], _tokenizer())["text"]
    assert "What is 2 + 2?" in text and "<think>2+2 is 4</think>4" in text


def test_sft_per_prompt_caps_and_reasoning_drop(run: Path, tmp_path: Path) -> None:
    rows = _export(run, tmp_path / "a.jsonl", "sft", per_prompt=1, reasoning="drop")
    assert sorted(r["sample_id"] for r in rows) == ["q1", "q2", "q3"]
    assert all("<think>" not in r["messages"][-1]["content"] for r in rows)
    again = _export(run, tmp_path / "b.jsonl", "sft", per_prompt=1, reasoning="drop")
    assert again == rows  # seeded


def test_standard_style_renders_the_models_chat_template(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", model=str(TINY_MODEL))
    rows = _export(run, tmp_path / "sft.jsonl", "sft", style="standard")
    tok = _tokenizer()
    want = tok.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 2?"}], tokenize=False, add_generation_prompt=True
    )
    row = next(r for r in rows if r["sample_id"] == "q1")
    assert row["prompt"] == want and isinstance(row["completion"], str)
    assert not trl_data.is_conversational(row)
    # TRL leaves standard rows as they are.
    assert trl_data.maybe_apply_chat_template(row, tok)["prompt"] == want


def test_a_completion_mode_run_writes_text_prompts(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", mode="completion")
    rows = _export(run, tmp_path / "dpo.jsonl", "dpo")
    assert rows and all(isinstance(r[k], str) for r in rows for k in ("prompt", "chosen"))
    assert "What is 2 + 2?" in rows[0]["prompt"]
    assert not trl_data.is_conversational(rows[0])
    with pytest.raises(UsageError, match="completion mode"):
        export_rollouts(
            RolloutExportRequest(run, tmp_path / "x.jsonl", "sft", style="conversational")
        )
    assert not (tmp_path / "x.jsonl").exists()


def test_dpo_pairs_are_right_over_wrong_disjoint_and_seeded(run: Path, tmp_path: Path) -> None:
    rows = _export(run, tmp_path / "dpo.parquet", "dpo")
    tok = _tokenizer()
    used: set[tuple[str, int]] = set()
    for row in rows:
        assert trl_data.is_conversational(row)
        chosen = ROLLOUTS[row["sample_id"]][row["chosen_rollout_idx"]]
        rejected = ROLLOUTS[row["sample_id"]][row["rejected_rollout_idx"]]
        assert chosen[0] == 1.0 and rejected[0] == 0.0
        assert not chosen[3] and not rejected[3]  # neither cut short
        for key in ("chosen_rollout_idx", "rejected_rollout_idx"):
            pair = (row["sample_id"], row[key])
            assert pair not in used
            used.add(pair)
        rendered = trl_data.maybe_apply_chat_template(row, tok)
        assert set(rendered) >= {"prompt", "chosen", "rejected"}
        assert "What is" in rendered["prompt"]
    counts = {sid: sum(r["sample_id"] == sid for r in rows) for sid in ROLLOUTS}
    # q1: 2 distinct usable right texts, 3 wrong -> 2 pairs; q2: 1; q3, q4: one outcome.
    assert counts == {"q1": 2, "q2": 1, "q3": 0, "q4": 0}
    assert _export(run, tmp_path / "again.parquet", "dpo") == rows
    assert len(_export(run, tmp_path / "one.jsonl", "dpo", per_prompt=1)) == 2


def test_groups_carry_whole_pools_and_the_objective_weight(run: Path, tmp_path: Path) -> None:
    rows = _export(run, tmp_path / "g.jsonl", "groups", objective="log")
    assert [r["sample_id"] for r in rows] == ["q1", "q2", "q3", "q4"]
    q1 = rows[0]
    assert q1["pool_size"] == 7 and len(q1["completions"]) == 7  # the error row is not one
    assert q1["rewards"] == [1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0]  # cut short: kept, with reward
    assert sum(r["weight"] for r in rows) / len(rows) == pytest.approx(1.0)
    by_rate = sorted(rows, key=lambda r: r["smoothed_pass_rate"])
    assert by_rate[0]["weight"] > by_rate[-1]["weight"]  # log favours the hard prompts
    assert trl_data.is_conversational(q1)
    drawn = _export(run, tmp_path / "g4.jsonl", "groups", group_size=4)
    assert all(len(r["completions"]) == 4 for r in drawn)


def test_balanced_groups_carry_corrected_advantages(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", pool=32)
    rows = _export(run, tmp_path / "b.parquet", "balanced", group_size=4, objective="arcsin")
    assert rows
    for row in rows:
        k = row["pool_passes"]
        p = k / row["pool_size"]
        rewards = row["rewards"]
        assert sum(rewards) == 2 or min(k, row["pool_size"] - k) < 2  # even when it can be
        assert row["baseline"] == pytest.approx(p)
        for r, a, rho in zip(rewards, row["advantages"], row["importance"], strict=True):
            share = sum(x == r for x in rewards) / len(rewards)
            pool_share = p if r == 1.0 else 1 - p
            assert rho == pytest.approx(pool_share / share)
            assert a == pytest.approx(row["weight"] * rho * (r - p))
        assert sum(row["advantages"]) == pytest.approx(0.0, abs=1e-12)


def test_nothing_to_export_writes_nothing(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "b.jsonl"
    with pytest.raises(RunError, match="nothing written"):
        export_rollouts(RolloutExportRequest(run, out, "balanced", group_size=16))
    assert not out.exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kind": "ppo"}, "choose from"),
        ({"kind": "balanced", "group_size": 5}, "even"),
        ({"kind": "groups", "per_prompt": 2}, "--per-prompt"),
        ({"kind": "sft", "group_size": 4}, "--group-size"),
        ({"kind": "groups", "objective": "std"}, "--weights"),
        ({"kind": "groups", "delta": 0.7}, "--weight-delta"),
        ({"kind": "sft", "output": "x.csv"}, ".jsonl or .parquet"),
    ],
)
def test_bad_options_fail_before_reading(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    request = {"run": tmp_path / "missing", "output": tmp_path / "x.jsonl", **options}
    with pytest.raises(UsageError, match=message):
        export_rollouts(RolloutExportRequest(**request))


def test_a_score_table_is_not_enough(tmp_path: Path) -> None:
    table = tmp_path / "scores.jsonl"
    table.write_text(json.dumps({"sample_id": "a", "score": 1.0}) + "\n")
    with pytest.raises(InputError, match="not a run directory"):
        load_pools(table)


def test_a_write_that_fails_midway_leaves_nothing(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from curate.exports.rollouts import run as run_module

    def half_then_fail(rows: list[dict[str, Any]], path: Path) -> None:
        path.write_text(json.dumps(rows[0]) + "\n")
        raise OSError("disk full")

    monkeypatch.setattr(run_module, "write_jsonl_lines", half_then_fail)
    out = tmp_path / "out" / "sft.jsonl"
    out.parent.mkdir()
    with pytest.raises(OSError, match="disk full"):
        export_rollouts(RolloutExportRequest(run, out, "sft"))
    assert list(out.parent.iterdir()) == []
