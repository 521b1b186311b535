"""Benchmark: long completions at scale, end to end through `evaluate()` (what `curate eval` runs).

The fake backend (curate/backends/fake.py, `completion_chars`) answers every rollout with a
`<think>` block of 4,000-16,000 characters and the answer, deterministic per seed and much
faster than any engine, so the figures are curate's own: grading, building the frames,
writing the shards. Each run is a child process, so its peak RSS is its own (os.wait4).

    python benchmarks/bench_long_completions.py                      # 50k and 200k rollouts
    python benchmarks/bench_long_completions.py --sizes 20000 --no-short --no-codecs

Prints, for each size: wall time, rollouts/s, completion text MB/s, on-disk MB/s and bytes
per rollout, peak RSS (whole process, and in the first and second half of the run: a flat
line is memory that does not grow with the run); then `curate report --format json` on the
largest long run against an equal run with short completions (the ratio; the report reads no
text column), and the Parquet codecs on one of the run's shards (size and write time).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUNS = 8  # rollouts per prompt
MIB = 1024 * 1024


def make_data(path: Path, prompts: int, seed: int = 0) -> dict[str, tuple[str, float]]:
    """A JSONL of `prompts` distinct sums and the fake backend's answers for it (pass rates
    spread over [0, 1] so the report has every category)."""
    rng = random.Random(seed)
    answers: dict[str, tuple[str, float]] = {}
    with path.open("w") as f:
        for i in range(prompts):
            a, b = i, rng.randint(0, 999)
            question = f"What is {a} + {b}?"
            answers[question] = (str(a + b), rng.choice([0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0]))
            f.write(json.dumps({"id": f"q{i}", "question": question, "answer": str(a + b)}) + "\n")
    return answers


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child(data: Path, out: Path, chars: str | None) -> None:
    """Run one evaluation and print its figures as JSON (the parent adds peak RSS)."""
    sys.path.insert(0, str(ROOT))
    from curate.evaluation.evaluate import evaluate
    from curate.evaluation.options import EvalOptions

    prompts = sum(1 for _ in data.open())
    answers = make_data(Path(os.devnull), prompts)  # same seed: the same answers
    engine: dict[str, Any] = {"answers": answers}
    if chars:
        lo, _, hi = chars.partition(":")
        engine["completion_chars"] = (int(lo), int(hi))
    samples: list[tuple[float, int]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.2):
            samples.append((time.perf_counter(), rss_bytes()))

    thread = threading.Thread(target=watch, daemon=True)
    start = time.perf_counter()
    thread.start()
    outcome = evaluate(
        EvalOptions(
            data=data,
            model="fake",
            backend="fake",
            runs=RUNS,
            out=out,
            grader="numeric",
            # Room for the longest completion: the fake backend cuts a text at max_tokens
            # (one character a token), as an engine would.
            max_tokens=32768,
            engine_options=engine,
        )
    )
    seconds = time.perf_counter() - start
    stop.set()
    thread.join()
    half = start + seconds / 2
    first = max((r for t, r in samples if t < half), default=0)
    second = max((r for t, r in samples if t >= half), default=0)
    print(
        json.dumps(
            {
                "seconds": seconds,
                "rollouts": outcome.result.rollouts,
                "errors": outcome.result.errors,
                "shards": outcome.result.shards,
                "rss_first_half": first,
                "rss_second_half": second,
            }
        )
    )


def run_child(data: Path, out: Path, chars: str | None) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", str(data), str(out), chars or ""]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, text=True)
    assert proc.stdout is not None
    text = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"child failed ({proc.returncode}): {' '.join(cmd)}")
    figures = json.loads(text.strip().splitlines()[-1])
    figures["peak_rss"] = usage.ru_maxrss * 1024  # Linux: KiB
    # CPU time too: on a shared machine wall time says as much about the neighbours.
    figures["cpu_seconds"] = usage.ru_utime + usage.ru_stime
    return figures


def completion_bytes(run: Path) -> int:
    """Bytes of model text stored: the answer and the reasoning kept apart from it."""
    import polars as pl

    columns = pl.scan_parquet(run / "rollouts" / "*.parquet").collect_schema().names()
    text = [c for c in ("completion", "reasoning") if c in columns]
    return int(
        pl.scan_parquet(run / "rollouts" / "*.parquet")
        .select(pl.sum_horizontal(pl.col(c).str.len_bytes().sum() for c in text))
        .collect()
        .item()
    )


def disk_bytes(run: Path) -> int:
    return sum(p.stat().st_size for p in (run / "rollouts").glob("part-*.parquet"))


def time_report(run: Path, repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds of `curate report RUN --format json` as a whole process."""
    cmd = [sys.executable, "-m", "curate", "report", str(run), "--format", "json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    walls, cpus = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        walls.append(time.perf_counter() - t0)
        cpus.append(usage.ru_utime + usage.ru_stime)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"report failed: {' '.join(cmd)}")
    return statistics.median(walls), statistics.median(cpus)


