"""`curate eval --ray ... --replicas K` as a real process: what reaches the terminal.

One slow test on a local Ray cluster the command starts itself (`--ray local`), with
one replica of the bundled tiny model killed mid-run through the fault hook
(`curate.backends.ray_pool.EXIT_HOOK_ENV`): Ray restarts it, and everything Ray says
about it (the "(raylet)" lines, the driver's own Ray lines) lands in RUN/engine.log
with the replica's own output, while the terminal holds curate's lines only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from curate.backends.ray_pool import EXIT_HOOK_ENV
from curate.store.run_dir import RolloutStore
from tests.conftest import ARITHMETIC, ROOT, TINY_MODEL, VLLM_DEVICE

# Anything of Ray's own: its system lines, a worker's prefixed output, the driver's C++
# core worker and Python logger lines, the notices of its components by name.
RAY_LINE = re.compile(
    r"\(raylet\)|\(autoscaler\)|pid=\d+\)|worker died|will be retried|core_worker|"
    r"gcs_|raylet|\bWARNING\b|\bINFO\b|\bray[./]|Ray Data|token authentication",
    re.IGNORECASE,
)
# The forms of curate's own lines on a run like this one (stderr: preflight, status and
# progress lines; stdout: the summary and the next step).
CURATE_LINE = re.compile(
    r"^(layout|references|grader|check|eval|reference as graded|next): |^sample \S+, |"
    r"^  \| |^\S+: \d+ new rollouts in "
)


@pytest.mark.slow
def test_a_killed_replica_leaves_ray_lines_in_the_engine_log_not_on_the_terminal(
    tmp_path: Path,
) -> None:
    if VLLM_DEVICE == "gpu":
        pytest.skip("one CPU replica of the tiny model: the CPU build's test")
    pytest.importorskip("ray")
    armed = tmp_path / "armed"
    armed.write_text("2")  # the replica's second batch kills it
    run = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("CURATE_DEBUG", "RAY_ADDRESS")}
    env[EXIT_HOOK_ENV] = str(armed)
    args = [sys.executable, "-m", "curate", "eval", str(ARITHMETIC), "--model", str(TINY_MODEL)]
    args += ["--ray", "local", "--replicas", "1", "-n", "2", "--limit", "8", "--max-tokens", "8"]
    args += ["-O", "kv_cache_memory_gb=0.25", "--out", str(run)]
    res = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr
    assert Path(f"{armed}.fired").exists(), "no replica was killed"
    assert RolloutStore(run).rollouts().height == 16

    # Paths as words (their directory names may hold anything, "ray/" included).
    output = (res.stdout + res.stderr).replace(str(tmp_path), "TMP").replace(str(ROOT), "ROOT")
    terminal = output.splitlines()
    assert not [line for line in terminal if RAY_LINE.search(line)], terminal
    assert all(CURATE_LINE.search(line) for line in terminal if line.strip()), terminal
    log = (run / "engine.log").read_text(encoding="utf-8")
    assert re.search(r"^\(raylet\) A worker died or was killed", log, re.MULTILINE), log[-3000:]
    assert re.search(r"^\(raylet\) Task Replica\.generate failed.* will be retried", log, re.M)
    # The replicas' own output (their engines' lines) is there too, by actor and pid.
    assert re.search(r"^\(Replica pid=\d+\) ", log, re.MULTILINE), log[-3000:]
