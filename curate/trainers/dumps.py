"""Readers of the rollout files trainers write during training.

Each reader turns one trainer's files into one frame with the columns `DUMP_COLUMNS`:
the training step, the prompt as text (for matching to the curated data set), the
completion, the score, the reference when the trainer kept it, and where the row came
from. The formats, as their sources define them:

- verl (`trainer.rollout_data_dir`): `RayPPOTrainer._dump_generations` in
  verl/trainer/ppo/ray_trainer.py writes one `{global_step}.jsonl` per step, one line per
  rollout, with `input` (the prompt tokens decoded with `skip_special_tokens=True`, so
  the chat template's text is in it), `output` (the response decoded the same way),
  `gts` (the sample's `reward_model.ground_truth`), `score` (the summed token-level
  reward), `step`, and every per-rollout value the reward function returned (`acc`
  with the DAPO reward, for one).
- TRL (`GRPOConfig(log_completions=True)`): `GRPOTrainer.log` writes
  `{output_dir}/completions/completions_{step:05d}.parquet` with `step`, `prompt` (text,
  or the chat messages), `completion` (likewise), one column per reward function, the
  reward functions' logged extras and `advantage`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from curate.errors import InputError

DUMP_COLUMNS = ("step", "prompt", "completion", "score", "reference", "file", "line")
VERL_FILE = re.compile(r"^(\d+)\.jsonl$")
TRL_FILE = re.compile(r"^completions_(\d+)\.parquet$")
# Columns of a TRL completions file that are not rewards.
TRL_NOT_REWARDS = frozenset({"step", "prompt", "completion", "advantage", "image", "images"})


@dataclass(frozen=True, slots=True)
class DumpFile:
    path: Path
    step: int


@dataclass(frozen=True, slots=True)
class DumpFormat:
    name: str
    title: str
    find: Callable[[Path], list[DumpFile]]
    read: Callable[[DumpFile, str | None], tuple[pl.DataFrame, str]]


def _step_files(root: Path, pattern: re.Pattern[str]) -> list[DumpFile]:
    if root.is_file():
        m = pattern.match(root.name)
        return [DumpFile(root, int(m.group(1)))] if m else []
    if not root.is_dir():
        return []
    found = [
        DumpFile(p, int(m.group(1)))
        for p in root.iterdir()
        if p.is_file() and (m := pattern.match(p.name))
    ]
    return sorted(found, key=lambda f: f.step)


def find_verl(root: Path) -> list[DumpFile]:
    return _step_files(root, VERL_FILE)


def find_trl(root: Path) -> list[DumpFile]:
    # The trainer's output_dir, or its completions/ folder.
    if root.is_dir() and (root / "completions").is_dir():
        root = root / "completions"
    return _step_files(root, TRL_FILE)


def _score_column(
    frame: pl.DataFrame, asked: str | None, preferred: list[str], candidates: list[str], file: Path
) -> str:
    if asked is not None:
        if asked not in frame.columns:
            raise InputError(
                f"--score-field {asked!r} is not a column (columns: {', '.join(frame.columns)})",
                path=file,
            )
        return asked
    for name in preferred:
        if name in frame.columns:
            return name
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise InputError("no score column found; name one with --score-field", path=file)
    raise InputError(
        f"several reward columns ({', '.join(candidates)}): choose one with --score-field",
        path=file,
    )


def _numeric_scores(frame: pl.DataFrame, column: str, file: Path) -> pl.Series:
    values = frame[column]
    if values.dtype == pl.Boolean:
        return values.cast(pl.Float64)
    try:
        return values.cast(pl.Float64, strict=True)
    except pl.exceptions.PolarsError:
        raise InputError(f"score column {column!r} is not numeric", path=file) from None


def read_verl(file: DumpFile, score_field: str | None) -> tuple[pl.DataFrame, str]:
    rows: list[dict[str, Any]] = []
    with file.path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"line {number} is not JSON ({exc.msg})", path=file.path) from None
            if not isinstance(row, dict) or "input" not in row or "output" not in row:
                raise InputError(
                    f"line {number} has no 'input'/'output' (not a verl rollout dump)",
                    path=file.path,
                )
            row["__line"] = number
            rows.append(row)
    if not rows:
        raise InputError("no rollouts in file", path=file.path)
    frame = pl.DataFrame(rows, infer_schema_length=None)
    # DAPO's reward returns `acc` (the 0/1 verdict) beside `score` (which may carry an
    # overlong penalty): the pass rate is about the verdict.
    numeric = [
        c for c in frame.columns if frame[c].dtype.is_numeric() or frame[c].dtype == pl.Boolean
    ]
    candidates = [c for c in numeric if c not in {"step", "__line"}]
    column = _score_column(frame, score_field, ["acc", "score"], candidates, file.path)
    step = frame["step"].cast(pl.Int64) if "step" in frame.columns else None
    out = pl.DataFrame(
        {
            "step": step if step is not None else pl.Series([file.step] * frame.height),
            "prompt": frame["input"].cast(pl.String),
            "completion": frame["output"].cast(pl.String),
            "score": _numeric_scores(frame, column, file.path),
            "reference": _as_text(frame["gts"]) if "gts" in frame.columns else None,
            "file": [str(file.path)] * frame.height,
            "line": frame["__line"].cast(pl.Int64),
        },
        schema=_dump_schema(),
    )
    return out, column


def read_trl(file: DumpFile, score_field: str | None) -> tuple[pl.DataFrame, str]:
    try:
        frame = pl.read_parquet(file.path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputError(f"not a readable Parquet file ({exc})", path=file.path) from None
    for needed in ("prompt", "completion"):
        if needed not in frame.columns:
            raise InputError(f"no {needed!r} column (not a TRL completions file)", path=file.path)
    candidates = [
        c
        for c in frame.columns
        if c not in TRL_NOT_REWARDS
        and (frame[c].dtype.is_numeric() or frame[c].dtype == pl.Boolean)
    ]
    column = _score_column(frame, score_field, [], candidates, file.path)
    steps = frame["step"].cast(pl.Int64) if "step" in frame.columns else None
    out = pl.DataFrame(
        {
            "step": steps if steps is not None else pl.Series([file.step] * frame.height),
            "prompt": [message_text(v, "user") for v in frame["prompt"].to_list()],
            "completion": [message_text(v, "assistant") for v in frame["completion"].to_list()],
            "score": _numeric_scores(frame, column, file.path),
            "reference": None,
            "file": [str(file.path)] * frame.height,
            "line": pl.int_range(1, frame.height + 1, eager=True).cast(pl.Int64),
        },
        schema=_dump_schema(),
    )
    return out, column


def message_text(value: Any, role: str) -> str | None:
    """A prompt or completion as text: the string itself, or of a chat message list the
    content of the last message with `role` (else of the last message)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        value = [value]
    messages = [m for m in value if isinstance(m, dict)]
    chosen = [m for m in messages if m.get("role") == role] or messages
    if not chosen:
        return None
    content = chosen[-1].get("content")
    if isinstance(content, list):  # multimodal parts: the text ones
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return None if content is None else str(content)


