"""Array jobs through the real CLI: K shard processes writing one run directory at
once, `curate status` while and after, refused mistakes (same shard twice, a whole-run
writer beside shard writers, another K, other settings), and bad --shard values."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import polars as pl

from curate.core.shards import ShardSpec
from curate.store.run_dir import RolloutStore
from tests.cli.test_run_dir_faults import (
    EVAL,
    one_error_line,
    start_curate,
    wait_for,
)

SAMPLES, RUNS, K = 24, 3, 3


def args(run: Path, *extra: object) -> list[object]:
    return [*EVAL, "--limit", SAMPLES, "-n", RUNS, "-o", run, *extra]


def shard_lock_taken(run: Path, shard: str) -> bool:
    try:
        return bool((run / f".lock.shard-{shard}").read_text())
    except OSError:
        return False


def all_rows(run: Path) -> pl.DataFrame:
    return pl.read_parquet(RolloutStore(run).shard_paths()).select("sample_id", "rollout_idx")


def test_k_shard_processes_write_one_run_together(outdir: Path, run_curate) -> None:
    run = outdir / "run"
    procs = [
        start_curate(*args(run, "--shard", f"{i}/{K}", "--chunk-size", 1), delay_s=1.0)
        for i in range(K)
    ]
    try:
        # They overlap: every shard's lock is held at one moment.
        wait_for(
            lambda: (
                all(shard_lock_taken(run, f"{i}-of-{K}") for i in range(K))
                or any(p.poll() is not None for p in procs)
            ),
            "all shard writers at once",
        )
        overlapped = all(shard_lock_taken(run, f"{i}-of-{K}") for i in range(K))
        busy = run_curate("status", run, "--format", "json")
        outputs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert overlapped
    assert [p.returncode for p in procs] == [0] * K, outputs
    assert busy.returncode == 1
    during = json.loads(busy.stdout)
    assert during["complete"] is False and during["expected"] == SAMPLES * RUNS
    assert any(part["writer"] for part in during["shards"])

    rows = all_rows(run)
    ids = pl.read_parquet(run / "samples.parquet")["sample_id"].to_list()
    expected = {(sid, r) for sid in ids for r in range(RUNS)}
    pairs = list(zip(rows["sample_id"], rows["rollout_idx"], strict=True))
    assert len(pairs) == len(set(pairs)) == SAMPLES * RUNS  # no duplicates
    assert set(pairs) == expected
    # Each shard wrote its own samples only.
    for i, (out, _) in enumerate(outputs):
        mine = ShardSpec(i, K).select(ids)
        assert f"(shard {i}/{K}): {len(mine) * RUNS} new rollouts" in out

    report = run_curate("report", run, "--format", "json")
    assert report.returncode == 0, report.stderr
    body = json.loads(report.stdout)
    assert body["samples"] == SAMPLES and body["rollouts"] == SAMPLES * RUNS

    status = run_curate("status", run, "--format", "json")
    assert status.returncode == 0, status.stderr
    done = json.loads(status.stdout)
    assert done["complete"] and done["done"] == SAMPLES * RUNS and done["missing"] == 0
    assert [p["shard"] for p in done["shards"]] == [f"{i}/{K}" for i in range(K)]
    assert sum(p["samples"] for p in done["shards"]) == SAMPLES
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["shards"]["count"] == K
    assert manifest["shards"]["runs"] == {str(i): RUNS for i in range(K)}
    assert not list(run.glob(".lock*"))  # every lock file removed by its writer


def test_resume_and_status_per_shard(outdir: Path, run_curate) -> None:
    run = outdir / "run"
    first = run_curate(*args(run, "--shard", f"1/{K}"))
    assert first.returncode == 0, first.stderr
    status = run_curate("status", run)
    assert status.returncode == 1
    assert "incomplete:" in status.stdout and f"shards 0/{K}, 2/{K}" in status.stdout
    # The same shard again: nothing left to do, nothing written.
    before = sorted(RolloutStore(run).shard_paths())
    again = run_curate(*args(run, "--shard", f"1/{K}"))
    assert again.returncode == 0 and "0 new rollouts" in again.stdout
    assert sorted(RolloutStore(run).shard_paths()) == before
    for i in (0, 2):
        assert run_curate(*args(run, "--shard", f"{i}/{K}")).returncode == 0
    final = run_curate("status", run)
    assert final.returncode == 0, final.stdout
    assert f"complete: {SAMPLES * RUNS} of {SAMPLES * RUNS} rollouts" in final.stdout


def stop(proc: subprocess.Popen[str]) -> None:
    """End a writer held up on purpose (its locks die with it)."""
    proc.kill()
    proc.communicate(timeout=60)


def test_a_shard_with_other_settings_is_refused(outdir: Path, run_curate) -> None:
    run = outdir / "run"
    # A writer that stays busy for as long as the test needs (10 s per request).
    first = start_curate(*args(run, "--shard", f"0/{K}", "--chunk-size", 1), delay_s=10)
    try:
        wait_for(lambda: shard_lock_taken(run, f"0-of-{K}") or first.poll() is not None, "lock")
        assert first.poll() is None
        # Shard 0 has stored nothing yet; its settings bind shard 1 anyway.
        assert not RolloutStore(run).shard_paths()
        other = run_curate(*args(run, "--shard", f"1/{K}", "--temperature", "0.5"))
        other_k = run_curate(*args(run, "--shard", "1/2"))
    finally:
        stop(first)
    assert other.returncode == 2
    assert "temperature 1.0 -> 0.5" in one_error_line(other)
    assert other_k.returncode == 1
    line = one_error_line(other_k)
    assert f"is writing shard 0/{K}" in line and "same K" in line


def test_the_same_shard_twice_is_refused_naming_the_writer(outdir: Path, run_curate) -> None:
    run = outdir / "run"
    first = start_curate(*args(run, "--shard", f"2/{K}", "--chunk-size", 1), delay_s=10)
    try:
        wait_for(lambda: shard_lock_taken(run, f"2-of-{K}") or first.poll() is not None, "lock")
        assert first.poll() is None
        holder = json.loads((run / f".lock.shard-2-of-{K}").read_text())
        second = run_curate(*args(run, "--shard", f"2/{K}"))
        whole = run_curate(*args(run))
    finally:
        stop(first)
    assert second.returncode == 1
    line = one_error_line(second)
    assert f"pid {first.pid} on {holder['host']}" in line
    assert f"is writing shard 2/{K} of this run directory" in line
    # A whole-run eval beside a shard writer: refused, naming the shard writers.
    assert whole.returncode == 1
    assert f"2/{K}: {first.pid}@{holder['host']}" in one_error_line(whole)
    # Killed (SIGKILL): its lock file stays, but the lock died with it. Status shows
    # no writer, and the same shard runs again (resuming).
    assert (run / f".lock.shard-2-of-{K}").exists()
    status = run_curate("status", run, "--format", "json")
    assert status.returncode == 1
    assert all(part["writer"] is None for part in json.loads(status.stdout)["shards"])
    again = run_curate(*args(run, "--shard", f"2/{K}"))
    assert again.returncode == 0, again.stderr
    assert not (run / f".lock.shard-2-of-{K}").exists()


def test_a_shard_beside_a_whole_run_writer_is_refused(outdir: Path, run_curate) -> None:
    run = outdir / "run"
    first = start_curate(*args(run, "--chunk-size", 1), delay_s=10)
    try:
        wait_for(
            lambda: (
                ((run / ".lock").is_file() and bool((run / ".lock").read_text()))
                or first.poll() is not None
            ),
            "lock",
        )
        assert first.poll() is None
        shard = run_curate(*args(run, "--shard", f"0/{K}"))
    finally:
        stop(first)
    assert shard.returncode == 1
    line = one_error_line(shard)
    assert f"pid {first.pid}" in line and "whole run directory (no --shard)" in line


def test_bad_shard_values_one_line_exit_2_nothing_written(outdir: Path, run_curate) -> None:
    run = outdir / "run"
    for value, reason in (("3/2", "I must be below K"), ("x", "expected I/K")):
        result = run_curate(*args(run, "--shard", value))
        assert result.returncode == 2
        assert one_error_line(result).startswith(f"--shard: {reason}")
    adaptive = run_curate(*args(run, "--shard", "0/2", "--adaptive"))
    assert adaptive.returncode == 2 and "--adaptive" in one_error_line(adaptive)
    assert not run.exists()
    assert list(outdir.iterdir()) == []


def test_status_on_bad_input(outdir: Path, run_curate) -> None:
    missing = run_curate("status", outdir / "nope")
    assert missing.returncode == 2
    assert "no manifest.json" in one_error_line(missing)


def test_status_counts_errors_as_missing(outdir: Path, run_curate) -> None:
    run = outdir / "run"
    assert run_curate(*args(run)).returncode == 0
    store = RolloutStore(run)
    rows = store.rollouts(["sample_id", "rollout_idx", "error"])
    # Replace one scored rollout by an error row: it is no longer done.
    paths = store.shard_paths()
    frame = pl.read_parquet(paths)
    first = rows.row(0, named=True)
    hit = (pl.col("sample_id") == first["sample_id"]) & (
        pl.col("rollout_idx") == first["rollout_idx"]
    )
    broken = frame.with_columns(
        pl.when(hit).then(pl.lit("backend: boom")).otherwise(pl.col("error")).alias("error"),
        pl.when(hit).then(None).otherwise(pl.col("score")).alias("score"),
    )
    for path in paths:
        path.unlink()
    broken.write_parquet(store.rollouts_dir / paths[0].name)
    result = run_curate("status", run, "--format", "json")
    assert result.returncode == 1
    body = json.loads(result.stdout)
    assert body["errors"] == 1 and body["missing"] == 1 and body["shards"] == []
    assert body["shard_count"] is None
