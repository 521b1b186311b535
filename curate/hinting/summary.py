"""What a hinted run says per level and per prompt: pass rate, the share of groups
mixed at G, the rescued share of the collapsed prompts, and for each prompt the
weakest level whose pass rate falls in a band around 1/2 (frames in, values out)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

# The band around 1/2 a recommended level's pass rate falls in: the mixed-group odds
# 1 - p^G - (1 - p)^G are within a few percent of their peak across it for G >= 8.
DEFAULT_BAND = (0.25, 0.75)


@dataclass(frozen=True)
class LevelSummary:
    """One hint level over the collapsed prompts."""

    level: int
    prompts: int  # collapsed prompts with a hint of their own at this level
    rollouts: int  # scored rollouts among the first G of those prompts
    errors: int  # error rows among them (data, not wrong answers)
    pass_rate: float | None  # scored rollouts that passed / scored rollouts
    mixed_share: float | None  # groups of G with both outcomes / prompts at this level
    rescued_share: float | None  # groups mixed at G / all collapsed prompts

    def as_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "prompts": self.prompts,
            "rollouts": self.rollouts,
            "errors": self.errors,
            "pass_rate": self.pass_rate,
            "mixed_share": self.mixed_share,
            "rescued_share": self.rescued_share,
        }


@dataclass(frozen=True)
class HintSummary:
    """Every level's summary, each prompt's pass rate per level and recommendation."""

    collapsed: int  # collapsed prompts of the stratum (with or without a hint)
    group_size: int
    band: tuple[float, float]
    levels: list[LevelSummary]
    per_prompt: pl.DataFrame  # sample_id, level, n, passed, pass_rate, mixed
    recommended: dict[str, int | None]  # sample id -> weakest level in the band

    @property
    def rescued_any(self) -> int:
        """Collapsed prompts mixed at G at one level or more."""
        import polars as pl

        mixed = self.per_prompt.filter(pl.col("mixed"))
        return mixed["sample_id"].n_unique() if mixed.height else 0

    @property
    def in_band(self) -> int:
        """Collapsed prompts with a recommended level."""
        return sum(1 for v in self.recommended.values() if v is not None)


def summarize(
    rollouts: pl.DataFrame,
    hints: pl.DataFrame,
    collapsed: Sequence[str],
    group_size: int,
    band: tuple[float, float] = DEFAULT_BAND,
) -> HintSummary:
    """`rollouts` (hint_id, rollout_idx, score, error) of the hinted run, `hints` (hint_id,
    hint_of, hint_level), the `collapsed` prompts' ids: the first `group_size` rollouts
    of each hinted prompt, per level and per prompt. A score counts as a pass when it
    is 1 (the collapsed strata are read from 0/1 scores)."""
    import polars as pl

    first = rollouts.filter(pl.col("rollout_idx") < group_size).join(
        hints.select("hint_id", "hint_of", "hint_level"), on="hint_id", how="inner"
    )
    scored = first.filter(pl.col("error").is_null())
    per = (
        hints.select("hint_id", "hint_of", "hint_level")
        .join(
            scored.group_by("hint_id").agg(
                pl.len().alias("n"), (pl.col("score") >= 1.0).sum().alias("passed")
            ),
            on="hint_id",
            how="left",
        )
        .with_columns(pl.col("n").fill_null(0), pl.col("passed").fill_null(0))
        .with_columns(
            pl.when(pl.col("n") > 0)
            .then(pl.col("passed") / pl.col("n"))
            .otherwise(None)
            .alias("pass_rate"),
            (
                (pl.col("n") == group_size)
                & (pl.col("passed") > 0)
                & (pl.col("passed") < pl.col("n"))
            ).alias("mixed"),
        )
        .rename({"hint_of": "sample_id", "hint_level": "level"})
        .select("sample_id", "level", "n", "passed", "pass_rate", "mixed")
        .sort("sample_id", "level")
    )
    errors = first.filter(pl.col("error").is_not_null()).group_by("hint_level").agg(pl.len())
    error_count = dict(zip(errors["hint_level"].to_list(), errors["len"].to_list(), strict=True))
    total = len(collapsed)
    levels = []
    for level in sorted(set(hints["hint_level"].to_list())):
        rows = per.filter(pl.col("level") == level)
        n = int(rows["n"].sum())
        passed = int(rows["passed"].sum())
        mixed = int(rows["mixed"].sum())
        levels.append(
            LevelSummary(
                level=level,
                prompts=rows.height,
                rollouts=n,
                errors=int(error_count.get(level, 0)),
                pass_rate=passed / n if n else None,
                mixed_share=mixed / rows.height if rows.height else None,
                rescued_share=mixed / total if total else None,
            )
        )
    low, high = band
    recommended: dict[str, int | None] = dict.fromkeys(collapsed)
    fitting = per.filter((pl.col("n") == group_size) & pl.col("pass_rate").is_between(low, high))
    for sid, level in zip(fitting["sample_id"].to_list(), fitting["level"].to_list(), strict=True):
        if sid in recommended and recommended[sid] is None:
            recommended[sid] = level  # rows are sorted by level: the weakest first
    return HintSummary(
        collapsed=total,
        group_size=group_size,
        band=band,
        levels=levels,
        per_prompt=per,
        recommended=recommended,
    )
