"""Two runs' grades of the same rollouts, read once each, compared (`curate agree`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from curate.errors import InputError
from curate.stats.agreement import Agreement, agreement
from curate.store.scores import load_scores


@dataclass
class RunAgreement:
    first: str
    second: str
    first_grader: str | None
    second_grader: str | None
    result: Agreement

    def to_dict(self) -> dict[str, Any]:
        return {
            "first": {"source": self.first, "grader": self.first_grader},
            "second": {"source": self.second, "grader": self.second_grader},
            **self.result.to_dict(),
        }


def load_agreement(first: str | os.PathLike[str], second: str | os.PathLike[str]) -> RunAgreement:
    """Compare the grades of two runs (run directories or score tables) rollout by
    rollout; InputError when they share no (sample_id, rollout_idx)."""
    a, b = load_scores(first), load_scores(second)
    result = agreement(a.rollouts, b.rollouts)
    if result.pairs + result.only_first + result.only_second == 0:
        raise InputError(
            f"no rollout in common with {second}: are they the same run's?", path=first
        )
    shared = a.rollouts.join(b.rollouts, on=["sample_id", "rollout_idx"], how="inner").height
    if shared == 0:
        raise InputError(
            f"no (sample_id, rollout_idx) in common with {second}: compare a run with its "
            "re-grade (curate grade RUN --out RUN2)",
            path=first,
        )

    def grader(manifest: dict[str, Any] | None) -> str | None:
        value = (manifest or {}).get("grader")
        return value if isinstance(value, str) else None

    return RunAgreement(str(first), str(second), grader(a.manifest), grader(b.manifest), result)
