"""Render a data-set summary as rich tables, JSON, or Markdown (for CI job summaries).

The JSON contract of `curate report --format json` (keys are only ever added; every
float is rounded to 6 significant digits, here and only here; NaN and infinity become
null):

    samples, unscored_samples, rollouts, errors    int
    error_rate, high_variance_fraction, threshold  float
    mean_score, best_of_n                          float | null (null without a score)
    potential_gain, relative_gain                  float | null
    categories        {always_correct, always_incorrect, high_variance, low_variance: int}
    pass_at_k         {"1": float, "2": float, ...}  (keys are k as text)
    gate              {group_size: int, expected_open_fraction: float, interval: {low:
                      float, high: float} | null}: the expected share of samples whose
                      group of G rollouts has rewards not all equal ("mixed groups at G";
                      `curate.stats.mixed`), and its 95% interval when some sample has
                      fewer than G rollouts (or the run was adaptive; null otherwise;
                      `curate.stats.intervals`)
    compute_multiplier
        recommended                 int: multiply the group size by this
        rule_of_thumb               {low: int | null, high: int | null}: the variance-plot
                                    method's range (both null under 10% high variance);
                                    a string ("1-2") before the group option took numbers
        rule_of_thumb_text          str: the same in words ("1-2x", "none (under 10%)")
        reason, rule                str: the recommendation and how it is chosen, in words
        group_size                  int: G, the group size measured against
        recommended_group_size      int: G * recommended
        expected_open_fraction      float: mixed groups at G (equal to gate's)
        recommended_open_fraction   float: mixed groups at the recommended group size
        next_group_size             int: G * (recommended + 1)
        next_gain                   float: what that next step would add
        recommended_open_interval   {low, high: float} | null: 95% interval of
                                    recommended_open_fraction (null: observed)
        next_gain_interval          {low, high: float} | null: the same for next_gain
        recommended_range           {low, high: int} | null: the multipliers the data
                                    allows (95%); null when every figure is observed
        decided                     bool: false when recommended_range holds more than
                                    one value (`reason` then says so, and the remedy)
        remedy                      {deepen: int, to: int} | {max_runs: int} |
                                    {runs: int} | null: the rollouts an undecided
                                    multiplier asks for (`curate eval --deepen K --to M`;
                                    an adaptive run's cap; -n when no prompt is all-same)
    rollouts_per_sample  {min: int, max: int, median: float}
    binary_scores     bool
    prior             {alpha: float, beta: float, kind: "npmle", mean: float,
                      mass_at_0: float, mass_at_1: float, support: [[p, weight]]}: the
                      pass-rate prior (`curate.stats.prior`): alpha and beta are the Beta
                      with its mean and variance, kept from before the NPMLE; support
                      lists its atoms of weight >= 0.001
    top_errors        [{error: str, count: int}]: the most frequent error messages
    group_by          str | null: the column of `by_group` (null: no breakdown)
    by_group          [{group: str | null, samples: int, mean_score: float | null,
                        high_variance_fraction: float, expected_open_fraction: float,
                        errors: int}], most samples first
    deepened          {nominal_runs, prompts, rollouts, max_rollouts: int} (only for a
                      run deepened by `curate eval --deepen`): the prompts deepened and
                      their rollouts past the first nominal_runs, which only the
                      pass-rate prior reads (`curate.core.deepen`)
    warnings          [str]
    gates             [{name: str, passed: bool, message: str}]
    passed            bool
    source            str (when known)
    usage             {prompt_tokens: int | null, completion_tokens: int | null,
                       cost_usd: float | null} (only with token counts or prices)
    suspect_labels    {count: int | null, close_misses: int | null, min_share: float,
                      min_n: int, reason: str | null}: samples whose rollouts agree on
                      an answer graded wrong (only when the input has extracted answers;
                      count null and `reason` saying why when not checked;
                      `curate.analysis.suspects`); close_misses: how many of their
                      majority answers nearly equal the reference
                      (`curate.stats.close_miss`; null without references)
    lengths           completion lengths and truncation (only with completion token
                      counts; `curate.stats.lengths`): rollouts, truncated: int,
                      truncation_rate: float | null, excluded_from_statistics: bool,
                      per_sample_truncation_rate {mean, max: float | null},
                      samples_with_truncation, mostly_truncated_samples,
                      mostly_truncated_never_right: int, mostly_truncated_ids: [str],
                      completion_tokens {right, wrong, truncated: {rollouts: int,
                      p50, p90, p99, max: int | null}}, max_tokens: int | null,
                      recommended_max_tokens: int | null, recommended_cut_share:
                      float | null, recommended_is_lower_bound: bool
    empty_completions {rollouts, empty: int, share, warn_share: float, example:
                      {sample_id: str, rollout_idx: int | null, completion: str} | null}:
                      answers with no letter or digit (only when the input stores
                      completions; `curate.analysis.empty`); table and Markdown show
                      them from a share of warn_share
"""