def codecs(run: Path) -> None:
    """Write one shard of the run with each codec: size and write time."""
    import polars as pl

    shards = sorted((run / "rollouts").glob("part-*.parquet"))
    shard = shards[len(shards) // 2]
    frame = pl.read_parquet(shard)
    text = sum(
        frame[c].str.len_bytes().sum() for c in ("completion", "reasoning") if c in frame.columns
    )
    print(f"\ncodecs on one shard ({frame.height} rollouts, {text / MIB:.1f} MiB of completions):")
    print(
        f"  {'codec':<10} {'MiB':>7} {'B/rollout':>10} {'write CPU s':>11} {'MiB/CPU s':>9} "
        f"{'read CPU s':>10}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "x.parquet"
        for codec, level in [
            ("snappy", None),
            ("lz4", None),
            ("zstd", 1),
            ("zstd", 3),
            ("zstd", 6),
            ("zstd", 9),
        ]:
            writes, reads = [], []
            for _ in range(3):  # CPU seconds (all threads): steadier than wall on a shared box
                t0 = time.process_time()
                frame.write_parquet(target, compression=codec, compression_level=level)  # type: ignore[arg-type]
                writes.append(time.process_time() - t0)
                t0 = time.process_time()
                pl.read_parquet(target)
                reads.append(time.process_time() - t0)
            read = statistics.median(reads)
            size = target.stat().st_size
            name = codec if level is None else f"{codec}:{level}"
            w = statistics.median(writes)
            print(
                f"  {name:<10} {size / MIB:7.1f} {size / frame.height:10.0f} {w:11.3f} "
                f"{text / MIB / w:9.0f} {read:10.3f}"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="50000,200000", help="rollouts per run, comma-separated")
    ap.add_argument("--chars", default="4000:16000", help="think block length range (lo:hi)")
    ap.add_argument("--repeat", type=int, default=3, help="report timings per run (median)")
    ap.add_argument("--rss-bound-mib", type=float, default=1536.0)
    ap.add_argument("--no-short", action="store_true", help="skip the short-completion run")
    ap.add_argument("--no-codecs", action="store_true", help="skip the codec table")
    ap.add_argument("--keep", default=None, help="keep the runs under this directory")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        data, out, chars = args.child
        child(Path(data), Path(out), chars or None)
        return 0

    sizes = [int(s) for s in args.sizes.split(",")]
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-long-"))
    base.mkdir(parents=True, exist_ok=True)
    print(f"fake backend, {RUNS} rollouts per prompt, think blocks of {args.chars} characters")
    print(
        f"{'rollouts':>9} {'wall s':>7} {'CPU s':>6} {'rollouts/s':>10} {'/CPU s':>7} "
        f"{'text MB/s':>9} {'disk MB/s':>9} "
        f"{'B/rollout':>9} {'peak RSS MiB':>12} {'1st half':>8} {'2nd half':>8}"
    )
    peaks: list[float] = []
    long_runs: dict[int, Path] = {}
    for size in sizes:
        data = base / f"data-{size}.jsonl"
        make_data(data, size // RUNS)
        out = base / f"long-{size}"
        f = run_child(data, out, args.chars)
        text, disk = completion_bytes(out), disk_bytes(out)
        s = f["seconds"]
        peaks.append(f["peak_rss"] / MIB)
        long_runs[size] = out
        print(
            f"{f['rollouts']:9,d} {s:7.1f} {f['cpu_seconds']:6.1f} {f['rollouts'] / s:10,.0f} "
            f"{f['rollouts'] / f['cpu_seconds']:7,.0f} {text / 1e6 / s:9.1f} "
            f"{disk / 1e6 / s:9.1f} {disk / f['rollouts']:9,.0f} {f['peak_rss'] / MIB:12.0f} "
            f"{f['rss_first_half'] / MIB:8.0f} {f['rss_second_half'] / MIB:8.0f}"
        )
    growth = peaks[-1] / peaks[0] if peaks[0] else float("nan")
    bound = "within" if max(peaks) < args.rss_bound_mib else "OVER"
    print(
        f"peak RSS {max(peaks):.0f} MiB, {bound} the {args.rss_bound_mib:.0f} MiB bound; "
        f"{sizes[-1] // sizes[0]}x the rollouts: {growth:.2f}x the peak"
    )
    largest = long_runs[sizes[-1]]
    if not args.no_short:
        short = base / f"short-{sizes[-1]}"
        f = run_child(base / f"data-{sizes[-1]}.jsonl", short, None)
        (w_long, c_long), (w_short, c_short) = (
            time_report(largest, args.repeat),
            time_report(short, args.repeat),
        )
        print(
            f"\ncurate report --format json on {sizes[-1]:,} rollouts, median of {args.repeat}:\n"
            f"  long completions  ({disk_bytes(largest) / MIB:8,.1f} MiB on disk): "
            f"{w_long:.2f} s wall, {c_long:.2f} s CPU\n"
            f"  short completions ({disk_bytes(short) / MIB:8,.1f} MiB on disk): "
            f"{w_short:.2f} s wall, {c_short:.2f} s CPU\n"
            f"  ratio long/short: {w_long / w_short:.2f}x wall, {c_long / c_short:.2f}x CPU"
        )
    if not args.no_codecs:
        codecs(largest)
    if not args.keep:
        import shutil

        shutil.rmtree(base, ignore_errors=True)
    return 0 if bound == "within" else 1


if __name__ == "__main__":
    sys.exit(main())
