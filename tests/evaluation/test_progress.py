"""Plain progress lines (CI logs): counts and the generation rate."""

from __future__ import annotations

import pytest

from curate.evaluation import progress as progress_mod
from curate.evaluation.progress import OutcomeTally, PlainProgress


def test_rate_counts_only_rollouts_generated_by_this_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = iter([100.0, 102.0])
    monkeypatch.setattr(progress_mod.time, "monotonic", lambda: next(clock))
    plain = PlainProgress(every_s=10.0)
    plain.start(total=10, done=6, tally=OutcomeTally())  # a resumed run: 6 stored
    plain.advance(rollouts=4, errors=1, tally=OutcomeTally())  # 4 new in 2 s
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "eval: 6/10 rollouts already stored"
    assert lines[1].startswith("eval: 10/10 rollouts, 2.0/s, 1 errors; ")
