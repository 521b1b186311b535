"""What an import costs at start-up: the figures behind the rule in docs/development.md
for when an import may go inside a function.

    .venv/bin/python benchmarks/bench_imports.py [--repeat 5]

In fresh processes, REPEAT times each (median printed):
1. a bare interpreter (`python -c pass`), the floor;
2. `curate --help` (`python -m curate --help`), and what it costs above the floor;
3. each third-party module curate imports, alone (`python -c "import M"`), above the
   floor and as a ratio to `curate --help`'s own cost above the floor;
4. curate's own packages that `curate --help` does not load, the same way, to show that
   a library package of curate is cheap once its third-party imports are paid.

A module whose import costs about as much as `curate --help` itself, or more, is one
the CLI must not load before a command needs it; the rest may be imported at the top.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

THIRD_PARTY = (
    "typer",
    "rich",
    "numpy",
    "polars",
    "pyarrow",
    "httpx",
    "matplotlib.pyplot",
    "scipy.stats",
    "datasets",
    "transformers",
    "torch",
    "vllm",
    "ray",
)
# Ours, loaded by commands rather than by `--help` (each brings its third-party imports).
OURS = ("curate.filtering", "curate.exports", "curate.evaluation.ingest", "curate.analysis")


def wall(args: list[str], repeat: int) -> float | None:
    """Median wall time of `python ARGS` in fresh processes; None when it fails."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, *args], capture_output=True)
        if proc.returncode != 0:
            return None
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    floor = wall(["-c", "pass"], args.repeat)
    help_time = wall(["-m", "curate", "--help"], args.repeat)
    assert floor is not None and help_time is not None, "python or curate --help failed"
    help_cost = help_time - floor
    print(f"bare interpreter          {floor * 1000:8.0f} ms (floor)")
    print(f"curate --help             {help_time * 1000:8.0f} ms, {help_cost * 1000:.0f} ms above")
    print()
    print(f"{'module':<26}{'above floor':>12}{'x --help':>10}")
    for module in (*THIRD_PARTY, *OURS):
        took = wall(["-c", f"import {module}"], args.repeat)
        if took is None:
            print(f"{module:<26}{'not installed':>12}")
            continue
        cost = max(took - floor, 0.0)
        print(f"{module:<26}{cost * 1000:9.0f} ms{cost / help_cost:9.1f}x")


if __name__ == "__main__":
    main()
