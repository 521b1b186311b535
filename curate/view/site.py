"""`build_site`: one or more runs as a static site that opens from the disk (the library
call behind `curate view`).

    DIR/index.html           the page (no data in it: data comes from the scripts below)
    DIR/assets/view.js, .css the viewer, copied from the package
    DIR/plots/*.png          the figures, drawn by `curate plot`'s and `curate compare`'s code
    DIR/data/index.js        the headline figures and one compact column per table field
    DIR/data/chunk-K.js      prompts, references and rollouts of CHUNK_SAMPLES samples,
                             loaded when one of them is opened
    DIR/data/search-K.js     prompt and reference text of SEARCH_SAMPLES samples, loaded
                             on the first search

Every data file is a script (`curate.view.script`): browsers refuse fetch() on file://.
The site is written into a hidden sibling directory and renamed into place, so DIR is
either the complete new site or what it was before; an existing DIR that is not a site of
this command is refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import webbrowser
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate import __version__
from curate.core.outcome import CATEGORIES, DEFAULT_GROUP_SIZE, DEFAULT_THRESHOLD, LABELS
from curate.errors import InputError, UsageError
from curate.stats.compare import DEFAULT_ALPHA
from curate.view.collect import ROLLOUT_FIELDS, RunData, as_text, collect_run
from curate.view.script import js_call, js_call_json

if TYPE_CHECKING:
    import polars as pl

    from curate.report.compare import CompareReport

# Samples per rollout chunk: one opened sample loads this many samples' rollouts (about
# 0.3 MB at 8 rollouts of 100 characters), and 100,000 samples make 200 files.
CHUNK_SAMPLES = 500
# Samples per search file: a search loads them all once, in a few files.
SEARCH_SAMPLES = 20_000
# Characters of prompt and reference text a search reads per sample.
SEARCH_CHARS = 2_000
# Characters of a prompt's preview in the table.
PREVIEW_CHARS = 80
# Completion and reasoning characters kept per rollout unless --max-chars says otherwise.
DEFAULT_MAX_CHARS = 20_000
# Marks a directory written by this command (an existing one is replaced, nothing else is).
MARKER = ".curate-view"
ASSETS = ("index.html", "view.js", "view.css")
RUN_PLOTS = ("variance", "histogram", "gate", "length")
COMPARE_PLOTS = ("evolution", "matrix")
# Rollout fields under the short keys chunk files use (the JS reads the same keys).
SHORT_KEYS = {
    "rollout_idx": "i",
    "score": "s",
    "raw_score": "rs",
    "error": "e",
    "completion": "c",
    "reasoning": "r",
    "reasoning_closed": "rc",
    "extracted": "x",
    "finish_reason": "f",
    "truncated": "t",
    "prompt_tokens": "pt",
    "completion_tokens": "ct",
    "latency_s": "l",
    "attempts": "a",
}
# Headline rows: label and the key path into the report JSON they show.
HEADLINE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("samples", ("samples",)),
    ("rollouts", ("rollouts",)),
    ("errors", ("errors",)),
    ("error rate", ("error_rate",)),
    ("mean score", ("mean_score",)),
    ("best-of-N", ("best_of_n",)),
    ("potential gain", ("potential_gain",)),
    ("relative gain", ("relative_gain",)),
    ("high-variance share", ("high_variance_fraction",)),
    ("compute multiplier", ("compute_multiplier", "recommended")),
    ("suspect labels", ("suspect_labels", "count")),
    ("truncation rate", ("lengths", "truncation_rate")),
)


@dataclass
class SiteResult:
    """What `build_site` wrote."""

    out: Path
    samples: int
    rollouts: int
    files: int
    bytes: int
    chunks: int
    capped: int  # completions or reasonings cut at max_chars


def build_site(
    runs: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    max_chars: int | None = DEFAULT_MAX_CHARS,
    group_by: str | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    group_size: int = DEFAULT_GROUP_SIZE,
    alpha: float = DEFAULT_ALPHA,
    chunk_samples: int = CHUNK_SAMPLES,
) -> SiteResult:
    """Write the site of `runs` into `out` (module docstring). `max_chars` caps each
    rollout's completion and reasoning (None or 0: no cap); `group_by` is the report's
    breakdown column and the table's group column (default: data_source when present)."""
    from curate.analysis.compare import run_labels

    paths = [Path(p) for p in runs]
    if not paths:
        raise UsageError("view needs at least one run")
    if chunk_samples < 1:
        raise UsageError("chunk_samples must be at least 1")
    target = Path(out)
    _check_target(target, paths)
    labels = run_labels(paths)
    data = [
        collect_run(p, label, threshold=threshold, group_size=group_size, group_by=group_by)
        for p, label in zip(paths, labels, strict=True)
    ]
    comparison = None
    if len(paths) > 1:
        from curate.report.compare import build_comparison

        comparison = build_comparison(
            paths, alpha=alpha, group_size=group_size, threshold=threshold
        )
    partial = target.with_name(f".{target.name}.partial-{secrets.token_hex(6)}")
    partial.mkdir()
    try:
        result = _write(partial, data, comparison, max_chars or None, group_by, chunk_samples)
        _swap_in(partial, target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    result.out = target
    return result


def _check_target(target: Path, runs: list[Path]) -> None:
    if target.exists() and not target.is_dir():
        raise InputError("exists and is not a directory", path=target)
    if target.is_dir() and any(target.iterdir()) and not (target / MARKER).is_file():
        raise InputError(
            "exists and is not a site written by `curate view`: choose an empty or new directory",
            path=target,
        )
    if not target.parent.is_dir():
        raise InputError(f"directory '{target.parent}' does not exist", path=target)
    for run in runs:
        if not run.exists():
            raise InputError("no such file or run directory", path=run)
        if target.resolve() == run.resolve():
            raise UsageError(f"{target}: the site would replace the run itself")


def _swap_in(partial: Path, target: Path) -> None:
    """Rename the finished site over `target`, removing a previous site there."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{secrets.token_hex(6)}")
        target.rename(old)
    partial.rename(target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _write(
    site: Path,
    runs: list[RunData],
    comparison: CompareReport | None,
    max_chars: int | None,
    group_by: str | None,
    chunk_samples: int,
) -> SiteResult:
    import polars as pl

    for sub in ("assets", "plots", "data"):
        (site / sub).mkdir()
    assets = resources.files("curate.view") / "assets"
    for name in ASSETS:
        dest = site / (name if name == "index.html" else f"assets/{name}")
        dest.write_bytes((assets / name).read_bytes())
    (site / MARKER).write_text(f"curate {__version__}\n")

    ids = sorted(set().union(*(set(r.per_sample["sample_id"].to_list()) for r in runs)))
    order = pl.DataFrame({"sample_id": ids}, schema={"sample_id": pl.String})
    chunks = (len(ids) + chunk_samples - 1) // chunk_samples
    searches = (len(ids) + SEARCH_SAMPLES - 1) // SEARCH_SAMPLES
    meta: dict[str, Any] = {
        "curate": __version__,
        "runs": [_run_meta(site, i, r) for i, r in enumerate(runs)],
        "comparison": None,
        "compare_plots": [],
        "group_by": runs[0].report_json.get("group_by") or group_by,
        "categories": list(CATEGORIES),
        "category_labels": {c: LABELS[c] for c in CATEGORIES},
        "chunk_samples": chunk_samples,
        "chunks": chunks,
        "search_samples": SEARCH_SAMPLES,
        "searches": searches,
        "max_chars": max_chars,
    }
    table: dict[str, Any] = {"id": ids, "runs": [_run_columns(order, r) for r in runs]}
    table.update(_group_columns(order, runs))
    if comparison is not None:
        from curate.report.compare import comparison_dict

        meta["comparison"] = comparison_dict(comparison)
        meta["compare_plots"] = _compare_plots(site, comparison)
        table.update(_transition_columns(order, comparison))
    texts = _texts(runs)
    table["preview"] = [_preview(texts.get(sid, ("", ""))[0]) for sid in ids]
    (site / "data" / "index.js").write_text(js_call("index", meta, table), encoding="utf-8")
    for k in range(searches):
        part = ids[k * SEARCH_SAMPLES : (k + 1) * SEARCH_SAMPLES]
        rows = [" \n ".join(texts.get(sid, ("", ""))).lower()[:SEARCH_CHARS] for sid in part]
        (site / "data" / f"search-{k}.js").write_text(js_call("search", k, rows), "utf-8")
    capped = _write_chunks(site, ids, runs, max_chars, chunk_samples)
    files = [p for p in site.rglob("*") if p.is_file()]
    return SiteResult(
        out=site,
        samples=len(ids),
        rollouts=sum(r.rollouts.height for r in runs),
        files=len(files),
        bytes=sum(p.stat().st_size for p in files),
        chunks=chunks,
        capped=capped,
    )


def _run_meta(site: Path, index: int, run: RunData) -> dict[str, Any]:
    """A run's header: what produced it, its report JSON, its headline rows, its plots."""
    manifest = run.manifest
    extract = manifest.get("reference_extract")
    layout = extract.get("summary") if isinstance(extract, dict) else extract
    report = run.report_json
    g = report["gate"]["group_size"]
    rows = [
        {"label": label, "key": ".".join(path), "text": _value_text(report, path)}
        for label, path in HEADLINE
    ]
    from curate.stats.mixed import mixed_label

    rows.insert(
        9,
        {
            "label": mixed_label(g),
            "key": "gate.expected_open_fraction",
            "text": _value_text(report, ("gate", "expected_open_fraction")),
        },
    )
    # A figure the report leaves null (not computed on this input) is not a row.
    rows = [r for r in rows if r["text"] not in (None, "null")]
    notes = list(run.notes)
    if run.suspects_checked and (report.get("suspect_labels") or {}).get("count") is None:
        notes.append(
            f"suspect labels: {len(run.suspects):,} samples flagged in the table by the "
            "check the report skips unasked on a run this large "
            f"(curate report {run.path} --show suspects lists them)"
        )
    return {
        "label": run.label,
        "path": str(run.path),
        "model": manifest.model,
        "grader": manifest.grader,
        "grader_reason": as_text(manifest.get("grader_reason")),
        "layout": as_text(layout),
        "answer_field": manifest.answer_field,
        "mode": manifest.mode,
        # As recorded: a run made before the policy existed (or a table) shows none.
        "truncation": as_text(manifest.get("truncation")),
        "runs": manifest.runs,
        "notes": notes,
        "suspects_checked": run.suspects_checked,
        "report": report,
        "headline": rows,
        "plots": _run_plots(site, index, run),
    }


def _value_text(report: dict[str, Any], path: tuple[str, ...]) -> str | None:
    """The value at `path` as the JSON report prints it (None when absent)."""

    value: Any = report
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return json.dumps(value)


def _run_plots(site: Path, index: int, run: RunData) -> list[dict[str, str]]:
    """`curate plot`'s figures of the run (`plot_run`, so the same pixels)."""
    from curate.plots.run import plot_run

    threshold = run.report.summary.threshold
    g = run.report.summary.gate["group_size"]
    out = []
    for kind in RUN_PLOTS:
        name = f"plots/run{index}-{kind}.png"
        try:
            plot_run(run.path, kind=kind, output=site / name, threshold=threshold, group_size=g)
        except InputError:  # the length plot without token counts: no such plot
            continue
        out.append({"kind": kind, "file": name})
    return out


def _compare_plots(site: Path, comparison: CompareReport) -> list[dict[str, str]]:
    from curate.plots.compare import comparison_figure
    from curate.plots.save import save_figure

    out = []
    for kind in COMPARE_PLOTS:
        name = f"plots/compare-{kind}.png"
        save_figure(comparison_figure(comparison.comparison, kind), site / name)
        out.append({"kind": kind, "file": name})
    return out


def _aligned(order: pl.DataFrame, frame: pl.DataFrame) -> pl.DataFrame:
    """`frame`'s rows in the site's sample order (null rows for samples it lacks)."""
    return order.join(frame, on="sample_id", how="left", maintain_order="left")


def _rounded(series: pl.Series, digits: int = 6) -> list[Any]:
    return series.cast(float).round(digits).to_list()


def _run_columns(order: pl.DataFrame, run: RunData) -> dict[str, Any]:
    """One run's table columns, in the site's sample order."""
    import polars as pl

    frame = _aligned(order, run.per_sample)
    codes = {c: i for i, c in enumerate(CATEGORIES)}
    category = frame["category"].replace_strict(codes, default=-1, return_dtype=pl.Int8)
    return {
        "category": category.to_list(),
        "pass_rate": _rounded(frame["pass_rate"]),
        "mean_score": _rounded(frame["mean_score"]),
        "variance": _rounded(frame["variance"]),
        "n": frame["n_rollouts"].to_list(),
        "errors": frame["n_errors"].to_list(),
        "truncation": _rounded(frame["truncation"], 4),
        "suspect": [1 if sid in run.suspects else 0 for sid in order["sample_id"].to_list()],
    }


def _group_columns(order: pl.DataFrame, runs: list[RunData]) -> dict[str, Any]:
    """The group column (first run that labels a sample), as codes into `groups`."""
    labels: dict[str, str] = {}
    for run in runs:
        for sid, group in run.per_sample.select("sample_id", "group").iter_rows():
            if group is not None and sid not in labels:
                labels[sid] = group
    names = sorted(set(labels.values()))
    codes = {name: i for i, name in enumerate(names)}
    return {
        "groups": names,
        "group": [codes.get(labels.get(sid, ""), -1) for sid in order["sample_id"].to_list()],
    }


def _transition_columns(order: pl.DataFrame, report: CompareReport) -> dict[str, Any]:
    """First run against last, per sample: `curate compare --per-sample`'s columns."""
    from curate.analysis.compare import per_sample_table
    from curate.stats.compare import SETS

    frame = _aligned(order, per_sample_table(report.comparison))
    pairs = [
        f"{LABELS.get(a, a)} \u2192 {LABELS.get(b, b)}" if a and b else ""
        for a, b in zip(frame["outcome_before"], frame["outcome_after"], strict=True)
    ]
    names = sorted({p for p in pairs if p})
    codes = {name: i for i, name in enumerate(names)}
    sets = [-1] * frame.height
    for i, name in enumerate(SETS):
        for row, flag in enumerate(frame[name].to_list()):
            if flag and sets[row] < 0:
                sets[row] = i
    return {
        "transitions": names,
        "transition": [codes.get(p, -1) for p in pairs],
        "p_value": _rounded(frame["p_value"]),
        "significant": [None if v is None else int(v) for v in frame["significant"].to_list()],
        "sets": list(SETS),
        "set": sets,
    }


def _texts(runs: list[RunData]) -> dict[str, tuple[str, str]]:
    """sample_id -> (prompt text, reference text) from the first run that has them."""
    out: dict[str, tuple[str, str]] = {}
    for run in runs:
        for sid, prompt in run.prompts.items():
            if sid in out:
                continue
            ref = run.references.get(sid, (None, None))
            out[sid] = (_prompt_text(prompt), as_text(ref[1]) or "")
    return out


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, list):
        return "\n".join(as_text(m.get("content")) or "" for m in prompt if isinstance(m, dict))
    return as_text(prompt) or ""


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "\u2026"


