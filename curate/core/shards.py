"""Array-job shards: which samples `curate eval --shard I/K` evaluates.

A sample belongs to shard `I` of `K` when

    int.from_bytes(sha256(sample_id as UTF-8).digest()[:8], "big") % K == I

The assignment depends on the sample id alone, so it is stable when the data file is
reordered, and it is the same on every machine and Python version (no `hash()`, whose
value for strings changes per process). Shards are numbered 0..K-1, as
SLURM_ARRAY_TASK_ID is with `--array=0-(K-1)`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
# More shards than this is a typo (or a job that would spend its time on locks).
MAX_SHARDS = 100_000


@dataclass(frozen=True, slots=True)
class ShardSpec:
    """Shard `index` of `count` (0 <= index < count)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def key(self) -> str:
        """A file-name-safe name: '3-of-8'."""
        return f"{self.index}-of-{self.count}"

    def owns(self, sample_id: str) -> bool:
        return shard_of(sample_id, self.count) == self.index

    def select(self, sample_ids: Iterable[str]) -> list[str]:
        """The ids of `sample_ids` this shard owns, in their order."""
        return [sid for sid in sample_ids if self.owns(sid)]


def shard_of(sample_id: str, count: int) -> int:
    """The shard (0..count-1) that owns `sample_id` (see the module docstring)."""
    digest = hashlib.sha256(sample_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count


def parse_shard(text: str) -> ShardSpec:
    """'I/K' -> ShardSpec; ValueError with a one-line reason for anything else."""
    match = _SPEC.match(text)
    if not match:
        raise ValueError(f"expected I/K (shard I of K, 0 <= I < K), got {text!r}")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1:
        raise ValueError(f"K must be at least 1, got {text!r}")
    if count > MAX_SHARDS:
        raise ValueError(f"K must be at most {MAX_SHARDS}, got {text!r}")
    if index >= count:
        raise ValueError(f"I must be below K (shards are numbered 0..{count - 1}), got {text!r}")
    return ShardSpec(index, count)
