"""Progress for an eval: a rich live display on a terminal, sparse plain lines otherwise."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from curate.core.outcome import LABELS, OUTCOMES, PASS_SCORE, SHORT_LABELS, outcome_of

if TYPE_CHECKING:
    from rich.progress import TaskID


@dataclass
class OutcomeTally:
    """Per-sample running counts, for the live always-correct / always-incorrect / mixed
    line (the rule and the words of `curate.core.outcome`)."""

    scored: dict[str, int] = field(default_factory=dict)
    passed: dict[str, int] = field(default_factory=dict)
    # Samples with some credit on some rollout (partial credit is not "always incorrect").
    credited: set[str] = field(default_factory=set)

    def add(self, sample_id: str, score: float | None) -> None:
        if score is None:
            return
        self.scored[sample_id] = self.scored.get(sample_id, 0) + 1
        if score >= PASS_SCORE:
            self.passed[sample_id] = self.passed.get(sample_id, 0) + 1
        if score > 0.0:
            self.credited.add(sample_id)

    def add_many(self, pairs: Iterable[tuple[str, float | None]]) -> None:
        for sid, score in pairs:
            self.add(sid, score)

    def counts(self) -> tuple[int, int, int]:
        """(always correct, always incorrect, mixed) over samples scored so far."""
        found = dict.fromkeys(OUTCOMES, 0)
        for sid, n in self.scored.items():
            outcome = outcome_of(n, self.passed.get(sid, 0), 1.0 if sid in self.credited else 0.0)
            if outcome is not None:
                found[outcome] += 1
        return found["always_correct"], found["always_incorrect"], found["mixed"]

    def line(self) -> str:
        counts = zip(OUTCOMES, self.counts(), strict=True)
        return " · ".join(f"{LABELS[name]} {count}" for name, count in counts)

    def short(self) -> str:
        """The same counts, narrow enough for an 80-column progress bar."""
        counts = zip(OUTCOMES, self.counts(), strict=True)
        return " ".join(f"{SHORT_LABELS[name]} {count}" for name, count in counts)


class Progress(Protocol):
    def start(self, total: int, done: int, tally: OutcomeTally) -> None: ...
    def advance(self, rollouts: int, errors: int, tally: OutcomeTally) -> None: ...
    def finish(self) -> None: ...


class NullProgress:
    def start(self, total: int, done: int, tally: OutcomeTally) -> None:
        pass

    def advance(self, rollouts: int, errors: int, tally: OutcomeTally) -> None:
        pass

    def finish(self) -> None:
        pass


class PlainProgress:
    """For CI logs: one line at most every `every_s` seconds, and a last one."""

    def __init__(self, every_s: float = 10.0) -> None:
        self.every_s = every_s
        self.total = self.done = self.errors = self.stored = 0
        self._t0 = self._last = 0.0

    def start(self, total: int, done: int, tally: OutcomeTally) -> None:
        self.total, self.done, self.stored = total, done, done
        self._t0 = self._last = time.monotonic()
        print(f"eval: {done}/{total} rollouts already stored", file=sys.stderr)

    def advance(self, rollouts: int, errors: int, tally: OutcomeTally) -> None:
        self.done += rollouts
        self.errors += errors
        now = time.monotonic()
        if now - self._last >= self.every_s or self.done >= self.total:
            self._last = now
            # Rollouts this run generated: a resumed run's stored ones took no time here.
            rate = (self.done - self.stored) / max(now - self._t0, 1e-9)
            print(
                f"eval: {self.done}/{self.total} rollouts, {rate:.1f}/s, "
                f"{self.errors} errors; {tally.line()}",
                file=sys.stderr,
            )

    def finish(self) -> None:
        pass


class RichProgress:
    """Live bar: done of total, rollouts per second, ETA, and the outcome tally."""

    def __init__(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TaskProgressColumn,
            TextColumn,
            TimeRemainingColumn,
        )
        from rich.progress import (
            Progress as RichBar,
        )

        self._bar = RichBar(
            TextColumn("[bold]eval"),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[tally]}"),
            transient=False,
        )
        self._task: TaskID | None = None
        self._t0 = 0.0
        self._new = 0

    def start(self, total: int, done: int, tally: OutcomeTally) -> None:
        self._t0 = time.monotonic()
        self._bar.start()
        self._task = self._bar.add_task(
            "eval", total=total, completed=done, rate="", tally=tally.short()
        )

    def advance(self, rollouts: int, errors: int, tally: OutcomeTally) -> None:
        self._new += rollouts
        rate = self._new / max(time.monotonic() - self._t0, 1e-9)
        assert self._task is not None
        self._bar.update(self._task, advance=rollouts, rate=f"{rate:.0f}/s", tally=tally.short())

    def finish(self) -> None:
        self._bar.stop()


def make_progress(quiet: bool = False) -> Progress:
    if quiet:
        return NullProgress()
    if sys.stderr.isatty():
        return RichProgress()
    return PlainProgress()


# The end-of-run summary lists this many of the most frequent error messages.
TOP_ERRORS = 5


def error_summary(
    messages: Mapping[str, int], *, top: int = TOP_ERRORS, width: int = 80
) -> list[str]:
    """The most frequent error messages with their counts, one line each (cut to
    `width`), most frequent first; nothing when there was no error."""
    if not messages:
        return []
    ranked = sorted(messages.items(), key=lambda item: (-item[1], item[0]))
    digits = len(str(ranked[0][1]))
    lines = [f"errors by message ({len(ranked)} distinct):"]
    for message, count in ranked[:top]:
        line = f"  {count:>{digits}}  {' '.join(message.split())}"
        lines.append(line if len(line) <= width else line[: width - 3] + "...")
    if len(ranked) > top:
        rest = sum(count for _, count in ranked[top:])
        lines.append(f"  {rest:>{digits}}  ({len(ranked) - top} other messages)")
    return lines
