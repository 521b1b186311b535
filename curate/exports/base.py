"""What every export writer receives, and the format description the registry holds.

A writer gets an `ExportBatch`: the kept rows (original fields, statistics, weight)
plus the prompts built exactly as `curate eval` built them and the reference answers
as text. It writes into temporary paths entered on an `ExitStack`, so that every file
of an export (and the rejects beside it) is renamed into place together, or none is.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import polars as pl

from curate.core.prompts import Message, Mode
from curate.errors import UsageError
from curate.exports.columns import Carried, Role, carry, renamed_note
from curate.exports.kind import DEFAULT_ABILITY, Kind
from curate.stats.columns import WEIGHT_COLUMN
from curate.store.atomic import atomic_path

# Per-sample statistics the trainer formats carry (the generic formats carry all of
# `curate.stats.columns.STAT_COLUMNS`). Names and meanings as in `curate report`.
TRAINER_STATS: tuple[str, ...] = ("pass_rate", "smoothed_pass_rate", "variance", "n_rollouts")
DEFAULT_WEIGHT_COLUMN = WEIGHT_COLUMN
DEFAULT_DATA_SOURCE = "curate"

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
PARQUET_SUFFIXES = (".parquet", ".pq")

OutputKind = Literal["jsonl", "parquet", "directory"]


@dataclass(frozen=True)
class ExportBatch:
    """The kept samples, ready for any writer (all lists run parallel to `rows`)."""

    rows: pl.DataFrame
    """Original fields (when known), then the statistics and the weight column."""
    sample_ids: list[str]
    chat_prompts: list[list[Message]] | None = None
    """The prompt as a chat message list (`curate eval --mode chat`); None without fields."""
    text_prompts: list[str] | None = None
    """The prompt as raw text, only when the run used completion mode."""
    answers: list[str | None] | None = None
    """Reference answers as text (numbers via str, structures as JSON)."""
    answer_field: str | None = None
    mode: Mode = "chat"
    data_source: str = DEFAULT_DATA_SOURCE
    row_data_sources: list[str] | None = None
    """Per-row data sources (from a `data_source` column of the input), else None."""
    stat_columns: tuple[str, ...] = TRAINER_STATS
    """Statistics to carry, each a column of `rows` (empty: none)."""
    weight_column: str | None = None
    """The per-sample weight column of `rows`, when weights were given."""
    input_columns: tuple[str, ...] = ()
    """The columns of `rows` that came from the input samples, in their order."""
    input_roles: Mapping[str, Role] = field(default_factory=dict)
    """Input column -> the role it played: the prompt's or the reference's column, the
    data source or ability the export uses (see `curate.exports.columns`)."""
    ability: str = DEFAULT_ABILITY
    """The task family for rows without their own (verl's `ability`)."""
    kind: Kind | None = None
    """The run's kind of task (`curate.exports.kind`), when it says."""

    @property
    def height(self) -> int:
        return self.rows.height

    def data_sources(self) -> list[str]:
        """The data source of every row."""
        if self.row_data_sources is not None:
            return list(self.row_data_sources)
        return [self.data_source] * self.height

    @property
    def has_prompts(self) -> bool:
        return self.chat_prompts is not None and self.answers is not None

    @property
    def conversational(self) -> bool:
        """Whether `trainer_prompts` are message lists (else the completion-mode raw text)."""
        return not (self.mode == "completion" and self.text_prompts is not None)

    def trainer_prompts(self) -> list[Any]:
        """Prompts in the run's own form: {role, content} message lists (chat) or raw
        text (completion)."""
        self.require_prompts("this format")
        if self.conversational:
            return [chat_messages(p) for p in self.chat_prompts or []]
        return list(self.text_prompts or [])

    def require_prompts(self, what: str) -> None:
        if not self.has_prompts:
            raise UsageError(
                f"{what} needs each sample's prompt and answer: filter a run directory from "
                "`curate eval`, or pass the original samples with --data"
            )

    def extra_columns(self) -> list[str]:
        """The statistics and weight columns carried into every trainer format."""
        cols = [c for c in self.stat_columns if c in self.rows.columns]
        if self.weight_column is not None:
            cols.append(self.weight_column)
        return cols

    def extra_kinds(self) -> dict[str, str]:
        """Extra column -> "int", "float", "bool" or "string": the type each is written as
        (integers as int64, other numbers as float64, so one schema fits every export)."""
        kinds = {}
        for col in self.extra_columns():
            dtype = self.rows.schema[col]
            if dtype.is_integer():
                kinds[col] = "int"
            elif dtype.is_numeric() or dtype == pl.Null:
                kinds[col] = "float"  # a weight column with no value yet is still a number
            elif dtype == pl.Boolean:
                kinds[col] = "bool"
            else:
                kinds[col] = "string"
        return kinds

    def carried(
        self, absorbs: Mapping[str, Collection[Role]], taken: Sequence[str]
    ) -> list[Carried]:
        """The input columns a format writes beside its own fields (`carry`)."""
        return carry(self.input_columns, self.input_roles, absorbs=absorbs, taken=taken)

    def input_records(self, carried: Sequence[Carried]) -> list[dict[str, Any]]:
        """Per row: {export name: input value, ...}, JSON-safe."""
        if not carried:
            return [{} for _ in range(self.height)]
        frame = self.rows.select([c.column for c in carried])
        return [
            {c.name: jsonable(row[c.column]) for c in carried}
            for row in frame.iter_rows(named=True)
        ]

    def extra_records(self) -> list[dict[str, Any]]:
        """Per row: {statistic: value, ..., weight: value}, JSON-safe (NaN -> None)."""
        cols = self.extra_columns()
        if not cols:
            return [{} for _ in range(self.height)]
        return [
            {k: json_safe(v) for k, v in row.items()}
            for row in self.rows.select(cols).iter_rows(named=True)
        ]


@dataclass(frozen=True)
class ExportResult:
    paths: list[Path]
    notes: list[str] = field(default_factory=list)
    """Lines for the user: how the trainer reads this output."""


Writer = Callable[[ExportBatch, Path, ExitStack], ExportResult]


@dataclass(frozen=True)
class ExportFormat:
    name: str
    description: str
    output: OutputKind
    write: Writer
    needs_prompts: bool = True

    def check_output(self, output: Path) -> None:
        """Refuse an output whose suffix names another container than this format's."""
        suffix = output.suffix.lower()
        allowed = {
            "jsonl": JSONL_SUFFIXES,
            "parquet": PARQUET_SUFFIXES,
            "directory": PARQUET_SUFFIXES,  # trl: OUT.parquet -> OUT/ and OUT.parquet
        }[self.output]
        known = (*JSONL_SUFFIXES, *PARQUET_SUFFIXES, ".csv")
        if suffix in known and suffix not in allowed:
            kind = {"jsonl": "JSON Lines", "parquet": "Parquet", "directory": "a directory"}
            raise UsageError(
                f"--format {self.name} writes {kind[self.output]}, but the output is named "
                f"'{output.name}'"
            )


def answer_text(value: Any) -> str | None:
    """A reference answer as the text trainers compare against."""
    if value is None or isinstance(value, str):
        return value
    if hasattr(value, "to_list"):
        value = value.to_list()
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def chat_messages(messages: Sequence[Message]) -> list[Message]:
    """Messages as {role, content} only: the fields every trainer's chat schema has."""
    return [{"role": str(m["role"]), "content": _content(m.get("content"))} for m in messages]


def _content(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (list, dict)) else str(value)


def jsonable(value: Any) -> Any:
    """An input value as JSON: nested lists and objects kept, NaN as null, dates as
    ISO 8601 text, decimals as numbers, anything else as its text."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return json_safe(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return json_safe(float(value))
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return str(value)


def carried_note(fmt: str, carried: Sequence[Carried], *, where: str = "") -> list[str]:
    """The terminal line for renamed input columns, as a list (empty when none)."""
    note = renamed_note(fmt, carried, where=where)
    return [] if note is None else [note]


def json_safe(value: Any) -> Any:
    """NaN and infinities are not JSON: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def file_export(
    output: Path, stack: ExitStack, fill: Callable[[Path], object], *, note: str | None = None
) -> ExportResult:
    """A one-file export: `fill` writes a temporary path entered on `stack`, which renames
    it to `output` when it closes (together with every other file of the write)."""
    fill(stack.enter_context(atomic_path(output)))
    return ExportResult(paths=[output], notes=[] if note is None else [note])


def write_jsonl_lines(records: Sequence[dict[str, Any]], path: Path) -> None:
    """One JSON object per line, UTF-8, keys in the order given."""
    with open(path, "w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")