def _turns(prompt: Any) -> Any:
    """A prompt as the page shows it: text, or [[role, text], ...] for chat turns."""
    if isinstance(prompt, list):
        return [
            [as_text(m.get("role")) or "", as_text(m.get("content")) or ""]
            for m in prompt
            if isinstance(m, dict)
        ]
    return as_text(prompt)


def _rollout_json(frame: pl.DataFrame, max_chars: int | None) -> tuple[dict[str, str], int]:
    """sample_id -> the sample's rollouts as JSON columns ({"i": [...], "s": [...], ...},
    SHORT_KEYS; a field null in every row of the run is left out), encoded by polars;
    and how many texts were cut at `max_chars` (their full length in the key + "n")."""
    import polars as pl

    exprs: list[pl.Expr] = []
    capped = 0
    for name in ROLLOUT_FIELDS:
        if name not in frame.columns or frame[name].null_count() == frame.height:
            continue
        column = pl.col(name)
        key = SHORT_KEYS[name]
        if name in ("completion", "reasoning") and max_chars is not None:
            length = column.str.len_chars()
            over = int((frame[name].str.len_chars() > max_chars).sum())
            if over:
                capped += over
                exprs.append(pl.when(length > max_chars).then(length).alias(key + "n"))
                column = column.str.slice(0, max_chars)
        exprs.append(column.alias(key))
    grouped = (
        frame.select("sample_id", *exprs)
        .group_by("sample_id", maintain_order=True)
        .agg(pl.exclude("sample_id"))
    )
    encoded = grouped.select(
        "sample_id", pl.struct(pl.exclude("sample_id")).struct.json_encode().alias("json")
    )
    return dict(zip(encoded["sample_id"].to_list(), encoded["json"].to_list(), strict=True)), capped