def _as_text(values: pl.Series) -> pl.Series:
    if values.dtype == pl.String:
        return values
    return pl.Series(
        [
            None if v is None else v if isinstance(v, str) else json.dumps(v)
            for v in values.to_list()
        ],
        dtype=pl.String,
    )


def _dump_schema() -> dict[str, Any]:
    return {
        "step": pl.Int64,
        "prompt": pl.String,
        "completion": pl.String,
        "score": pl.Float64,
        "reference": pl.String,
        "file": pl.String,
        "line": pl.Int64,
    }


FORMATS: dict[str, DumpFormat] = {
    "verl": DumpFormat("verl", "verl rollout_data_dir dumps ({step}.jsonl)", find_verl, read_verl),
    "trl": DumpFormat(
        "trl", "TRL completions logs (completions_{step:05d}.parquet)", find_trl, read_trl
    ),
}


def detect_format(root: Path) -> str:
    """The one format whose files `root` holds; an InputError naming what was looked for."""
    found = [name for name, fmt in FORMATS.items() if fmt.find(root)]
    if len(found) == 1:
        return found[0]
    if not root.exists():
        raise InputError("no such file or directory", path=root)
    if not found:
        looked = "; ".join(fmt.title for fmt in FORMATS.values())
        raise InputError(f"no trainer rollout files found (looked for {looked})", path=root)
    raise InputError(
        f"files of several formats ({', '.join(found)}): choose with --format", path=root
    )
