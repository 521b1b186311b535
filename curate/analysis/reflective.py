"""The reasoning-reflective tokens of a `--grader r3` run: per sample, each reference
token's certainty spread across the group and its R3 weight (curate/graders/r3.py),
read from the certainties stored beside the rollouts (`curate.store.certainty`), without
a model. What `curate report --show reflective` lists and `curate plot --kind reflective`
draws.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from curate.errors import InputError, UsageError
from curate.graders.r3 import parse_tau, token_spread, token_weights
from curate.graders.registry import grader_kind
from curate.store.certainty import has_certainties, read_certainties

# Tokens listed per sample by default.
DEFAULT_TOP = 5


@dataclass(frozen=True, slots=True)
class ReflectiveTokens:
    """One sample's reference tokens with their spread (std of the token's probability
    across the group's rollouts) and R3 weight, in reference order."""

    sample_id: str
    tokens: tuple[str, ...]
    spread: tuple[float, ...]
    weights: tuple[float, ...]
    rollouts: int  # the rollouts whose certainties make the group

    def top(self, k: int) -> list[int]:
        """The positions of the `k` tokens of highest spread (ties: reference order)."""
        order = sorted(range(len(self.tokens)), key=lambda j: (-self.spread[j], j))
        return order[: max(0, k)]


def shown_token(token: str) -> str:
    """A token as text on one line: whitespace and control characters escaped."""
    return json.dumps(token, ensure_ascii=False)[1:-1]


def run_tau(run: Path) -> float:
    """The temperature the run was graded with (its manifest's grader spec)."""
    try:
        manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read the run's manifest: {exc}", path=run) from exc
    spec = str(manifest.get("grader") or "")
    if grader_kind(spec) != "r3":
        raise UsageError(
            f"{run} was graded by {spec or 'no grader'!r}: reflective tokens need a --grader r3 run"
        )
    _, sep, argument = spec.partition(":")
    return parse_tau(argument if sep else None, spec)


def load_reflective(run: str | os.PathLike[str]) -> dict[str, ReflectiveTokens]:
    """Every sample's reflective tokens, by sample id (in sample id order)."""
    path = Path(run)
    if not path.is_dir():
        raise InputError("not a run directory", path=path)
    tau = run_tau(path)
    if not has_certainties(path):
        return {}
    frame = read_certainties(path)
    out: dict[str, ReflectiveTokens] = {}
    for (sid,), rows in frame.group_by("sample_id", maintain_order=True):
        group = [tuple(lp) for lp in rows["logprobs"].to_list()]
        tokens = tuple(str(t) for t in rows["tokens"].to_list()[0])
        spread = token_spread(group)
        out[str(sid)] = ReflectiveTokens(
            sample_id=str(sid),
            tokens=tokens,
            spread=tuple(spread),
            weights=tuple(token_weights(spread, tau)),
            rollouts=len(group),
        )
    return out
