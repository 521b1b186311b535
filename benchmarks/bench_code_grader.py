"""Throughput of the code grader: programs per second for trivial programs and for
programs that compute for about a second, with 1 and 2 workers, against a bare
`subprocess.run([python, -c, program])` baseline (no sandbox) measured in the same run.

    PYTHONPATH=. python benchmarks/bench_code_grader.py [--trivial 40] [--busy 6]

Prints one line per workload: the baseline rate, curate's rate at workers 1 and 2, and
the ratios (the sandbox's cost per program, and what a second worker buys).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from curate.graders.code import CodeGrader
from curate.graders.sandbox import Limits, protection_available

TEST = "def check(candidate):\n    assert candidate(3) == 6\n"
ROW = {"prompt": "def solve(x):\n", "entry_point": "solve", "test": TEST}
TRIVIAL = "    return 2 * x\n"
# About a second of CPU on one core of the machine this was written on.
BUSY = "    total = 0\n    for i in range(12_000_000):\n        total += i & 1\n    return 2 * x\n"


def bare_rate(body: str, count: int) -> float:
    """Programs per second with a plain subprocess per program, one at a time, on the
    interpreter the sandbox uses (it may be the system's, see curate.graders.sandbox)."""
    program = ROW["prompt"] + body + "\n" + TEST + "\ncheck(solve)\n"
    python = protection_available().python or sys.executable
    started = time.perf_counter()
    for _ in range(count):
        subprocess.run([python, "-I", "-c", program], check=True)
    return count / (time.perf_counter() - started)


def curate_rate(body: str, count: int, workers: int) -> float:
    grader = CodeGrader("code", limits=Limits(wall_s=30.0), workers=workers)
    started = time.perf_counter()
    results = grader.grade_batch([body] * count, [TEST] * count, [ROW] * count)
    seconds = time.perf_counter() - started
    assert all(result.score == 1.0 for result in results), results[:2]
    return count / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trivial", type=int, default=40, help="trivial programs per side")
    parser.add_argument("--busy", type=int, default=6, help="one-second programs per side")
    args = parser.parse_args()
    print(f"sandbox: {protection_available().summary}")
    for name, body, count in (("trivial", TRIVIAL, args.trivial), ("1-second", BUSY, args.busy)):
        curate_rate(body, 2, 1)  # warm-up (file cache, the probe already done)
        bare = bare_rate(body, count)
        one = curate_rate(body, count, 1)
        two = curate_rate(body, count, 2)
        print(
            f"{name:>8} programs: bare subprocess {bare:6.2f}/s | curate workers=1 {one:6.2f}/s "
            f"({one / bare:.2f}x bare) | workers=2 {two:6.2f}/s ({two / one:.2f}x workers=1)"
        )


if __name__ == "__main__":
    main()
