"""`verl`: Parquet with the columns of verl's RL datasets.

The layout of verl's own preprocessing scripts (examples/data_preprocess/gsm8k.py):

    data_source   string   which reward function scores the sample (verl dispatches on it)
    prompt        list<struct<role, content>>   the chat messages the rollout starts from
    ability       string   the task family ("math", ...)
    reward_model  struct<style, ground_truth>   style "rule"; ground_truth the reference
    extra_info    struct<index, sample_id, pass_rate, smoothed_pass_rate, variance,
                         n_rollouts[, weight], ..., every other input column>

Every column of the input is in `extra_info` under its own name (renamed to
`input_NAME` only where curate's own field has that name), so a reward function gets
what it needs from the row: verl calls `compute_score(data_source, solution_str,
ground_truth, extra_info)` (verl/utils/reward_score/__init__.py, and a
`custom_reward_function` receives the same arguments) with `ground_truth` from
`reward_model` and `extra_info` from this column. For a code set the reference, and so
`ground_truth`, is the tests column (HumanEval's `test` program, MBPP's assert list), and
`extra_info` holds `entry_point`, the prompt and the rest. Tests given as stdin/stdout
pairs in any layout the code grader reads (APPS/TACO's `input_output`, CodeContests' and
LiveCodeBench's lists of `{input, output}`) are written as `{"inputs": [...], "outputs":
[...]}`, the JSON verl's own code scorers parse from `ground_truth` (`prime_code` and
`sandbox_fusion`, which verl's `default_compute_score` calls for the data sources
codecontests, apps, codeforces and taco); call-based APPS tests (`fn_name`) stay as given,
already in that form.

`ability` is the kind of task (code, math, multiple_choice; from the run's layout or
grader) unless --ability names it; `data_source` likewise, unless --data-source names
it. A verl input (curate eval on a verl Parquet file) keeps its own `data_source`,
`ability`, `reward_model.style` and `extra_info` fields; curate adds its own to
`extra_info` (its `index` is kept when present).
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path

import polars as pl

from curate.data.samples import field_values
from curate.exports.base import (
    ExportBatch,
    ExportFormat,
    ExportResult,
    carried_note,
    chat_messages,
    file_export,
)
from curate.exports.columns import Carried, Role
from curate.graders.base import GradingError
from curate.graders.code import read_tests

REWARD_STYLE = "rule"
COLUMNS = ("data_source", "prompt", "ability", "reward_model", "extra_info")
# The input columns these fields stand for (not written again into extra_info).
# A text prompt column stays in extra_info: verl hands reward functions extra_info, not
# the prompt (a HumanEval reward needs the signature the completion continues).
ABSORBS: dict[str, tuple[Role, ...]] = {
    "data_source": ("data_source",),
    "prompt": ("messages",),
    "ability": ("ability",),
    "reward_model": ("verl",),
    "extra_info": ("verl",),
}


def message_dtype() -> pl.DataType:
    return pl.List(pl.Struct({"role": pl.String, "content": pl.String}))


def verl_carried(batch: ExportBatch) -> list[Carried]:
    """The input columns written into extra_info, beside curate's and the input's own
    extra_info fields."""
    own = ["index", "sample_id", *batch.extra_columns(), *_struct_fields(batch.rows, "extra_info")]
    return batch.carried(ABSORBS, own)


def verl_frame(batch: ExportBatch) -> pl.DataFrame:
    """The kept samples as verl's RL dataset frame (schema above; zero rows keep it)."""
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
    kept += [pl.col(c.column).alias(c.name) for c in verl_carried(batch)]
    styles = _struct_fields(rows, "reward_model")
    style = (
        pl.col("reward_model").struct.field("style").cast(pl.String).fill_null(REWARD_STYLE)
        if "style" in styles
        else pl.lit(REWARD_STYLE, dtype=pl.String)
    )
    ability = (
        pl.col("ability").cast(pl.String).fill_null(batch.ability)
        if batch.input_roles.get("ability") == "ability"
        else pl.lit(batch.ability, dtype=pl.String)
    )
    frame = rows.with_columns(
        pl.Series("_sample_id", batch.sample_ids, dtype=pl.String),
        pl.Series("_data_source", batch.data_sources(), dtype=pl.String),
        pl.Series("_prompt", [chat_messages(p) for p in batch.chat_prompts], dtype=message_dtype()),
        pl.Series("_ground_truth", verl_ground_truths(batch), dtype=pl.String),
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


def verl_ground_truths(batch: ExportBatch) -> list[str | None]:
    """The references as `reward_model.ground_truth`: as text, and for a code run's
    stdin/stdout tests as verl's `{"inputs", "outputs"}` JSON."""
    assert batch.answers is not None
    if batch.kind != "code" or batch.answer_field is None:
        return list(batch.answers)
    raw = field_values(batch.rows, batch.answer_field).to_list()
    out: list[str | None] = []
    for value, text in zip(raw, batch.answers, strict=True):
        try:
            suite = read_tests(value, None)
        except GradingError:
            suite = None
        if suite is None or suite.layout != "stdio":
            out.append(text)
            continue
        cases = suite.cases
        out.append(
            json.dumps(
                {"inputs": [c.stdin for c in cases], "outputs": [c.expected for c in cases]},
                ensure_ascii=False,
            )
        )
    return out


def _struct_fields(rows: pl.DataFrame, column: str) -> dict[str, pl.DataType]:
    dtype = rows.schema.get(column)
    if not isinstance(dtype, pl.Struct):
        return {}
    return {f.name: f.dtype for f in dtype.fields}  # type: ignore[misc]


def write(batch: ExportBatch, output: Path, stack: ExitStack) -> ExportResult:
    frame = verl_frame(batch)
    result = file_export(
        output,
        stack,
        frame.write_parquet,
        note=f"verl: data.train_files={output} data.prompt_key=prompt "
        "(reward_model.ground_truth is the reference; data_source picks the reward function)",
    )
    result.notes.extend(carried_note("verl", verl_carried(batch), where=" in extra_info"))
    return result


FORMAT = ExportFormat(
    name="verl",
    description="verl RL Parquet: data_source, prompt, ability, reward_model, extra_info",
    output="parquet",
    write=write,
)
