"""Reasoning kept apart from the answer, and what to do with a rollout that was cut short.

One split for the whole of curate (`split_reasoning`): the engine stores the reasoning
and the answer in separate columns, and the built-in graders read the answer only.
Where the reasoning comes from, first that applies:

* the backend separated it (an OpenAI-compatible server's `reasoning_content` /
  `reasoning` field, or vLLM's reasoning parser run on the offline engine's output):
  `separated(content, reasoning, closed)`;
* else the text is split at ``</think>``: a leading ``<think>...</think>`` block (after
  optional whitespace) is reasoning; a ``</think>`` with no opening tag before it means
  the chat template opened the block in the prompt (Qwen3, DeepSeek-R1), so the text up
  to it is reasoning; a ``<think>`` never closed is reasoning with no answer.

A reasoning block that closes on the very last token the budget allowed (finish reason
``length``, nothing after ``</think>``) counts as *never closed* (`ended`): a server that
separates reasoning sends no tag, so from its answer alone such a block cannot be told
from one cut before its end, and one rule for both keeps the offline engine and a server
storing the same row. Either way the model gave no answer.

A rollout is *cut short* when it stopped on max_tokens (finish reason ``length``) or its
reasoning never closed; the store's `truncated` column says so, and the run's truncation
policy (`TRUNCATION_POLICIES`) says how it is scored and counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

THINK_OPEN: Final = "<think>"
THINK_CLOSE: Final = "</think>"


class Truncation(StrEnum):
    """How a rollout cut short is scored and counted (`--truncated`, the manifest's
    `truncation`). A str: it is written to the manifest and compared as its name."""

    GRADE = "grade"  # graded as it stands (an unclosed reasoning has no answer: 0)
    WRONG = "wrong"  # score 0
    ERROR = "error"  # an error row (settled: the same seed cuts it short again)
    EXCLUDE = "exclude"  # graded and stored, left out of every statistic


TRUNCATION_POLICIES: Final[tuple[str, ...]] = tuple(policy.value for policy in Truncation)
# What verl and TRL do: the reward function sees the truncated text as it is.
DEFAULT_TRUNCATION: Final = Truncation.GRADE
# The manifest key; a run made before it existed graded truncated rollouts as they stood.
TRUNCATION_KEY: Final = "truncation"
# The error text of a cut-short rollout under the `error` policy (never retried: the
# same seed would cut it short again).
TRUNCATED_ERROR_PREFIX: Final = "truncated: "


@dataclass(frozen=True, slots=True)
class ReasoningSplit:
    """A completion as reasoning and answer.

    `answer` is None when the reasoning never closed (the model gave no answer);
    `reasoning` and `closed` are None when the model did not reason.
    """

    answer: str | None
    reasoning: str | None = None
    closed: bool | None = None


def split_reasoning(text: str) -> ReasoningSplit:
    """Split `text` at its reasoning block (see the module docstring)."""
    stripped = text.lstrip()
    if stripped.startswith(THINK_OPEN):
        end = stripped.find(THINK_CLOSE, len(THINK_OPEN))
        if end < 0:
            return ReasoningSplit(None, stripped[len(THINK_OPEN) :], False)
        reasoning = stripped[len(THINK_OPEN) : end]
        return ReasoningSplit(stripped[end + len(THINK_CLOSE) :], reasoning, True)
    close = text.find(THINK_CLOSE)
    if close >= 0 and THINK_OPEN not in text[:close]:
        # The template opened the block in the prompt; only the closing tag is ours.
        return ReasoningSplit(text[close + len(THINK_CLOSE) :], text[:close], True)
    return ReasoningSplit(text)


def ended(answer: str | None, finish_reason: str | None) -> bool:
    """Whether a reasoning block that was followed by `answer` counts as closed: it is,
    unless the rollout stopped on max_tokens with nothing after the block (the
    closed-at-the-last-token rule of the module docstring)."""
    return bool(answer) or finish_reason != "length"


def at_last_token(split: ReasoningSplit, finish_reason: str | None) -> ReasoningSplit:
    """`split` under the closed-at-the-last-token rule (`ended`): a block closed with no
    answer after it on a rollout stopped by max_tokens becomes one never closed."""
    if split.closed and not ended(split.answer, finish_reason):
        return ReasoningSplit(None, split.reasoning, False)
    return split


def separated(content: str | None, reasoning: str, closed: bool) -> ReasoningSplit:
    """A split the backend made: `content` is the answer (None or '' when it gave
    none), `closed` whether the reasoning ended."""
    return ReasoningSplit((content or "") if closed else None, reasoning, closed)


def joined(split: ReasoningSplit) -> str:
    """The completion as the model wrote it, tags included: what a trainer's reward
    function reads (it sees the decoded response, reasoning and all)."""
    if split.reasoning is None:
        return split.answer or ""
    if not split.closed:
        return f"{THINK_OPEN}{split.reasoning}"
    return f"{THINK_OPEN}{split.reasoning}{THINK_CLOSE}{split.answer or ''}"


def cut_short(finish_reason: str | None, split: ReasoningSplit) -> bool:
    """Stopped on max_tokens, or its reasoning never closed."""
    return finish_reason == "length" or split.closed is False


def parse_truncation(value: str) -> Truncation:
    """`value` as a policy; ValueError naming the choices for anything else."""
    try:
        return Truncation(value)
    except ValueError:
        raise ValueError(
            f"must be one of {', '.join(TRUNCATION_POLICIES)}, not {value!r}"
        ) from None


def truncation_of(manifest: Mapping[str, object] | None) -> Truncation:
    """The truncation policy a manifest records; absent (an older run) is `grade`.
    The manifest's reader (`curate.store.manifest`) has refused any other value."""
    value = (manifest or {}).get(TRUNCATION_KEY)
    if isinstance(value, str) and value in TRUNCATION_POLICIES:
        return Truncation(value)
    return DEFAULT_TRUNCATION
