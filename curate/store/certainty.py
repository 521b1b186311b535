"""The reference certainties of a `--grader r3` run: RUN/certainty/part-*.parquet.

One row per scored rollout (sample_id, rollout_idx): the reference's tokens as text and the
log-probability the model gave each after that rollout's reasoning (`curate.graders.r3`),
and the length of the prefilled sequence. The rollout store keeps the R3 score; this file
keeps what it was computed from, so that a resume prefills only rollouts not here and
`report --show reflective` / `plot --kind reflective` read the per-token spread without a
model. Shards are written atomically; a pair written twice keeps its last row.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from curate.errors import InputError
from curate.store.atomic import atomic_path

if TYPE_CHECKING:
    import polars as pl

CERTAINTY_DIR = "certainty"
COLUMNS = ("sample_id", "rollout_idx", "tokens", "logprobs", "tokens_in")
_counter = itertools.count()


def certainty_schema() -> dict[str, pl.DataType]:
    import polars as pl

    return {
        "sample_id": pl.String(),
        "rollout_idx": pl.Int32(),
        "tokens": pl.List(pl.String()),
        "logprobs": pl.List(pl.Float64()),
        "tokens_in": pl.Int64(),
    }


def certainty_dir(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / CERTAINTY_DIR


def has_certainties(run_dir: str | os.PathLike[str]) -> bool:
    return any(certainty_dir(run_dir).glob("part-*.parquet"))


def append_certainties(run_dir: str | os.PathLike[str], frame: pl.DataFrame) -> Path | None:
    """Write `frame` (COLUMNS) as one new shard; None when it is empty."""
    import polars as pl

    if frame.height == 0:
        return None
    schema = certainty_schema()
    rows = frame.select(
        [pl.col(name).cast(dtype).alias(name) for name, dtype in schema.items()]  # type: ignore[arg-type]
    )
    folder = certainty_dir(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"part-{time.time_ns():020d}-{os.getpid()}-{next(_counter):06d}.parquet"
    with atomic_path(target) as tmp:
        rows.write_parquet(tmp)
    return target


def read_certainties(run_dir: str | os.PathLike[str]) -> pl.DataFrame:
    """Every stored certainty row, one per (sample_id, rollout_idx) (the last written wins),
    sorted; an empty frame when there are none. InputError naming an unreadable shard."""
    import polars as pl

    schema = certainty_schema()
    shards = sorted(certainty_dir(run_dir).glob("part-*.parquet"))
    if not shards:
        return pl.DataFrame(schema=schema)
    frames = []
    for path in shards:
        try:
            frames.append(pl.read_parquet(path, columns=list(COLUMNS)).cast(schema))  # type: ignore[arg-type]
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise InputError(
                f"cannot read reference certainties: {' '.join(str(exc).split())[:160]}",
                path=path,
            ) from exc
    return (
        pl.concat(frames, how="vertical")
        .unique(subset=["sample_id", "rollout_idx"], keep="last", maintain_order=True)
        .sort("sample_id", "rollout_idx")
    )