from __future__ import annotations

import json
import math
import re
import shlex
from typing import TYPE_CHECKING, Any

from curate.analysis.empty import empty_text, flagged
from curate.core.outcome import CATEGORIES, LABELS
from curate.report.checks import CheckResult
from curate.stats.adaptive import model_based_note
from curate.stats.dataset import (
    MAX_MULTIPLIER,
    MULTIPLIER_MIN_GAIN,
    ComputeMultiplier,
    DatasetSummary,
    adds_text,
    deepened_note,
    points_text,
    remedy_text,
)
from curate.stats.mixed import mixed_label
from curate.trainers.settings import DynamicSamplingPlan, plan_lines

if TYPE_CHECKING:
    from rich.console import Console

    from curate.analysis.suspects import SuspectCheck

# The table names the learnable category as such.
CATEGORY_LABELS = {
    **{c: LABELS[c] for c in CATEGORIES},
    "high_variance": f"{LABELS['high_variance']} (learnable)",
}
# Significant digits of every float in the JSON report.
JSON_DIGITS = 6
# Groups shown in the table and Markdown (JSON has them all), and how much of an error
# message fits on one line of them.
SHOWN_GROUPS = 20
ERROR_WIDTH = 60


def _round(value: float) -> float:
    """`value` to JSON_DIGITS significant digits (0.17500000000000004 -> 0.175)."""
    return float(f"{value:.{JSON_DIGITS}g}")


def _clean(value: Any) -> Any:
    """NaN and infinity to null, floats rounded, through dicts and lists."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else _round(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def report_dict(
    summary: DatasetSummary,
    checks: list[CheckResult],
    *,
    source: str | None = None,
    usage: dict[str, Any] | None = None,
    suspects: SuspectCheck | None = None,
) -> dict[str, Any]:
    """The JSON contract of `curate report --format json` (module docstring)."""
    out = summary.to_dict()
    out["gates"] = [{"name": g.name, "passed": g.passed, "message": g.message} for g in checks]
    out["passed"] = all(g.passed for g in checks)
    if source is not None:
        out["source"] = source
    if usage is not None:
        out["usage"] = usage
    if suspects is not None and suspects.has_answers:  # suspect labels
        out["suspect_labels"] = suspects.summary()
    return _clean(out)


def render_json(
    summary: DatasetSummary,
    checks: list[CheckResult],
    *,
    source: str | None = None,
    usage: dict[str, Any] | None = None,
    suspects: SuspectCheck | None = None,
) -> str:
    out = report_dict(summary, checks, source=source, usage=usage, suspects=suspects)
    return json.dumps(out, indent=2) + "\n"


def usage_rows(usage: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(label, value) rows for token usage and cost; none without usage."""
    if usage is None:
        return []
    rows = []
    for key in ("prompt_tokens", "completion_tokens", "prefill_tokens"):
        if usage.get(key) is not None:
            rows.append((key.replace("_", " "), f"{usage[key]:,}"))
    if usage.get("cost_usd") is not None:
        rows.append(("cost (USD)", f"${usage['cost_usd']:,.4f}"))
    return rows


