"""`trl`: a Hugging Face `datasets` dataset for TRL's GRPOTrainer, saved with
`save_to_disk`, plus the same rows as Parquet.

TRL's prompt-only dataset type: a `prompt` column, conversational (a list of
{role, content} messages, to which the trainer applies the chat template) when the
run used chat mode, standard (plain text) when it used completion mode. Every other
column is handed to the reward functions as a keyword argument (GRPOTrainer passes
every column but `prompt` to each reward function as `**kwargs`, one list per batch):
`solution` is the reference answer as text, under the name `trl.rewards.accuracy_reward`
reads, and every column of the input is kept under its own name with its own type (a
code set's `test` and `entry_point` are there for a code reward). An input column whose
name TRL's fields take (MATH's worked `solution`) is kept as `input_NAME`, and the
command says so.

    OUT/          Dataset.save_to_disk   -> datasets.load_from_disk("OUT")
    OUT.parquet   Dataset.to_parquet     -> load_dataset("parquet", data_files="OUT.parquet")

Columns: prompt, solution, [the input's columns], sample_id, pass_rate,
smoothed_pass_rate, variance, n_rollouts[, weight].
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

import polars as pl

from curate.errors import MissingExtraError
from curate.exports.base import (
    PARQUET_SUFFIXES,
    ExportBatch,
    ExportFormat,
    ExportResult,
    carried_note,
)
from curate.exports.columns import PROMPT_ROLES, Carried, Role
from curate.store.atomic import atomic_dir, atomic_path

SOLUTION = "solution"
ABSORBS: dict[str, tuple[Role, ...]] = {"prompt": PROMPT_ROLES, SOLUTION: ("answer",)}
HF_EXTRA_HINT = "install the hf extra: pip install 'curate[hf]'"


def trl_paths(output: Path) -> tuple[Path, Path]:
    """(dataset directory, Parquet file): OUT or OUT.parquet -> OUT/ and OUT.parquet."""
    base = output.with_suffix("") if output.suffix.lower() in PARQUET_SUFFIXES else output
    return base, base.with_name(f"{base.name}.parquet")


def trl_carried(batch: ExportBatch) -> list[Carried]:
    """The input columns written beside TRL's own."""
    return batch.carried(ABSORBS, ["prompt", SOLUTION, "sample_id", *batch.extra_columns()])


def trl_columns(batch: ExportBatch) -> dict[str, list[Any]]:
    """Column name -> values, in the order written (input columns as Python values)."""
    batch.require_prompts("--format trl")
    assert batch.answers is not None
    columns: dict[str, list[Any]] = {
        "prompt": batch.trainer_prompts(),
        SOLUTION: list(batch.answers),
    }
    for c in trl_carried(batch):
        columns[c.name] = batch.rows[c.column].to_list()
    columns["sample_id"] = list(batch.sample_ids)
    records = batch.extra_records()
    for col in batch.extra_columns():
        columns[col] = [r[col] for r in records]
    return columns


def trl_dataset(batch: ExportBatch) -> Any:
    """The kept samples as a `datasets.Dataset` with explicit features (the input
    columns' from their Arrow types)."""
    try:
        import datasets
    except ImportError:
        raise MissingExtraError(
            f"--format trl needs the `datasets` package; {HF_EXTRA_HINT}"
        ) from None
    columns = trl_columns(batch)
    text = datasets.Value("string")
    kinds = {"int": "int64", "float": "float64", "bool": "bool", "string": "string"}
    extra = batch.extra_kinds()
    carried = {c.name: c.column for c in trl_carried(batch)}
    schema = (
        batch.rows.select([pl.col(col).alias(name) for name, col in carried.items()])
        .to_arrow(compat_level=pl.CompatLevel.oldest())
        .schema
    )
    input_features = datasets.Features.from_arrow_schema(schema)
    features: dict[str, Any] = {}
    for name in columns:
        if name == "prompt":
            features[name] = [{"role": text, "content": text}] if batch.conversational else text
        elif name in carried:
            features[name] = input_features[name]
        elif name in extra:
            features[name] = datasets.Value(kinds[extra[name]])
        else:
            features[name] = text
    return datasets.Dataset.from_dict(columns, features=datasets.Features(features))


def is_saved_dataset(path: Path) -> bool:
    """An earlier `save_to_disk` output (safe to replace)."""
    return (path / "state.json").is_file() and (path / "dataset_info.json").is_file()


def write(batch: ExportBatch, output: Path, stack: ExitStack) -> ExportResult:
    import datasets

    dataset = trl_dataset(batch)
    directory, parquet = trl_paths(output)
    tmp_dir = stack.enter_context(atomic_dir(directory, may_replace=is_saved_dataset))
    tmp_parquet = stack.enter_context(atomic_path(parquet))
    # The library's own progress bars would interleave with curate's summary lines.
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        dataset.save_to_disk(str(tmp_dir))
        dataset.to_parquet(str(tmp_parquet))
    finally:
        if bars:
            datasets.enable_progress_bars()
    return ExportResult(
        paths=[directory, parquet],
        notes=[
            f"trl: GRPOTrainer(train_dataset=datasets.load_from_disk('{directory}')); "
            f"reward functions get `{SOLUTION}` (the reference answer), the input's columns "
            "and the statistics as keyword arguments",
            *carried_note("trl", trl_carried(batch)),
        ],
    )


FORMAT = ExportFormat(
    name="trl",
    description="TRL GRPO: datasets save_to_disk directory + Parquet (prompt, solution, ...)",
    output="directory",
    write=write,
)
