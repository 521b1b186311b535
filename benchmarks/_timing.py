"""The timing loop the eval benchmarks share: warm both sides up, then time them in
alternating order and compare medians."""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable

Timer = Callable[[], float]  # runs the workload once, returns its wall time in seconds


def alternate(bare: Timer, curate: Timer, repeat: int) -> tuple[list[float], list[float]]:
    """Time `bare` and `curate` `repeat` times each after one untimed warm-up of both;
    returns (bare times, curate times), pair i measured back to back."""
    bare()  # warm-up: the first runs pay one-off costs on both sides
    curate()
    bare_t: list[float] = []
    cur_t: list[float] = []
    for i in range(repeat):
        # Alternate the order so drift on a shared machine hits both sides.
        if i % 2 == 0:
            bare_t.append(bare())
            cur_t.append(curate())
        else:
            cur_t.append(curate())
            bare_t.append(bare())
    return bare_t, cur_t


def medians(bare_t: list[float], cur_t: list[float]) -> tuple[float, float]:
    """The median time of each side."""
    return statistics.median(bare_t), statistics.median(cur_t)


def verdict(missed: bool, no_check: bool, failure: str) -> int:
    """The exit code: 1 (with `failure` on stderr) when the target is missed and checked."""
    if missed and not no_check:
        print(f"FAIL: {failure}", file=sys.stderr)
        return 1
    return 0