def _write_chunks(
    site: Path, ids: list[str], runs: list[RunData], max_chars: int | None, size: int
) -> int:
    """data/chunk-K.js for every CHUNK of samples; returns how many texts were capped.

    A sample is {"id", "p": [prompt per run], "ref": [[graded, stored] per run], "ro":
    [rollout columns per run]}; a run whose prompt or reference equals the first run's
    stores null there."""

    capped = 0
    encoded = []
    for run in runs:
        by_sample, cut = _rollout_json(run.rollouts, max_chars)
        encoded.append(by_sample)
        capped += cut

    def dumps(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    for k in range(0, len(ids), size):
        parts = []
        for sid in ids[k : k + size]:
            prompts: list[Any] = []
            references: list[Any] = []
            for run in runs:
                prompt = _turns(run.prompts.get(sid))
                ref = run.references.get(sid)
                pair = None if ref is None else [as_text(ref[0]), as_text(ref[1])]
                prompts.append(None if prompts and prompt == prompts[0] else prompt)
                references.append(None if references and pair == references[0] else pair)
            rollouts = ",".join(by_sample.get(sid, "null") for by_sample in encoded)
            parts.append(
                f'{{"id":{dumps(sid)},"p":{dumps(prompts)},"ref":{dumps(references)},'
                f'"ro":[{rollouts}]}}'
            )
        text = js_call_json("chunk", str(k // size), "[" + ",".join(parts) + "]")
        (site / "data" / f"chunk-{k // size}.js").write_text(text, encoding="utf-8")
    return capped


def open_in_browser(site: Path) -> bool:
    """Open the site's index.html in the default browser; False when there is none."""

    with contextlib.suppress(webbrowser.Error):
        return webbrowser.open((site / "index.html").resolve().as_uri())
    return False
