"""`verl`: Parquet with the columns of verl's RL datasets.

The layout of verl's own preprocessing scripts (examples/data_preprocess/gsm8k.py):

    data_source   string   which reward function scores the sample (verl dispatches on it)
    prompt        list<struct<role, content>>   the chat messages the rollout starts from
    ability       string   the task family ("math", ...)
    reward_model  struct<style, ground_truth>   style "rule"; ground_truth the reference
    extra_info    struct<index, sample_id, pass_rate, smoothed_pass_rate, variance,
                         n_rollouts[, weight], ...>

A verl input (curate eval on a verl Parquet file) keeps its own `data_source`,
`ability`, `reward_model.style` and `extra_info` fields; curate adds its own to
`extra_info` (its `index` is kept when present).
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from curate.exports.base import (
    DEFAULT_ABILITY,
    ExportBatch,
    ExportFormat,
    ExportResult,
    chat_messages,
    file_export,
)

if TYPE_CHECKING:
    import polars as pl

REWARD_STYLE = "rule"
COLUMNS = ("data_source", "prompt", "ability", "reward_model", "extra_info")


def message_dtype() -> pl.DataType:
    import polars as pl

    return pl.List(pl.Struct({"role": pl.String, "content": pl.String}))


def verl_frame(batch: ExportBatch) -> pl.DataFrame:
    """The kept samples as verl's RL dataset frame (schema above; zero rows keep it)."""
    import polars as pl

    batch.require_prompts("--format verl")
    assert batch.chat_prompts is not None and batch.answers is not None
    rows = batch.rows
    position = pl.int_range(pl.len(), dtype=pl.Int64)
    original = _struct_fields(rows, "extra_info")
    ours: list[pl.Expr] = []
    if "index" in original and original["index"].is_integer():
        ours.append(pl.col("extra_info").struct.field("index").cast(pl.Int64).alias("index"))
    else:
        ours.append(position.alias("index"))
    ours.append(pl.col("_sample_id").alias("sample_id"))
    casts = {"int": pl.Int64, "float": pl.Float64, "bool": pl.Boolean, "string": pl.String}
    for col, kind in batch.extra_kinds().items():
        ours.append(pl.col(col).cast(casts[kind]).alias(col))
    names = {"index", "sample_id", *batch.extra_columns()}
    kept = [
        pl.col("extra_info").struct.field(name).alias(name)
        for name in original
        if name not in names
    ]
    styles = _struct_fields(rows, "reward_model")
    style = (
        pl.col("reward_model").struct.field("style").cast(pl.String).fill_null(REWARD_STYLE)
        if "style" in styles
        else pl.lit(REWARD_STYLE, dtype=pl.String)
    )
    ability = (
        pl.col("ability").cast(pl.String).fill_null(DEFAULT_ABILITY)
        if "ability" in rows.columns
        else pl.lit(DEFAULT_ABILITY, dtype=pl.String)
    )
    frame = rows.with_columns(
        pl.Series("_sample_id", batch.sample_ids, dtype=pl.String),
        pl.Series("_data_source", batch.data_sources(), dtype=pl.String),
        pl.Series("_prompt", [chat_messages(p) for p in batch.chat_prompts], dtype=message_dtype()),
        pl.Series("_ground_truth", batch.answers, dtype=pl.String),
    )
    return frame.select(
        pl.col("_data_source").alias("data_source"),
        pl.col("_prompt").alias("prompt"),
        ability.alias("ability"),
        pl.struct(style.alias("style"), pl.col("_ground_truth").alias("ground_truth")).alias(
            "reward_model"
        ),
        pl.struct(*ours, *kept).alias("extra_info"),
    )


def _struct_fields(rows: pl.DataFrame, column: str) -> dict[str, pl.DataType]:
    import polars as pl

    dtype = rows.schema.get(column)
    if not isinstance(dtype, pl.Struct):
        return {}
    return {f.name: f.dtype for f in dtype.fields}  # type: ignore[misc]


def write(batch: ExportBatch, output: Path, stack: ExitStack) -> ExportResult:
    frame = verl_frame(batch)
    return file_export(
        output,
        stack,
        frame.write_parquet,
        note=f"verl: data.train_files={output} data.prompt_key=prompt "
        "(reward_model.ground_truth is the reference; data_source picks the reward function)",
    )


FORMAT = ExportFormat(
    name="verl",
    description="verl RL Parquet: data_source, prompt, ability, reward_model, extra_info",
    output="parquet",
    write=write,
)
