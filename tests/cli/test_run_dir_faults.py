"""Run-directory faults through the real CLI: two writers at once, a killed
writer, conflicting duplicates, an unreadable shard, a mistyped manifest, a failed first
attempt, and a finished run that must be left untouched."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from curate.store.run_dir import RolloutStore
from tests.conftest import ARITHMETIC, Result

SAMPLES, RUNS = 20, 2
EVAL = ("eval", ARITHMETIC, "-m", "fake", "--backend", "fake", "-q")


def eval_args(run: Path, *extra: object) -> list[object]:
    return [*EVAL, "--limit", SAMPLES, "-n", RUNS, "-o", run, *extra]


def start_curate(*args: object, delay_s: float = 0.0) -> subprocess.Popen[str]:
    """`python -m curate ARGS...` as a background process; the fake backend sleeps
    `delay_s` per request."""
    env = {k: v for k, v in os.environ.items() if k not in ("CURATE_DEBUG", "GITHUB_STEP_SUMMARY")}
    env["CURATE_FAKE_DELAY_S"] = str(delay_s)
    return subprocess.Popen(
        [sys.executable, "-m", "curate", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def lock_taken(run: Path) -> bool:
    """The writer wrote its name into the lock file: it holds the lock."""
    try:
        return bool((run / ".lock").read_text())
    except OSError:
        return False


def stored_rows(run: Path) -> pl.DataFrame:
    """Every row of every shard, duplicates included."""
    shards = RolloutStore(run).shard_paths()
    return pl.read_parquet(shards).select("sample_id", "rollout_idx", "score", "error")


def assert_complete_once(run: Path) -> None:
    rows = stored_rows(run)
    assert rows.height == SAMPLES * RUNS
    assert rows.select("sample_id", "rollout_idx").n_unique() == SAMPLES * RUNS
    assert rows["error"].null_count() == rows.height


def one_error_line(result: Result | subprocess.CompletedProcess[str]) -> str:
    err = result.stderr
    assert err.startswith("curate: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err.removeprefix("curate: error: ").rstrip("\n")


def files(run: Path) -> dict[Path, tuple[bytes, int]]:
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in run.rglob("*") if p.is_file()}


# -- 1. one writer at a time --------------------------------------------------------


def test_a_second_eval_on_a_run_being_written_is_refused(outdir: Path, run_curate) -> None:
    run = outdir / "run"
    first = start_curate(*eval_args(run, "--chunk-size", 2), delay_s=0.2)  # ~4 s
    try:
        wait_for(lambda: lock_taken(run) or first.poll() is not None, "the first eval's lock")
        holder = json.loads((run / ".lock").read_text())
        second = run_curate(*eval_args(run))
    finally:
        _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert second.returncode == 1
    line = one_error_line(second)
    assert line.startswith(
        f"{run}: another curate eval (pid {first.pid} on {holder['host']}, since "
    )
    assert line.endswith("is writing this run directory; wait for it or use another --out")
    assert second.stdout == ""
    # Only the first process wrote: every shard carries its pid, every rollout once.
    assert all(f"-{first.pid}-" in p.name for p in RolloutStore(run).shard_paths())
    assert_complete_once(run)
    assert not (run / ".lock").exists()


def test_two_evals_started_together_write_every_rollout_once(outdir: Path) -> None:
    run = outdir / "run"
    procs = [start_curate(*eval_args(run, "--chunk-size", 4), delay_s=0.1) for _ in range(2)]
    outputs = [p.communicate(timeout=120) for p in procs]
    results = [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs, strict=True)]
    codes = sorted(code for code, _, _ in results)
    # The loser is refused; had it reached the lock only after the winner finished,
    # it would have found nothing left to do.
    assert codes in ([0, 1], [0, 0]), results
    if codes == [0, 0]:
        assert any("0 new rollouts" in out for _, out, _ in results)
    else:
        assert any("is writing this run directory" in err for _, _, err in results)
    assert_complete_once(run)


def test_a_killed_eval_does_not_keep_the_lock(outdir: Path, run_curate) -> None:
    run = outdir / "run"
    first = start_curate(*eval_args(run, "--chunk-size", 1), delay_s=0.5)  # ~10 s
    try:
        wait_for(lambda: bool(RolloutStore(run).shard_paths()), "a first shard")
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=60)
    assert first.returncode == -signal.SIGKILL
    assert (run / ".lock").exists()  # left behind by the dead writer, but not held
    result = run_curate(*eval_args(run))
    assert result.returncode == 0, result.stderr
    assert "already stored" in result.stdout and "(0 already stored)" not in result.stdout
    assert_complete_once(run)
    assert not (run / ".lock").exists()


def test_force_new_is_refused_before_it_deletes_anything(outdir: Path, cli) -> None:
    run = outdir / "run"
    assert cli(*eval_args(run)).exit_code == 0
    before = files(run)
    with RolloutStore(run).writer():  # another writer, as far as the command can tell
        result = cli(*eval_args(run, "--force-new", "--temperature", 0.5))
        assert result.exit_code == 1
        assert "is writing this run directory" in one_error_line(result)
    assert files(run) == before


# -- 2. conflicting duplicates ---------------------------------------------------------


def test_conflicting_duplicates_are_reported_not_resolved(outdir: Path, cli) -> None:
    run = outdir / "run"
    assert cli(*eval_args(run)).exit_code == 0
    # What two unlocked writers left behind: a second shard re-scoring some pairs.
    stored = RolloutStore(run).rollouts()
    again = stored.head(6).with_columns((1.0 - pl.col("score")).alias("score"))
    extra = RolloutStore(run).append(again)
    assert extra is not None
    for args in (("report", run), eval_args(run)):
        result = cli(*args)
        assert result.exit_code == 2, result.stdout
        line = one_error_line(result)
        first = again.row(0, named=True)
        assert line.startswith(
            f"{run / 'rollouts'}: 6 (sample_id, rollout_idx) pair(s) scored twice"
        )
        assert f"sample {first['sample_id']!r} run {first['rollout_idx']} scored" in line
        assert extra.name in line


def test_a_retried_error_is_not_a_conflict(outdir: Path, cli) -> None:
    run = outdir / "run"
    assert cli(*eval_args(run)).exit_code == 0
    store = RolloutStore(run)
    # The first attempt at two pairs failed, in a shard written before the good ones.
    failed = (
        store.rollouts()
        .head(2)
        .with_columns(
            pl.lit(None, dtype=pl.Float64).alias("score"), pl.lit("timeout").alias("error")
        )
    )
    failed.write_parquet(run / "rollouts" / "part-00000000000000000000-1-000000.parquet")
    result = cli("report", run, "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["errors"] == 0


# -- 3. an unreadable shard ------------------------------------------------------------


def test_an_unreadable_shard_is_named_and_can_be_set_aside(outdir: Path, cli) -> None:
    run = outdir / "run"
    assert cli(*eval_args(run, "--chunk-size", 1)).exit_code == 0
    shards = RolloutStore(run).shard_paths()
    assert len(shards) == SAMPLES
    bad = shards[11]
    bad.write_bytes(bad.read_bytes()[:100])  # an interrupted copy
    for args in (("report", run), eval_args(run)):
        result = cli(*args)
        assert result.exit_code == 2
        line = one_error_line(result)
        assert line.startswith(f"{bad}: cannot read rollout shard: not a readable Parquet file")
        assert "--set-aside-corrupt" in line
    result = cli(*eval_args(run, "--set-aside-corrupt"))
    assert result.exit_code == 0, result.stderr
    assert f"set aside 1 unreadable shard(s) in {run / 'rollouts' / 'corrupt'}" in result.stdout
    assert f"{RUNS} new rollouts" in result.stdout  # only what the bad shard held
    assert (run / "rollouts" / "corrupt" / bad.name).is_file()
    assert_complete_once(run)
    assert cli("report", run).exit_code == 0


# -- 4. a mistyped manifest --------------------------------------------------------------


@pytest.mark.parametrize("command", ["eval", "report"])
def test_a_mistyped_manifest_names_the_file_and_field(outdir: Path, cli, command: str) -> None:
    run = outdir / "run"
    assert cli(*eval_args(run)).exit_code == 0
    manifest = json.loads((run / "manifest.json").read_text())
    manifest.update(adaptive=True, adaptive_policy=3)
    (run / "manifest.json").write_text(json.dumps(manifest))
    before = files(run)
    result = cli(*(eval_args(run) if command == "eval" else ["report", run]))
    assert result.exit_code == 2
    assert one_error_line(result) == (
        f"{run / 'manifest.json'}: manifest field 'adaptive_policy' is an integer, "
        "expected an object or null"
    )
    assert files(run) == before


# -- 5. a run directory without a rollout keeps no settings --------------------------


def test_a_run_without_rollouts_accepts_new_settings(outdir: Path, cli) -> None:
    run = outdir / "run"
    assert cli(*eval_args(run, "--temperature", 0.7)).exit_code == 0
    refused = cli(*eval_args(run, "--temperature", 0.5))
    assert refused.exit_code == 2 and "--force-new" in one_error_line(refused)
    # A first attempt that wrote its manifest but no rollout (say, a bad model path).
    for shard in RolloutStore(run).shard_paths():
        shard.unlink()
    result = cli(*eval_args(run, "--temperature", 0.5))
    assert result.exit_code == 0, result.stderr
    assert json.loads((run / "manifest.json").read_text())["sampling"]["temperature"] == 0.5
    assert_complete_once(run)


# -- 6. a finished run is left untouched ----------------------------------------------


def test_a_finished_run_writes_nothing_and_starts_nothing(
    outdir: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = outdir / "run"
    assert cli(*eval_args(run)).exit_code == 0
    before = files(run)

    def no_engine(*args: object, **kwargs: object) -> None:
        raise AssertionError("the backend was started for a finished run")

    monkeypatch.setattr("curate.evaluation.evaluate.open_backend", no_engine)
    for runs in (RUNS, 1):  # fewer runs than stored: nothing to do either
        result = cli(*[*EVAL, "--limit", SAMPLES, "-n", runs, "-o", run])
        assert result.exit_code == 0, result.stderr
        assert f"0 new rollouts in 0.0s ({SAMPLES * runs} already stored)" in result.stdout
    assert files(run) == before
    assert sorted(p.name for p in run.iterdir()) == ["manifest.json", "rollouts", "samples.parquet"]