def length_rows(section: dict[str, Any]) -> list[tuple[str, str, str, str, str, str]]:
    """(outcome, rollouts, p50, p90, p99, max) of completion tokens, for table and Markdown."""
    rows = []
    for outcome in ("right", "wrong", "truncated"):
        d = section["completion_tokens"][outcome]
        cells = [d["p50"], d["p90"], d["p99"], d["max"]]
        rows.append(
            (outcome, f"{d['rollouts']:,}", *("-" if c is None else f"{c:,}" for c in cells))
        )
    return rows  # type: ignore[return-value]


def length_lines(section: dict[str, Any]) -> list[str]:
    """The truncation and max_tokens lines under the length table."""
    rate = section["truncation_rate"]
    head = f"truncated: {section['truncated']:,} of {section['rollouts']:,} rollouts"
    if rate is not None:
        head += f" ({rate:.1%})"
    per = section["per_sample_truncation_rate"]
    if per["max"] is not None and section["truncated"]:
        head += f"; per sample mean {per['mean']:.1%}, max {per['max']:.1%}"
    if section["excluded_from_statistics"]:
        head += "; left out of the statistics (--truncated exclude)"
    lines = [head]
    if section["mostly_truncated_samples"]:
        lines.append(
            f"mostly truncated: {section['mostly_truncated_samples']} samples "
            f"({section['mostly_truncated_never_right']} never right: maybe only too short)"
        )
    if (line := max_tokens_sentence(section)) is not None:
        lines.append(line)
    if (line := token_count_line(section.get("token_counts"))) is not None:
        lines.append(line)
    return lines


def token_count_line(counts: dict[str, int] | None) -> str | None:
    """How the token counts were made, when not all were exact (None otherwise)."""
    if not counts or sum(counts.values()) == counts.get("exact", 0):
        return None
    parts = [f"{n:,} {name}" for name, n in counts.items() if n]
    return (
        "token counts: " + ", ".join(parts) + " (tokenizer: counted from the text; "
        "estimated: shares of a request's total; unknown: not recorded): the lengths "
        "above are approximate"
    )


def confidence_rows(section: dict[str, Any]) -> list[tuple[str, ...]]:
    """(measure, AUROC, AUROC within samples, pass rate kept at each cut) rows."""
    rows = []
    for m in section["measures"].values():
        kept = [_pct(k["pass_rate"]) for k in m["kept"]]
        rows.append((m["label"], _fmt(m["auroc"]), _fmt(m["auroc_within_samples"]), *kept))
    return rows


def confidence_head(section: dict[str, Any]) -> tuple[str, ...]:
    keeps = [
        f"pass, top {k['keep']:.0%} kept" for k in next(iter(section["measures"].values()))["kept"]
    ]
    return ("confidence", "AUROC", "AUROC in samples", *keeps)


def confidence_lines(section: dict[str, Any]) -> list[str]:
    """The lines under the confidence table: what it is over, and the early stop."""
    mixed = next(iter(section["measures"].values()))["mixed_samples"]
    lines = [
        f"token confidence (top {section.get('logprobs')} log-probabilities, window "
        f"{section.get('window')} tokens) of {section['rollouts']:,} scored rollouts, "
        f"pass rate {_pct(section['pass_rate'])}; AUROC for full credit, in samples: "
        f"mean over {mixed:,} mixed samples"
    ]
    for stop in section["early_stop"]:
        if not stop["rollouts"]:
            continue
        saved = stop["tokens_saved_share"]
        lines.append(
            f"early stop keeping {stop['keep']:.0%} (DeepConf threshold from warm-up "
            f"rollouts): {stop['stopped']:,} of {stop['rollouts']:,} later rollouts stopped, "
            f"{_pct(saved)} of their tokens saved; pass rate of those finished "
            f"{_pct(stop['pass_rate_finished'])} vs {_pct(stop['pass_rate_all'])} of all"
        )
    return lines


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def max_tokens_sentence(section: dict[str, Any]) -> str | None:
    """The recommended max_tokens as one plain sentence (None without one)."""
    rec = section["recommended_max_tokens"]
    if rec is None:
        return None
    run = section["max_tokens"]
    used = f" (this run used {run:,})" if run is not None else ""
    if section.get("recommended_is_lower_bound"):
        return (
            f"Set max_tokens to at least {rec:,}: 99% of right answers finish within it, "
            f"but the rollouts cut short might have needed more{used}."
        )
    cut = section["recommended_cut_share"]
    cuts = f", and it would cut {cut:.1%} of rollouts" if cut is not None else ""
    return f"Set max_tokens to {rec:,}: 99% of right answers finish within it{cuts}{used}."


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "n/a" if value is None else format(value, spec)


