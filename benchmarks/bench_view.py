"""What `curate view` costs on a large run, and how fast its page opens, in one run.

    .venv/bin/python benchmarks/bench_view.py [--samples 100000] [--rollouts 8] [--chars 120]

1. Writes a run directory once (cached under the temp directory): SAMPLES x RUNS rollouts
   through the real store (`RolloutStore.append`, shards as `curate eval` writes them),
   with prompts and GSM8K-style references in samples.parquet, completions of about CHARS
   characters, extracted answers, token counts, some errors and truncated rollouts.
2. Times `build_site` (the whole of `curate view`) against `build_report` (the whole of
   `curate report`, the baseline) on that run, and prints the ratio.
3. Prints the site's size: everything, the table's index file, the largest chunk.
4. Opens the site from file:// in headless Chromium and prints the time to first render
   (navigation to the first table rows on screen; the page's own clock and the wall clock)
   against opening a one-line static page in the same browser (the baseline), then the time
   to open a sample (its chunk loaded on demand), to filter and sort the whole table, and
   to search it.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.view.cdp: the DevTools driver the tests use

SHARD_ROWS = 1 << 17


def make_run(root: Path, samples: int, runs: int, chars: int, seed: int) -> Path:
    import numpy as np
    import polars as pl

    from curate.store.run_dir import RolloutStore

    run = root / f"view-{samples}x{runs}-{chars}c-seed{seed}"
    if (run / "manifest.json").is_file():
        return run
    partial = run.with_name(run.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    rng = np.random.default_rng(seed)
    store = RolloutStore(partial)
    store.create()
    store.write_manifest(
        {
            "model": "bench",
            "mode": "chat",
            "prompt_field": "question",
            "answer_field": "answer",
            "id_field": "sample_id",
            "grader": "numeric",
            "reference_extract": {"mode": "gsm8k", "summary": "references: gsm8k"},
            "sampling": {"max_tokens": 256},
        }
    )
    ids = np.array([f"s{i:07d}" for i in range(samples)])
    answers = rng.integers(0, 1000, size=samples)
    store.write_samples(
        pl.DataFrame(
            {
                "sample_id": ids,
                "question": [f"Problem {i}: what is {a} plus zero?" for i, a in enumerate(answers)],
                "answer": [f"It is {a}.\n#### {a}" for a in answers],
                "data_source": np.where(np.arange(samples) % 3 == 0, "math", "gsm8k"),
            }
        )
    )
    total = samples * runs
    rate = np.repeat(rng.beta(0.4, 0.6, size=samples), runs)
    right = rng.random(total) < rate
    failed = rng.random(total) < 0.002
    cut = ~failed & (rng.random(total) < 0.03)
    truth = np.repeat(answers, runs)
    said = np.where(right & ~cut, truth, truth + 1)
    filler = "Let me work this out step by step, carefully. " * (chars // 46 + 1)
    frame = (
        pl.DataFrame(
            {
                "sample_id": np.repeat(ids, runs),
                "rollout_idx": np.tile(np.arange(runs, dtype=np.int32), samples),
                "score": np.where(failed, np.nan, (right & ~cut).astype(np.float64)),
                "said": said,
                "failed": failed,
                "truncated": cut,
                "completion_tokens": rng.integers(20, 256, size=total).astype(np.int32),
                "prompt_tokens": np.full(total, 40, dtype=np.int32),
            }
        )
        .with_columns(
            pl.when(pl.col("failed")).then(None).otherwise(pl.col("score")).alias("score"),
            pl.when(pl.col("failed"))
            .then(pl.lit("backend: HTTP 500"))
            .otherwise(None)
            .alias("error"),
            pl.when(pl.col("failed"))
            .then(None)
            .otherwise(pl.format(filler[: max(0, chars - 20)] + " The answer is {}.", "said"))
            .alias("completion"),
            pl.when(pl.col("failed"))
            .then(None)
            .otherwise(pl.col("said").cast(str))
            .alias("extracted"),
            pl.when(pl.col("truncated"))
            .then(pl.lit("length"))
            .otherwise(pl.lit("stop"))
            .alias("finish_reason"),
        )
        .drop("said", "failed")
    )
    for start in range(0, total, SHARD_ROWS):
        store.append(frame.slice(start, SHARD_ROWS))
    partial.rename(run)
    return run


def timed(fn, repeat: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--rollouts", dest="runs", type=int, default=8)
    parser.add_argument("--chars", type=int, default=120)
    parser.add_argument("--repeat", type=int, default=3, help="page opens to time")
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args()

    from curate.report.build import build_report
    from curate.view import build_site
    from tests.view.cdp import NO_BROWSER, browser, find_chromium

    root = Path(args.cache_dir or Path(tempfile.gettempdir()) / "curate-bench")
    root.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    run = make_run(root, args.samples, args.runs, args.chars, args.seed)
    print(
        f"run: {run} ({args.samples:,} x {args.runs} rollouts), ready in "
        f"{time.perf_counter() - start:.1f}s"
    )

    work = Path(tempfile.mkdtemp(prefix="curate-bench-view-"))
    try:
        site = work / "site"
        report_s = timed(lambda: build_report(run), 1)[0]
        result = None
        view_start = time.perf_counter()
        result = build_site([run], site)
        view_s = time.perf_counter() - view_start
        print(
            f"build: curate view {view_s:.1f}s, curate report (baseline) {report_s:.1f}s, "
            f"ratio {view_s / report_s:.1f}x"
        )
        index = (site / "data" / "index.js").stat().st_size
        chunks = sorted((site / "data").glob("chunk-*.js"), key=lambda p: p.stat().st_size)
        print(
            f"site: {result.bytes / 1e6:.1f} MB in {result.files:,} files; table index "
            f"{index / 1e6:.1f} MB; {len(chunks)} chunks, largest "
            f"{chunks[-1].stat().st_size / 1e6:.2f} MB"
        )

        chromium = find_chromium()
        if chromium is None:
            print(f"first render: skipped ({NO_BROWSER})")
            return
        blank = work / "blank.html"
        blank.write_text("<!doctype html><title>b</title><p id=x>ready</p>")
        ready = (
            "document.getElementById('count') && "
            "document.getElementById('count').getAttribute('data-count')"
        )
        with browser(chromium) as b:
            page = b.page()
            page.set_size(1400, 900)
            base, wall, own, sample, filt, sort, search, again = ([] for _ in range(8))
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                page.navigate(blank.as_uri())
                page.wait_for("!!document.getElementById('x')", poll=0.005)
                base.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                page.navigate((site / "index.html").as_uri())
                page.wait_for(ready, timeout=120, poll=0.005)
                wall.append(time.perf_counter() - t0)
                own.append(page.eval("curateView.state.firstRender") / 1000)
                last = page.eval("curateView.state.table.id[curateView.state.table.id.length-1]")
                t0 = time.perf_counter()
                page.eval(f"location.hash = 'sample=' + encodeURIComponent('{last}'); true")
                page.wait_for(
                    "document.getElementById('sample').getAttribute('data-ready')", poll=0.005
                )
                sample.append(time.perf_counter() - t0)
                page.eval("location.hash = ''; true")
                t0 = time.perf_counter()
                page.eval(
                    "var c = document.getElementById('f-category'); c.value = '2';"
                    "document.getElementById('count').removeAttribute('data-count');"
                    "c.dispatchEvent(new Event('change')); true"
                )
                page.wait_for(ready, poll=0.005)
                filt.append(time.perf_counter() - t0)
                t0 = time.perf_counter()  # sort the filtered rows by pass rate (a click)
                page.eval(
                    "document.querySelector('#table-head [data-sort=pass_rate]').click(); true"
                )
                sort.append(time.perf_counter() - t0)
                t0 = time.perf_counter()  # the first search loads the search text too
                page.eval(
                    "var q = document.getElementById('f-search'); q.value = 'problem 4242:';"
                    "document.getElementById('count').removeAttribute('data-count');"
                    "q.dispatchEvent(new Event('input')); true"
                )
                page.wait_for(ready, poll=0.005, timeout=120)
                search.append(time.perf_counter() - t0)
                t0 = time.perf_counter()  # the text is in: a search is a scan
                page.eval(
                    "var q = document.getElementById('f-search'); q.value = 'plus zero';"
                    "document.getElementById('count').removeAttribute('data-count');"
                    "q.dispatchEvent(new Event('input')); true"
                )
                page.wait_for(ready, poll=0.005)
                again.append(time.perf_counter() - t0)
            med = statistics.median
            print(
                f"first render: {med(own):.2f}s on the page's clock, {med(wall):.2f}s wall "
                f"(median of {args.repeat}); a one-line page opens in {med(base) * 1000:.0f} "
                f"ms (baseline), ratio {med(wall) / med(base):.0f}x"
            )
            print(
                f"open a sample (its chunk loaded on demand): {med(sample) * 1000:.0f} ms; "
                f"filter {args.samples:,} samples by category: {med(filt) * 1000:.0f} ms; "
                f"sort them by pass rate: {med(sort) * 1000:.0f} ms; search prompts and "
                f"references: {med(search) * 1000:.0f} ms the first time (loading the text), "
                f"then {med(again) * 1000:.0f} ms (search includes a 120 ms typing pause)"
            )
            if page.exceptions:
                print(f"page errors: {page.exceptions}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
