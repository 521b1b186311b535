"""A run directory with completions, reasoning, cut-short and error rows, written by
hand through the store (the layout `curate eval` writes), for the rollout exports."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from curate.store.run_dir import RolloutStore

# sample -> rollouts as (score, answer text, reasoning, truncated, error)
Row = tuple[float | None, str | None, str | None, bool, str | None]
ROLLOUTS: dict[str, list[Row]] = {
    # mixed, with a duplicate right text and a cut-short right one
    "q1": [
        (1.0, "4", "2+2 is 4", False, None),
        (1.0, "4", "2+2 is 4", False, None),
        (1.0, "4 (cut", "2+2", True, None),
        (0.0, "5", "2+2 is 5", False, None),
        (0.0, "22", "concatenate", False, None),
        (None, None, None, False, "timeout"),
        (1.0, "The answer is 4", "sum", False, None),
        (0.0, "3", "off by one", False, None),
    ],
    # rare passes: 1 of 8
    "q2": [(1.0, "9", "3*3", False, None)]
    + [(0.0, str(i), "guess", False, None) for i in range(7)],
    # always right
    "q3": [(1.0, "10", "5+5", False, None) for _ in range(8)],
    # always wrong, one cut short
    "q4": [(0.0, "x", "no idea", i == 0, None) for i in range(8)],
}
QUESTIONS = {
    "q1": "What is 2 + 2?",
    "q2": "What is 3 * 3?",
    "q3": "What is 5 + 5?",
    "q4": "What is 7 ^ 7?",
}


# Pass counts of the large pools (`write_run(pool=N)`): rare, scarce, even and common passes.
POOL_PASSES = (1, 3, 8, 16, 29, 31)


def large_pools(size: int) -> dict[str, list[Row]]:
    """Pools of `size` rollouts, one per count of POOL_PASSES."""
    return {
        f"b{k:02d}": [
            (1.0, f"right {i}", None, False, None)
            if i < k
            else (0.0, f"wrong {i}", None, False, None)
            for i in range(size)
        ]
        for k in POOL_PASSES
    }


def write_run(
    path: Path, *, model: str = "unit-test", pool: int | None = None, mode: str = "chat"
) -> Path:
    """The run directory of ROLLOUTS (or, with `pool`, of `large_pools(pool)`)."""
    pools = ROLLOUTS if pool is None else large_pools(pool)
    questions = QUESTIONS if pool is None else {sid: f"Question {sid}?" for sid in pools}
    store = RolloutStore(path)
    store.create()
    store.write_manifest({"model": model, "backend": "fake", "mode": mode, "runs": 8})
    store.write_samples(
        pl.DataFrame(
            {
                "sample_id": list(questions),
                "question": list(questions.values()),
                "answer": [str(i) for i in range(len(questions))],
            }
        )
    )
    rows = []
    for sid, rollouts in pools.items():
        for i, (score, answer, reasoning, truncated, error) in enumerate(rollouts):
            rows.append(
                {
                    "sample_id": sid,
                    "rollout_idx": i,
                    "score": score,
                    "error": error,
                    "completion": answer,
                    "truncated": truncated if error is None else None,
                    "reasoning": reasoning,
                    "reasoning_closed": None if reasoning is None else not truncated,
                }
            )
    frame = pl.DataFrame(rows).with_columns(pl.col("rollout_idx").cast(pl.Int32))
    store.append(frame)
    return path