def _share(count: int, total: int) -> str:
    return f"{count / total:.1%}" if total else "n/a"


def share_text(value: float, interval: dict[str, float] | None) -> str:
    """A mixed-group share, with its 95% interval when it has one: "45.1% (95%: 40.2-50.3%)"."""
    if interval is None:
        return f"{value:.1%}"
    return f"{value:.1%} (95%: {interval['low']:.1%}-{interval['high']:.1%})"


def multiplier_lines(m: ComputeMultiplier) -> tuple[str, list[str]]:
    """The compute multiplier as a headline and short detail lines (each well under 80
    columns, so no renderer wraps one mid-phrase): the recommendation, what it buys and
    what the next step would add. One recommendation: the variance-plot rule of thumb
    is not among them (`rule_of_thumb_note`)."""
    g, big = m.group_size, m.recommended_group_size
    verb = "keep" if m.recommended == 1 else "use"
    head = f"{m.recommended}x ({verb} groups of {big} rollouts per prompt)"
    if not m.decided and m.recommended_range is not None:
        head += ", undecided"
    if m.recommended == 1:
        lines = [
            f"{mixed_label(g)}: {share_text(m.expected_open_fraction, m.recommended_open_interval)}"
        ]
    else:
        lines = [
            f"{mixed_label(big)}: "
            f"{share_text(m.recommended_open_fraction, m.recommended_open_interval)}, "
            f"instead of {m.expected_open_fraction:.1%} at G={g}"
        ]
    if m.recommended < MAX_MULTIPLIER or m.next_gain < MULTIPLIER_MIN_GAIN:
        lines.append(f"groups of {m.next_group_size} {adds_text(m.next_gain)}")
    else:
        gain = points_text(m.next_gain)
        lines.append(
            f"groups of {m.next_group_size} would still add {gain}: filtering may pay more"
        )
    if not m.decided and m.recommended_range is not None:
        # `reason` in two short lines: the data cannot choose, and what to do.
        low, high = m.recommended_range["low"], m.recommended_range["high"]
        lines.append(f"the data cannot choose: {low}x to {high}x fit it (95%)")
        lines.append(f"remedy: {remedy_text(m)}")
    return head, lines


def rule_of_thumb_note(m: ComputeMultiplier, high_variance_fraction: float) -> str | None:
    """The variance-plot rule of thumb, where it adds something: when its range leaves
    out the recommendation, a reader who knows the rule learns why curate differs. As
    context, in the Markdown summary; never on the terminal, where it would read as a
    second recommendation (the JSON keeps it as `rule_of_thumb`)."""
    low, high = m.rule_of_thumb.get("low"), m.rule_of_thumb.get("high")
    if low is None or high is None or low <= m.recommended <= high:
        return None
    return (
        f"the variance-plot rule of thumb would say {m.rule_of_thumb_text} for a "
        f"{high_variance_fraction:.1%} learnable share; it looks at that share alone, "
        "while the recommendation above follows how this run's pass rates open more "
        "groups as G grows"
    )


