"""Benchmark `curate report` against its targets, in one run.

    .venv/bin/python benchmarks/bench_report.py [--samples 1000000] [--rollouts 8] [--repeat 5]

1. Generates the data set once and caches it: SAMPLES prompts x RUNS binary rollouts in
   long-format Parquet (sample_id as strings, rollout_idx, score), pass rates drawn from a
   Beta distribution with a fixed seed.
2. Times `curate report --format json` as a whole process, REPEAT times (half before
   and half after the reference, so both see the same machine load), each from a fresh
   runner process so that the child's peak RSS is its own
   (`getrusage(RUSAGE_CHILDREN).ru_maxrss`).
3. Times the variance-plot method's reference computation
   (benchmarks/variance_plot_reference.py: the
   per-sample numpy loop over a dict of score lists) on the same file, also as a whole
   process, and checks that curate's categories, mean score and best-of-N match it.
4. Times `curate --help` and checks that it imports no heavy library.
5. The same work inside one process, reading included and start-up excluded: the
   span the reference times as its own `seconds`.
6. The same report without the console script's fast exit (typer's app() directly, so
   the interpreter tears down as usual), against the console script.
7. For context, two floors that bound any speed-up: `curate report` on 100 samples
   (process start-up: interpreter, typer, polars), and a bare process that imports
   polars, reads the three columns of the big file and exits (what any Parquet-based
   tool pays before computing anything).

Targets: report median <= 1.5 s, >= 100x faster than the reference, peak RSS
<= 1 GB; `curate --help` <= 0.3 s without polars, matplotlib, vllm or torch. The exit
status is 1 when a target or the parity check fails, unless --no-check.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
REFERENCE = HERE / "variance_plot_reference.py"

TARGET_MEDIAN_S = 1.5
TARGET_SPEEDUP = 100.0
TARGET_RSS_BYTES = 1 << 30  # 1 GB
TARGET_HELP_S = 0.3
HEAVY_MODULES = ("polars", "matplotlib", "vllm", "torch")
THRESHOLD = 0.01
# Bump when the generated data changes, so stale caches are not reused.
DATA_VERSION = 1

# Runs one command, waits for it, and reports its wall time and peak RSS. A fresh
# interpreter per measurement: RUSAGE_CHILDREN holds the maximum over all children
# ever waited for, so reusing one process would report the largest so far.
RUNNER = textwrap.dedent(
    """
    import json, resource, subprocess, sys, time
    cmd, out_path = json.loads(sys.argv[1]), sys.argv[2]
    with open(out_path, "wb") as out:
        start = time.perf_counter()
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE)
        wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss = usage.ru_maxrss
    if sys.platform != "darwin":
        rss *= 1024  # kilobytes on Linux, bytes on macOS
    cpu = usage.ru_utime + usage.ru_stime
    print(json.dumps({"wall": wall, "rss": rss, "cpu": cpu, "code": proc.returncode,
                      "stderr": proc.stderr.decode(errors="replace")[-2000:]}))
    """
)


def measure(cmd: list[str], out_path: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps(cmd), str(out_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout)
    if result["code"] != 0:
        raise SystemExit(f"bench: {' '.join(cmd)} exited {result['code']}:\n{result['stderr']}")
    return result


def curate_command() -> list[str]:
    """The installed console script beside this interpreter, else `python -m curate`."""
    script = Path(sys.executable).with_name("curate")
    if script.is_file():
        return [str(script)]
    found = shutil.which("curate")
    return [found] if found else [sys.executable, "-m", "curate"]


# -- data ---------------------------------------------------------------------


def cache_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    base = os.environ.get("XDG_CACHE_HOME") or tempfile.gettempdir()
    return Path(base) / "curate-bench"


def dataset(
    directory: Path,
    samples: int,
    runs: int,
    seed: int,
    alpha: float,
    beta: float,
    shuffle: bool = False,
) -> Path:
    """SAMPLES x RUNS binary rollouts, cached by its parameters."""
    directory.mkdir(parents=True, exist_ok=True)
    order = "-shuffled" if shuffle else ""
    name = (
        f"scores-v{DATA_VERSION}-{samples}x{runs}-seed{seed}-beta{alpha:g}_{beta:g}{order}.parquet"
    )
    path = directory / name
    if path.is_file():
        return path
    import numpy as np
    import polars as pl

    print(f"generating {samples:,} samples x {runs} rollouts -> {path}", flush=True)
    rng = np.random.default_rng(seed)
    pass_rate = rng.beta(alpha, beta, samples)
    scores = (rng.random((samples, runs)) < pass_rate[:, None]).astype(np.float64)
    index = pl.int_range(0, samples, eager=True, dtype=pl.Int64)
    frame = pl.DataFrame(
        {
            # Ids as an eval harness writes them: strings, not zero-padded (so the
            # file is grouped by sample but not in lexical order).
            "sample_id": pl.Series(
                ("prompt-" + index.cast(pl.String)).gather(np.repeat(np.arange(samples), runs))
            ),
            "rollout_idx": np.tile(np.arange(runs, dtype=np.int32), samples),
            "score": scores.ravel(),
        }
    )
    if shuffle:  # rows in random order: curate's general (hash group-by) path
        frame = frame.sample(fraction=1.0, shuffle=True, seed=seed)
    tmp = path.with_suffix(".tmp")
    frame.write_parquet(tmp)
    tmp.replace(path)
    return path


def subset(path: Path, samples: int) -> Path:
    """The first SAMPLES samples of a cached file (for a scaled reference timing)."""
    out = path.with_name(f"{path.stem}-first{samples}.parquet")
    if not out.is_file():
        import polars as pl

        frame = pl.read_parquet(path)
        keep = frame["sample_id"].unique(maintain_order=True).head(samples)
        tmp = out.with_suffix(".tmp")
        frame.filter(pl.col("sample_id").is_in(keep.implode())).write_parquet(tmp)
        tmp.replace(out)
    return out


# -- measurements -------------------------------------------------------------


def time_report(
    path: Path, repeat: int, work: Path, label: str = "curate report"
) -> tuple[list[dict], dict]:
    cmd = [*curate_command(), "report", "--format", "json", str(path)]
    results = []
    out = work / "report.json"
    for i in range(repeat):
        result = measure(cmd, out)
        results.append(result)
        print(
            f"  {label} run {i + 1}/{repeat}: {result['wall']:.3f} s "
            f"(CPU {result['cpu']:.3f} s), peak RSS {result['rss'] / 2**20:.0f} MiB",
            flush=True,
        )
    return results, json.loads(out.read_text())


def time_reference(path: Path, work: Path) -> tuple[dict, dict]:
    cmd = [sys.executable, str(REFERENCE), str(path), "--threshold", str(THRESHOLD)]
    out = work / "reference.json"
    result = measure(cmd, out)
    return result, json.loads(out.read_text())


# The least a polars-based tool can do: start, import polars, decode every row, exit.
READ_FLOOR = (
    "import os, sys, polars as pl; "
    "pl.read_parquet(sys.argv[1], columns=['sample_id', 'rollout_idx', 'score']); os._exit(0)"
)


def time_read_floor(path: Path, repeat: int, work: Path) -> list[float]:
    cmd = [sys.executable, "-c", READ_FLOOR, str(path)]
    return [measure(cmd, work / "floor.txt")["wall"] for _ in range(repeat)]


# The report's work inside one process, reading included and imports excluded: the
# same span the reference times as its own `seconds`.
IN_PROCESS = (
    "import json, sys, time; "
    "from curate.report.build import build_report; "
    "from curate.report.render import render_json; "
    "import polars; "
    "start = time.perf_counter(); "
    "r = build_report(sys.argv[1]); "
    "render_json(r.summary, r.checks, source=r.source, usage=r.usage); "
    "print(json.dumps({'seconds': time.perf_counter() - start}))"
)


# The same command through typer's app() instead of the console script's main(), so
# the interpreter tears down as usual: the baseline for the console script's fast exit.
WITH_TEARDOWN = "import sys; from curate.cli.app import app; sys.argv[0] = 'curate'; app()"


def time_with_teardown(path: Path, repeat: int, work: Path) -> list[float]:
    cmd = [sys.executable, "-c", WITH_TEARDOWN, "report", "--format", "json", str(path)]
    return [measure(cmd, work / "teardown.json")["wall"] for _ in range(repeat)]


def time_in_process(path: Path, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        done = subprocess.run(
            [sys.executable, "-c", IN_PROCESS, str(path)],
            capture_output=True,
            text=True,
            check=True,
        )
        out.append(json.loads(done.stdout)["seconds"])
    return out


def time_help(repeat: int, work: Path) -> tuple[list[float], list[str]]:
    cmd = [*curate_command(), "--help"]
    walls = [measure(cmd, work / "help.txt")["wall"] for _ in range(repeat)]
    # Which modules does `curate --help` import? Run it once under -X importtime.
    target = [cmd[0]] if len(cmd) == 1 else ["-m", "curate"]
    probe = [sys.executable, "-X", "importtime", *target, "--help"]
    done = subprocess.run(probe, capture_output=True, text=True)
    imported = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            imported.add(name.split(".")[0])
    heavy = sorted(m for m in HEAVY_MODULES if m in imported)
    return walls, heavy


def parity(curate: dict, reference: dict) -> list[str]:
    """Differences between curate's report and the reference's numbers."""
    problems = []
    if curate["samples"] != reference["samples"]:
        problems.append(f"samples: curate {curate['samples']} vs reference {reference['samples']}")
    for name, count in reference["categories"].items():
        if curate["categories"].get(name) != count:
            problems.append(
                f"categories.{name}: curate {curate['categories'].get(name)} vs reference {count}"
            )
    for key in ("mean_score", "best_of_n", "potential_gain", "high_variance_fraction"):
        # The JSON report holds 6 significant digits (report/render.py JSON_DIGITS).
        a, b = curate[key], reference[key]
        if a is None or not math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-12):
            problems.append(f"{key}: curate {a!r} vs reference {b!r}")
    return problems


# -- main ---------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )
    parser.add_argument("--samples", type=int, default=1_000_000, help="prompts (default 1e6)")
    parser.add_argument(
        "--rollouts", dest="runs", type=int, default=8, help="rollouts per prompt (default 8)"
    )
    parser.add_argument(
        "--repeat", type=int, default=5, help="timed runs of `curate report` (default 5)"
    )
    parser.add_argument(
        "--help-repeat", type=int, default=7, help="timed runs of `curate --help` (default 7)"
    )
    parser.add_argument(
        "--reference-samples",
        type=int,
        default=None,
        help="time the reference on the first N samples only and scale linearly "
        "(default: the whole data set)",
    )
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.4, help="Beta prior of pass rates")
    parser.add_argument("--beta", type=float, default=0.6, help="Beta prior of pass rates")
    parser.add_argument("--cache-dir", default=None, help="where the data set is cached")
    parser.add_argument(
        "--shuffle",
        action="store_true",
        help="write the rows in random order (exercises the hash group-by path instead of "
        "the dense one)",
    )
    parser.add_argument("--json", dest="json_out", default=None, help="also write figures here")
    parser.add_argument(
        "--no-check",
        action="store_true",
        help="print the figures; exit 0 even if a target is missed",
    )
    args = parser.parse_args()
    if args.samples < 1 or args.runs < 1 or args.repeat < 1 or args.help_repeat < 1:
        parser.error("--samples, --rollouts, --repeat and --help-repeat must be positive")

    cache = cache_dir(args.cache_dir)
    path = dataset(
        cache, args.samples, args.runs, args.seed, args.alpha, args.beta, shuffle=args.shuffle
    )
    tiny = dataset(cache, 100, args.runs, args.seed, args.alpha, args.beta)
    print(f"data: {path} ({path.stat().st_size / 2**20:.1f} MiB)")
    load_before = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} CPUs, load average {load_before:.2f} (1 min)")

    with tempfile.TemporaryDirectory(prefix="curate-bench-") as tmp:
        work = Path(tmp)
        # Half the report runs before the (long) reference run and half after, so that
        # the median sees the same machine load as the reference.
        before = (args.repeat + 1) // 2
        print(f"curate report --format json ({args.repeat} runs):", flush=True)
        runs, report = time_report(path, before, work)

        ref_path, scale = path, 1.0
        if args.reference_samples and args.reference_samples < args.samples:
            ref_path = subset(path, args.reference_samples)
            scale = args.samples / args.reference_samples
        print(f"variance-plot reference on {ref_path.name} (one run) ...", flush=True)
        ref_run, ref = time_reference(ref_path, work)
        if args.repeat > before:
            more, _ = time_report(path, args.repeat - before, work)
            runs += more
        if scale != 1.0:
            # Parity on the same subset the reference saw.
            _, report_for_parity = time_report(ref_path, 1, work, label="parity run")
        else:
            report_for_parity = report

        # The floor: the same command on 100 samples is all process start-up
        # (interpreter, typer, polars), which no data-path work can remove.
        floor_runs, _ = time_report(tiny, 3, work, label="start-up floor (100 samples)")
        read_floor = statistics.median(time_read_floor(path, 3, work))
        in_process = statistics.median(time_in_process(path, 3))
        with_teardown = statistics.median(time_with_teardown(path, 3, work))

        print(f"curate --help ({args.help_repeat} runs) ...", flush=True)
        help_walls, heavy = time_help(args.help_repeat, work)

    walls = [r["wall"] for r in runs]
    median = statistics.median(walls)
    cpu_median = statistics.median(r["cpu"] for r in runs)
    peak_rss = max(r["rss"] for r in runs)
    ref_wall = ref_run["wall"] * scale
    speedup = ref_wall / median
    help_median = statistics.median(help_walls)
    floor = statistics.median(r["wall"] for r in floor_runs)
    problems = parity(report_for_parity, ref)

    print()
    print(f"data set: {args.samples:,} samples x {args.runs} binary rollouts, seed {args.seed}")
    print(
        f"curate report --format json: median {median:.3f} s "
        f"(min {min(walls):.3f}, max {max(walls):.3f}, {len(walls)} runs) "
        f"vs target {TARGET_MEDIAN_S} s: {median / TARGET_MEDIAN_S:.0%} of budget; "
        f"median CPU (user+sys) {cpu_median:.3f} s"
    )
    print(
        f"peak RSS: {peak_rss / 2**20:.0f} MiB vs target {TARGET_RSS_BYTES / 2**20:.0f} MiB: "
        f"{peak_rss / TARGET_RSS_BYTES:.0%} of budget"
    )
    ref_note = (
        f" (measured {ref_run['wall']:.2f} s on {args.reference_samples:,} samples, "
        f"scaled x{scale:g})"
        if scale != 1.0
        else ""
    )
    print(
        f"variance-plot reference: {ref_wall:.2f} s wall{ref_note}, "
        f"CPU {ref_run['cpu'] * scale:.2f} s, peak RSS {ref_run['rss'] / 2**20:.0f} MiB"
    )
    print(
        f"speed-up vs reference: {speedup:.0f}x vs target {TARGET_SPEEDUP:.0f}x "
        f"(in CPU time: {ref_run['cpu'] * scale / cpu_median:.0f}x)"
    )
    print(
        f"start-up floor (`curate report` on 100 samples): {floor:.3f} s, so at most "
        f"{ref_wall / floor:.0f}x is possible against this reference on this machine now"
    )
    print(
        f"read floor (python + import polars + read the 3 columns, nothing else): "
        f"{read_floor:.3f} s ({ref_wall / read_floor:.0f}x the reference); curate's own work "
        f"on top of it (CLI, checks, statistics, output): {median - read_floor:.3f} s"
    )
    ref_inside = ref["seconds"] * scale
    print(
        f"inside the process (reading included, start-up excluded, as the reference times "
        f"itself): curate {in_process:.3f} s vs reference {ref_inside:.2f} s: "
        f"{ref_inside / in_process:.0f}x"
    )
    print(
        f"fast exit: the same report with the interpreter's usual teardown takes "
        f"{with_teardown:.3f} s ({with_teardown / median:.2f}x the console script's {median:.3f} s)"
    )
    print(
        f"curate --help: median {help_median:.3f} s vs target {TARGET_HELP_S} s; "
        f"heavy imports: {', '.join(heavy) or 'none'}"
    )
    print(
        "parity with the reference (categories, mean score, best-of-N, gain, "
        f"high-variance share{' on the subset' if scale != 1.0 else ''}): "
        + ("ok" if not problems else "MISMATCH")
    )
    for p in problems:
        print(f"  {p}")

    missed = []
    if median > TARGET_MEDIAN_S:
        missed.append(f"report median {median:.3f} s > {TARGET_MEDIAN_S} s")
    if speedup < TARGET_SPEEDUP:
        missed.append(f"speed-up {speedup:.0f}x < {TARGET_SPEEDUP:.0f}x")
    if peak_rss > TARGET_RSS_BYTES:
        missed.append(f"peak RSS {peak_rss / 2**20:.0f} MiB > {TARGET_RSS_BYTES / 2**20:.0f} MiB")
    if help_median > TARGET_HELP_S:
        missed.append(f"--help {help_median:.3f} s > {TARGET_HELP_S} s")
    if heavy:
        missed.append(f"--help imports {', '.join(heavy)}")
    if problems:
        missed.append("parity with the reference")

    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps(
                {
                    "samples": args.samples,
                    "runs": args.runs,
                    "report_walls_s": walls,
                    "report_median_s": median,
                    "report_cpu_median_s": cpu_median,
                    "reference_cpu_s": ref_run["cpu"] * scale,
                    "report_peak_rss_bytes": peak_rss,
                    "reference_s": ref_wall,
                    "reference_scaled_from": args.reference_samples if scale != 1.0 else None,
                    "speedup": speedup,
                    "help_walls_s": help_walls,
                    "help_median_s": help_median,
                    "help_heavy_imports": heavy,
                    "startup_floor_s": floor,
                    "read_floor_s": read_floor,
                    "in_process_s": in_process,
                    "with_teardown_s": with_teardown,
                    "reference_in_process_s": ref_inside,
                    "in_process_speedup": ref_inside / in_process,
                    "shuffled": args.shuffle,
                    "parity_problems": problems,
                    "missed": missed,
                    "load_average": [load_before, os.getloadavg()[0]],
                },
                indent=2,
            )
            + "\n"
        )

    print(f"load average (1 min): {load_before:.2f} at start, {os.getloadavg()[0]:.2f} at end")
    print()
    if missed:
        print("TARGETS MISSED: " + "; ".join(missed))
        return 0 if args.no_check else 1
    print("all targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
