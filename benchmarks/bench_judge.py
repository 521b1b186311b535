"""Benchmark: `--grader judge` throughput against a local judge with a fixed latency.

The judge is the loopback fake of the tests (tests/graders/fake_judge.py: stdlib HTTP,
a threaded server that sleeps --latency seconds per request, then answers a verdict),
so the figure is the client's: how well the remote-call core overlaps judge requests.
The same N distinct judgements are made three times, each with a fresh cache:

- concurrency 1 (one request in flight: the baseline);
- the default concurrency (JudgeConfig's, 16);
- the default again, a second pass on a warm cache (every judgement from disk).

    python benchmarks/bench_judge.py [--judgements 200] [--latency 0.05] [--repeats 3]

Prints judgements per second for each, and the ratio of the default to concurrency 1
(ideal: min(16, N) for a judge that never queues; the fake's threads and the 2 cores
it shares with the client set the real ceiling).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for tests.graders.fake_judge

from curate.graders.base import grade  # noqa: E402
from curate.graders.judge import CACHE_FILE, JudgeConfig, JudgeGrader  # noqa: E402
from tests.graders.fake_judge import FakeJudge, serve_judge  # noqa: E402


def one_pass(url: str, n: int, concurrency: int, cache: Path) -> tuple[float, int]:
    """Seconds to judge `n` distinct completions, and the calls made."""
    config = JudgeConfig(
        model="bench-judge", base_url=url, concurrency=concurrency, cache_path=cache
    )
    grader = JudgeGrader("judge", config)
    completions = [f"The answer is {i}" for i in range(n)]
    references = [str(i if i % 3 else i + 1) for i in range(n)]
    contexts = [{"prompt": f"What is {i} + 0?"} for i in range(n)]
    started = time.perf_counter()
    results = grade(grader, completions, references, contexts)
    seconds = time.perf_counter() - started
    assert all(r.score is not None for r in results), "the fake judge always gives a verdict"
    return seconds, grader.usage.calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgements", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per judge answer")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n = args.judgements
    default = JudgeConfig(model="x").concurrency
    timings: dict[str, list[float]] = {
        "concurrency 1": [],
        f"concurrency {default}": [],
        "warm cache": [],
    }
    with (
        serve_judge(FakeJudge(latency_s=args.latency)) as judge,
        tempfile.TemporaryDirectory() as tmp,
    ):
        one_pass(judge.url, 4, 1, Path(tmp) / "warmup.jsonl")  # imports, first connection
        for k in range(args.repeats):
            seconds, calls = one_pass(judge.url, n, 1, Path(tmp) / f"one-{k}" / CACHE_FILE)
            assert calls == n
            timings["concurrency 1"].append(seconds)
            cache = Path(tmp) / f"many-{k}" / CACHE_FILE
            seconds, calls = one_pass(judge.url, n, default, cache)
            assert calls == n
            timings[f"concurrency {default}"].append(seconds)
            seconds, calls = one_pass(judge.url, n, default, cache)
            assert calls == 0, "a warm cache pays for nothing"
            timings["warm cache"].append(seconds)
    print(
        f"judge benchmark: {n} distinct judgements, fake judge latency "
        f"{args.latency * 1000:.0f} ms, median of {args.repeats}"
    )
    rates = {}
    for label, values in timings.items():
        median = statistics.median(values)
        rates[label] = n / median
        print(f"  {label:<16} {median:8.3f} s  {rates[label]:9.1f} judgements/s")
    ratio = rates[f"concurrency {default}"] / rates["concurrency 1"]
    print(
        f"concurrency {default} vs 1: {ratio:.1f}x the throughput "
        f"(ideal {min(default, n)}x); warm cache vs concurrency 1: "
        f"{rates['warm cache'] / rates['concurrency 1']:.0f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