def _one_line(text: str, width: int = ERROR_WIDTH) -> str:
    """An error message on one line, cut to `width` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "\u2026"


def _group_name(value: Any) -> str:
    return "(none)" if value is None else str(value)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(
    summary: DatasetSummary,
    checks: list[CheckResult],
    *,
    source: str | None = None,
    usage: dict[str, Any] | None = None,
    suspects: SuspectCheck | None = None,
) -> str:
    s = summary
    g = s.gate["group_size"]
    headline = share_text(s.gate["expected_open_fraction"], s.gate.get("interval"))
    lines = [f"## curate report{f': `{source}`' if source else ''}", ""]
    if checks:
        verdict = "passed" if all(check.passed for check in checks) else "FAILED"
        lines += [f"**Checks {verdict}**", ""]
        lines += [
            f"- {'✅' if check.passed else '❌'} `{check.name}`: {check.message}"
            for check in checks
        ]
        lines.append("")
    lines += [
        "| metric | value |",
        "| --- | ---: |",
        f"| samples | {s.samples} |",
        f"| rollouts | {s.rollouts} |",
        f"| errors | {s.errors} ({s.error_rate:.1%}) |",
        f"| mean score | {_fmt(s.mean_score)} |",
        f"| best-of-N | {_fmt(s.best_of_n)} |",
        f"| potential gain | {_fmt(s.potential_gain, '+.3f')} |",
        f"| relative gain | {_fmt(s.relative_gain, '+.1%')} |",
        f"| high-variance share | {s.high_variance_fraction:.1%} |",
        f"| {mixed_label(g)} | {headline} |",
        *(f"| {k} | {v} |" for k, v in usage_rows(usage)),
        "",
        "| category | samples | share |",
        "| --- | ---: | ---: |",
    ]
    lines += [
        f"| {CATEGORY_LABELS[c]} | {s.categories[c]} | {_share(s.categories[c], s.samples)} |"
        for c in CATEGORIES
    ]
    if s.pass_at_k:
        ks = list(s.pass_at_k)
        lines += [
            "",
            "| " + " | ".join(f"pass@{k}" for k in ks) + " |",
            "|" + " ---: |" * len(ks),
            "| " + " | ".join(f"{s.pass_at_k[k]:.3f}" for k in ks) + " |",
        ]
    if s.by_group:
        lines += [
            "",
            f"| {_md_cell(s.group_by or 'group')} | samples | mean score | high-variance share "
            f"| {mixed_label(g)} | errors |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        lines += [
            f"| {_md_cell(_group_name(row['group']))} | {row['samples']} "
            f"| {_fmt(row['mean_score'])} | {row['high_variance_fraction']:.1%} "
            f"| {row['expected_open_fraction']:.1%} | {row['errors']} |"
            for row in s.by_group[:SHOWN_GROUPS]
        ]
        if len(s.by_group) > SHOWN_GROUPS:
            lines += ["", f"{len(s.by_group) - SHOWN_GROUPS} more groups in `--format json`."]
    if s.top_errors:
        lines += ["", "| error | rollouts |", "| --- | ---: |"]
        lines += [
            f"| {_md_cell(_one_line(e['error'], 200))} | {e['count']} |" for e in s.top_errors
        ]
    if lengths := s.extra.get("lengths"):
        lines += [
            "",
            "| completion tokens | rollouts | p50 | p90 | p99 | max |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        lines += ["| " + " | ".join(row) + " |" for row in length_rows(lengths)]
        lines += [""] + [f"- {line}" for line in length_lines(lengths)]
    if confidence := s.extra.get("confidence"):
        names = confidence_head(confidence)
        lines += ["", "| " + " | ".join(names) + " |"]
        lines += ["| --- |" + " ---: |" * (len(names) - 1)]
        lines += ["| " + " | ".join(row) + " |" for row in confidence_rows(confidence)]
        lines += [""] + [f"- {line}" for line in confidence_lines(confidence)]
    head, detail = multiplier_lines(s.compute_multiplier)
    lines += ["", f"**Compute multiplier:** {head}", ""] + [f"- {line}" for line in detail]
    if note := rule_of_thumb_note(s.compute_multiplier, s.high_variance_fraction):
        lines += ["", f"_For reference: {note}._"]
    if note := model_based_note(s.extra):  # adaptive runs
        lines += ["", f"_{note}_"]
    if note := deepened_note(s.extra):
        lines += ["", f"_{note}_"]
    if (settings := trainer_settings_text(s.extra)) is not None:
        head, detail, paste = settings
        lines += ["", f"**Trainer settings:** {head}", ""] + [f"- {line}" for line in detail]
        if paste:
            lines += ["", "```", *paste, "```"]
    if (suspect := suspect_line(suspects, source, code="`")) is not None:
        lines += ["", suspect]
    if flagged(empty := s.extra.get("empty_completions")):
        assert empty is not None
        line, example = empty_text(empty)
        # A code span as long as needed that the example's own backticks cannot close.
        fence = "`" * (max((len(run) for run in re.findall("`+", example)), default=0) + 1)
        lines += ["", f"**{line}** {fence} {example} {fence}"]
    if s.warnings:
        lines += ["", "**Warnings**", ""] + [f"- {w}" for w in s.warnings]
    return "\n".join(lines) + "\n"


def render_table(
    summary: DatasetSummary,
    checks: list[CheckResult],
    console: Console,
    *,
    source: str | None = None,
    usage: dict[str, Any] | None = None,
    suspects: SuspectCheck | None = None,
) -> None:
    # rich loads only for the table format: JSON and Markdown output start faster.
    from rich.table import Table

    s = summary
    g = s.gate["group_size"]
    overview = Table(title=f"curate report{f': {source}' if source else ''}", show_header=False)
    overview.add_column("metric", style="bold")
    overview.add_column("value", justify="right")
    overview.add_row("samples", str(s.samples))
    overview.add_row("rollouts", str(s.rollouts))
    overview.add_row("errors", f"{s.errors} ({s.error_rate:.1%})")
    overview.add_row("mean score", _fmt(s.mean_score))
    overview.add_row("best-of-N", _fmt(s.best_of_n))
    overview.add_row("potential gain", _fmt(s.potential_gain, "+.3f"))
    overview.add_row("relative gain", _fmt(s.relative_gain, "+.1%"))
    overview.add_row("high-variance share", f"{s.high_variance_fraction:.1%}")
    overview.add_row(
        mixed_label(g), share_text(s.gate["expected_open_fraction"], s.gate.get("interval"))
    )
    for key, value in usage_rows(usage):
        overview.add_row(key, value)
    console.print(overview)

    cats = Table(title=f"categories (variance threshold {s.threshold:g})")
    cats.add_column("category")
    cats.add_column("samples", justify="right")
    cats.add_column("share", justify="right")
    for c in CATEGORIES:
        cats.add_row(CATEGORY_LABELS[c], str(s.categories[c]), _share(s.categories[c], s.samples))
    console.print(cats)

    if s.pass_at_k:
        passk = Table(title="pass@k (unbiased)")
        for k in s.pass_at_k:
            passk.add_column(f"k={k}", justify="right")
        passk.add_row(*(f"{v:.3f}" for v in s.pass_at_k.values()))
        console.print(passk)

    if s.by_group:
        more = len(s.by_group) - SHOWN_GROUPS
        groups = Table(
            title=f"by {s.group_by or 'group'}"
            + (f" ({more} more in --format json)" if more > 0 else "")
        )
        groups.add_column(s.group_by or "group", max_width=24, overflow="ellipsis")
        for name in ("samples", "mean score", "high var", f"mixed G={g}", "errors"):
            groups.add_column(name, justify="right")
        for row in s.by_group[:SHOWN_GROUPS]:
            groups.add_row(
                _group_name(row["group"]),
                str(row["samples"]),
                _fmt(row["mean_score"]),
                f"{row['high_variance_fraction']:.1%}",
                f"{row['expected_open_fraction']:.1%}",
                str(row["errors"]),
            )
        console.print(groups)

    if s.top_errors:
        errors = Table(title="top errors")
        errors.add_column("error", max_width=ERROR_WIDTH, overflow="ellipsis", no_wrap=True)
        errors.add_column("rollouts", justify="right")
        for e in s.top_errors:
            errors.add_row(_one_line(e["error"]), str(e["count"]))
        console.print(errors)

    if lengths := s.extra.get("lengths"):
        table = Table(title="completion tokens by outcome")
        for name in ("outcome", "rollouts", "p50", "p90", "p99", "max"):
            table.add_column(name, justify="left" if name == "outcome" else "right")
        for cells in length_rows(lengths):
            table.add_row(*cells)
        console.print(table)
        for line in length_lines(lengths):
            console.print(line, highlight=False)

    if confidence := s.extra.get("confidence"):
        table = Table(title="token confidence against the grade")
        for i, name in enumerate(confidence_head(confidence)):
            table.add_column(name, justify="left" if i == 0 else "right")
        for measure in confidence_rows(confidence):
            table.add_row(*measure)
        console.print(table)
        for line in confidence_lines(confidence):
            console.print(line, highlight=False)

    head, detail = multiplier_lines(s.compute_multiplier)
    console.print(f"[bold]compute multiplier[/bold]: {head}", highlight=False)
    for line in detail:
        console.print(f"  {line}", highlight=False)
    if note := model_based_note(s.extra):  # adaptive runs
        console.print(f"[bold]note[/bold]: {note}", highlight=False)
    if note := deepened_note(s.extra):
        console.print(f"[bold]note[/bold]: {note}", highlight=False)
    if (settings := trainer_settings_text(s.extra)) is not None:
        head, detail, paste = settings
        console.print(f"[bold]trainer settings[/bold]: {head}", highlight=False)
        for line in detail:
            console.print(f"  {line}", highlight=False)
        for line in paste:  # not wrapped: pasted as they are
            console.print(f"    {line}", highlight=False, markup=False, soft_wrap=True)
    if (suspect := suspect_line(suspects, source)) is not None:
        # Not wrapped by rich: the command in the line stays whole for copy and paste.
        console.print(suspect, highlight=False, markup=False, soft_wrap=True)
    if flagged(empty := s.extra.get("empty_completions")):
        assert empty is not None
        line, example = empty_text(empty)
        # The example is untrusted text: printed as a literal, never as markup.
        console.print(f"{line} {example}", highlight=False, markup=False)
    for w in s.warnings:
        console.print(f"[yellow]warning[/yellow]: {w}", highlight=False)
    for check in checks:
        mark = "[green]PASS[/green]" if check.passed else "[red]FAIL[/red]"
        console.print(f"{mark} {check.name}: {check.message}", highlight=False)


# -- suspect labels ------------------------------------------------------------


def trainer_settings_text(extra: dict[str, Any]) -> tuple[str, list[str], list[str]] | None:
    """(headline, detail lines, settings to paste) of `--trainer` (curate.trainers.settings),
    or None when not asked for."""
    data = extra.get("trainer_settings")
    if not data:
        return None

    plan = DynamicSamplingPlan(**data)
    head, detail = plan_lines(plan)
    return head, detail, plan.settings


def suspect_line(check: SuspectCheck | None, source: str | None, *, code: str = "") -> str | None:
    """The report's one line on suspect labels; None for input without extracted answers
    (the report then reads as before; `--show suspects` says why there is no check).
    `code` wraps the command to run (a backtick in Markdown)."""
    if check is None or not check.has_answers:
        return None
    if check.count is None:
        return f"suspect labels: {check.reason}"
    n = check.count
    line = f"suspect labels: {n} sample{'' if n == 1 else 's'} (majority answer graded wrong)"
    close = check.close_misses
    if n and close:
        # Said before the list: a near-right answer repeated is more often the model's
        # mistake than a wrong label, so those need no one to check them first.
        verb = "is a close miss" if close == 1 else "are close misses"
        line += f"; {close} of the majority answers {verb} of the reference (likely the model's)"
    if n and source is not None:
        line += f"; list: {code}curate report {shlex.quote(source)} --show suspects{code}"
    return line
