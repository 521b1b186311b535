"""`curate eval --deepen K --to M` as a user types it, through real processes: every
request that cannot mean anything is refused with one line and exit 2, before anything
is written; a good one deepens and says what it did.

The fake backend answers none of the sample prompts right, so every prompt of the run
is always incorrect (the stratum deepening draws from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from curate.store.run_dir import RolloutStore
from tests.cli.test_run_dir_faults import files, one_error_line
from tests.conftest import ARITHMETIC

BASE = ["eval", ARITHMETIC, "-m", "fake", "--backend", "fake", "-q", "--limit", 6, "-n", 2]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 6 x 2 run made by a real process (shared: the refusals write nothing)."""
    import subprocess
    import sys

    run = tmp_path_factory.mktemp("deepen") / "run"
    args = [sys.executable, "-m", "curate", *map(str, BASE), "-o", str(run)]
    subprocess.run(args, check=True, capture_output=True, timeout=120)
    return run


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--deepen", 0, "--to", 8], "--deepen K must be at least 1"),
        (["--deepen", -3, "--to", 8], "--deepen K must be at least 1"),
        (["--deepen", 2], "--deepen K needs --to M"),
        (["--to", 8], "--to only apply with --deepen K"),
        (["--deepen-stratum", "correct"], "--deepen-stratum only apply with --deepen K"),
        (["--deepen", 2, "--to", 2], "--to 2 must be more than the run's 2 rollouts"),
        (["--deepen", 2, "--to", 1], "--to 1 must be more than the run's 2 rollouts"),
        (["--deepen", 2, "--to", 8, "--adaptive"], "--deepen does not combine with --adaptive"),
        (["--deepen", 2, "--to", 8, "--shard", "0/2"], "does not combine with --shard"),
        (["--deepen", 2, "--to", 8, "--force-new"], "does not combine with --force-new"),
        (["--deepen", 2, "--to", 8, "--dry-run"], "--dry-run does not combine with --deepen"),
        (["--deepen", 2, "--to", 8, "--deepen-stratum", "some"], "must be one of both, "),
        (["--deepen", 2, "--to", 8, "--deepen-stratum", "correct"], "no prompt is always correct"),
    ],
)
def test_a_deepen_that_cannot_mean_anything_is_refused(
    finished_run: Path, run_curate, extra: list[object], words: str
) -> None:
    before = files(finished_run)
    result = run_curate(*BASE, "-o", finished_run, *extra)
    assert result.returncode == 2, result.stderr
    assert words in one_error_line(result)
    assert files(finished_run) == before


def test_a_deepen_needs_the_runs_own_n_and_a_run(
    finished_run: Path, tmp_path: Path, run_curate
) -> None:
    before = files(finished_run)
    other_n = run_curate(*BASE[:-1], 3, "-o", finished_run, "--deepen", 2, "--to", 8)
    assert other_n.returncode == 2
    assert "this run has -n 2; give -n 2 with --deepen" in one_error_line(other_n)
    assert files(finished_run) == before
    nothing = run_curate(*BASE, "-o", tmp_path / "new", "--deepen", 2, "--to", 8)
    assert nothing.returncode == 2
    assert "there is none here; run curate eval without --deepen first" in one_error_line(nothing)
    assert not (tmp_path / "new").exists()


def test_a_deepen_of_a_partly_missing_run_asks_to_finish_it_first(
    tmp_path: Path, run_curate
) -> None:
    run = tmp_path / "run"
    assert run_curate(*BASE, "-o", run).returncode == 0
    store = RolloutStore(run)
    manifest = store.read_manifest()
    manifest["runs"] = 4  # as if -n 4 had been interrupted after two runs
    store.write_manifest(manifest)
    more = [*BASE[:-1], 4]
    result = run_curate(*more, "-o", run, "--deepen", 2, "--to", 8)
    assert result.returncode == 2
    assert "12 of the first 4 rollouts per prompt are still missing" in one_error_line(result)


def test_a_deepen_deepens_and_says_so(tmp_path: Path, run_curate) -> None:
    run = tmp_path / "run"
    assert run_curate(*BASE, "-o", run).returncode == 0
    result = run_curate(*BASE, "-o", run, "--deepen", 4, "--to", 5)
    assert result.returncode == 0, result.stderr
    assert "12 new rollouts" in result.stdout
    assert "deepen: 4 prompts (4 of 6 always incorrect in their first 2)" in result.stdout
    (record,) = RolloutStore(run).read_manifest()["deepen"]
    assert (record["k"], record["to"], record["stratum"]) == (4, 5, "both")
    report = run_curate("report", run, "--format", "json")
    assert report.returncode == 0, report.stderr
    assert '"rollouts": 12,' in report.stdout  # the first 2 of each of 6 prompts
    table = run_curate("report", run)
    assert table.returncode == 0, table.stderr
    assert "deepened run: 4 all-same prompts have up to 5 rollouts (12 more)" in table.stdout
