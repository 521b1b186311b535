"""A hand-built run directory for the suspect-label tests (report, CLI, filtering).

Ten samples x 8 rollouts, the numeric grader's way of writing answers:

    bad1, bad2, bad3  wrong reference: most completions agree on the right answer (which
                      the reference does not match), graded 0. bad2 and bad3 agree only
                      once spellings are normalised ("1,000" / "1000" / "$1,000.00";
                      " Paris" / "paris").
    hard1, hard2      genuinely hard: every rollout wrong, answers scattered.
    ok1..ok5          fine: mostly right (ok4 half right, ok5 always right).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from curate.store.run_dir import RolloutStore

# sample -> (reference, [(extracted, score), ...])
SAMPLES: dict[str, tuple[str, list[tuple[str | None, float]]]] = {
    "bad1": ("41", [("42", 0)] * 7 + [("40", 0)]),
    "bad2": (
        "100",
        [("1,000", 0)] * 2
        + [("1000", 0)] * 2
        + [("$1,000.00", 0)]
        + [("10", 0), ("100", 1)]
        # 5 of 8 agree on 1000 (62.5%), graded wrong; one rollout found no answer.
        + [(None, 0)],
    ),
    "bad3": ("London", [(" Paris", 0), ("paris", 0), ("PARIS", 0)] * 2 + [("Lyon", 0)] * 2),
    "hard1": ("17", [(str(v), 0) for v in (3, 5, 8, 13, 21, 34, 55, 89)]),
    "hard2": (
        "2",
        [("3", 0), ("3", 0), ("4", 0), ("5", 0), (None, 0), ("6", 0), ("7", 0), ("1", 0)],
    ),
    "ok1": ("7", [("7", 1)] * 6 + [("8", 0)] * 2),
    "ok2": ("12", [("12", 1)] * 5 + [("13", 0)] * 3),
    "ok3": ("9", [("9", 1)] * 7 + [("6", 0)]),
    "ok4": ("5", [("5", 1)] * 4 + [("6", 0)] * 4),
    "ok5": ("3", [("3", 1)] * 8),
}
SUSPECTS = ["bad1", "bad2", "bad3"]
# The flagged samples' majority answers (normalised), shares and scored rollouts.
MAJORITY = {"bad1": ("42", 7 / 8, 8), "bad2": ("1000", 5 / 8, 8), "bad3": ("paris", 6 / 8, 8)}


def answer_rows() -> pl.DataFrame:
    """sample_id, rollout_idx, score, error, completion, extracted: one row per rollout."""
    rows = [
        (sid, i, float(score), None, f"... the answer is {extracted}", extracted)
        for sid, (_, answers) in SAMPLES.items()
        for i, (extracted, score) in enumerate(answers)
    ]
    schema = {
        "sample_id": pl.String,
        "rollout_idx": pl.Int32,
        "score": pl.Float64,
        "error": pl.String,
        "completion": pl.String,
        "extracted": pl.String,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def samples_frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "sample_id": list(SAMPLES),
            "question": [f"question {sid}?" for sid in SAMPLES],
            "answer": [reference for reference, _ in SAMPLES.values()],
        }
    )


def write_suspect_run(path: Path, *, answer_field: str | None = "answer") -> Path:
    """The run directory at `path`, in two shards, as `curate eval` writes it."""
    store = RolloutStore(path)
    store.create()
    manifest = {"model": "unit-test", "backend": "fake", "runs": 8, "mode": "chat"}
    if answer_field is not None:
        manifest["answer_field"] = answer_field
    store.write_manifest(manifest)
    store.write_samples(samples_frame())
    frame = answer_rows()
    store.append(frame.head(40))
    store.append(frame.tail(frame.height - 40))
    return path
