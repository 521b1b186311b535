"""What a run is: the settings that change its scores, kept in the manifest and
compared on resume."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from typing import Any

from curate import __version__
from curate.core.prompts import Mode
from curate.core.reasoning import DEFAULT_TRUNCATION, TRUNCATION_KEY, truncation_of
from curate.core.sampling import SamplingConfig

# Manifest keys whose change would change the scores: a resume must refuse them.
SCORE_KEYS = (
    "model",
    "mode",
    "chat_template_sha256",
    "system",
    "template",
    "prompt_field",
    "messages_field",
    "answer_field",
    "id_field",
    "layout",
    "sampling",
    "seed",
    "grader",
    "dataset_sha256",
    "reference_extract",
    "score_range",
    "judge",
    "truncation",
)
# A run made before reference extraction graded the references as given: its manifest
# has no `reference_extract`, which compares equal to the extractor "none".
NO_EXTRACTION = "none"


@dataclass
class EvalSettings:
    model: str
    backend: str
    runs: int
    mode: Mode
    sampling: SamplingConfig
    seed: int
    grader: str
    dataset_path: str
    dataset_sha256: str
    prompt_field: str | None
    messages_field: str | None
    answer_field: str
    id_field: str | None
    layout: str | None = None  # the catalogue layout the data was read with
    template: str | None = None
    system: str | None = None
    chat_template_sha256: str | None = None
    limit: int | None = None
    engine_options: dict[str, Any] = field(default_factory=dict)
    # The adaptive policy's parameters (None: a fixed-N run). Not a score key: it
    # decides which rollouts exist, not what any rollout scores.
    adaptive: dict[str, Any] | None = None
    # How references were read: {"requested", "mode", "applied", "total", "summary"};
    # resume compares the extractor used ("mode"), see `extract_mode_of`.
    reference_extract: dict[str, Any] | None = None
    grader_reason: str | None = None  # why this grader: "as given" or the automatic choice
    grader_timeout_s: float | None = None
    score_range: list[float] | None = None  # [low, high] of a ranged reward
    # `reward-model`'s server: {"base_url" (redacted), "model", "endpoint"}. Not a score
    # key: the same model may be served at another address when a run resumes.
    reward_model: dict[str, Any] | None = None
    # `--grader judge`: {"model", "rubric_sha256"} (what changes the scores; compared on
    # resume) and the rest of the judge's settings (rubric path, URL, key variable, price).
    judge: dict[str, Any] | None = None
    judge_options: dict[str, Any] | None = None
    # How a rollout cut short is scored and counted (curate.core.reasoning).
    truncation: str = DEFAULT_TRUNCATION
    # The grader's own start lines (the code grader: test layouts, sandbox, limits), so a
    # run says what fenced its programs. Not a score key: the machine may change.
    grader_notes: list[str] | None = None

    def manifest(self, *, previous: dict[str, Any] | None = None) -> dict[str, Any]:
        """The manifest body. Secrets never enter it: settings hold no keys."""
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        body = asdict(self)
        body["sampling"] = self.sampling.as_dict()
        policy = body.pop("adaptive")
        for key in ("judge", "judge_options"):  # only a judged run has them
            if body[key] is None:
                del body[key]
        body.update(
            curate_version=__version__,
            created_at=(previous or {}).get("created_at", now),
            updated_at=now,
            # `curate report` reads this: unequal rollout counts are by design here.
            adaptive=policy is not None,
        )
        if policy is not None:
            body["adaptive_policy"] = policy
        return body


def score_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable list of score-changing settings that differ."""
    diffs = []
    for key in SCORE_KEYS:
        a, b = old.get(key), new.get(key)
        if key == TRUNCATION_KEY:
            # A run made before the policy existed graded cut-short rollouts as they stood.
            a, b = truncation_of(old), truncation_of(new)
            if a != b:
                diffs.append(f"--truncated {a!r} -> {b!r}")
        elif key == "reference_extract":
            a, b = extract_mode_of(a), extract_mode_of(b)
            if a != b:
                diffs.append(f"reference extraction {a!r} -> {b!r}")
        elif key == "sampling" and isinstance(a, dict) and isinstance(b, dict):
            for sub in sorted(set(a) | set(b)):
                if a.get(sub) != b.get(sub):
                    diffs.append(f"{sub} {a.get(sub)!r} -> {b.get(sub)!r}")
        elif a != b:
            if key == "dataset_sha256":
                diffs.append("data set contents changed")
            elif key == "chat_template_sha256":
                diffs.append("chat template changed")
            else:
                diffs.append(f"{key} {a!r} -> {b!r}")
    return diffs


def extract_mode_of(value: object) -> object:
    """The extractor a manifest's `reference_extract` records as used; absent (a run
    made before extraction existed, which graded references as given) is "none"."""
    if value is None:
        return NO_EXTRACTION
    if isinstance(value, dict):
        return value.get("mode", NO_EXTRACTION)
    return value
