"""``--grader judge``: an LLM scores each completion with a rubric, through any
OpenAI-compatible endpoint.

The rubric is a text with ``{prompt}``, ``{completion}`` and ``{reference}`` placeholders
(only these three are replaced, so a rubric may show JSON with braces). The judge must
end its answer with a verdict in one of two strict forms, ``SCORE: 7/10`` or a JSON
object ``{"score": 7, "max": 10}``; the score is normalised to [0, 1] and the judge's
own value kept in ``raw_score``. An answer without a verdict is that rollout's error
row, with the judge's text kept (in the message, shortened, and in ``extracted``):
never a 0.

Calls go through the remote-call core (``curate.remote``: retries, pacing, adaptive
concurrency, the outage watch, key scrubbing) in the OpenAI-compatible wire format
(``curate.remote.openai_wire``, shared with the OpenAI backend), with the judge's
declared remote settings (``curate.remote.settings.JUDGE``). Each answer is cached on
disk (``judge_cache.jsonl`` in the run directory), keyed by the SHA-256 of (rubric,
judge model, prompt, completion, reference), so a re-run, a resume or a re-grade never
pays for the same judgement twice. Lines are appended whole with one write each; a torn
last line (a kill mid-write) is skipped when read. The key is never written anywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from curate.core.options import OptionSchema, option
from curate.errors import RunError, UsageError
from curate.graders.base import (
    GradeResult,
    GraderOptions,
    GradingError,
    SampleContext,
    check_lengths,
    error_result,
    one_line,
)
from curate.remote import (
    CONNECTION,
    EndpointDown,
    GaveUp,
    Rejected,
    RemoteCaller,
    RemoteStats,
    Unreachable,
    redact_url,
    run_pool,
    scrub,
)
from curate.remote.settings import (
    JUDGE,
    JUDGE_MAX_TOKENS,
    OPENAI_KEY_ENV,
    PLACEHOLDER_KEY,
    RemoteSettings,
)

CACHE_FILE = "judge_cache.jsonl"
PLACEHOLDERS = ("prompt", "completion", "reference")
_PLACEHOLDER = re.compile(r"\{(prompt|completion|reference)\}")
# The judge's text kept in an error message, and in `extracted` of an error row.
ERROR_EXCERPT = 120
KEPT_TEXT = 1000
# Refusals that mean the judge cannot work at all (wrong key, model or URL): stop.
_FATAL_STATUSES = (401, 403, 404)

DEFAULT_RUBRIC = """\
You are grading one answer to a task. Read the task, the reference answer and the \
answer to grade, then judge how correct and complete the answer is.

Task:
{prompt}

Reference answer:
{reference}

Answer to grade:
{completion}

Give 10 for an answer that is fully correct (the same final result as the reference, \
whatever the wording), 0 for a wrong or missing answer, and values in between for \
partly correct work. Explain briefly, then end with one line in exactly this form:
SCORE: <integer from 0 to 10>/10
"""

# `SCORE: 7/10`, `score: 3.5 / 5`: the last one in the text counts.
_SCORE_LINE = re.compile(
    r"SCORE\s*:\s*\**\s*([-+]?\d+(?:\.\d+)?)\s*\**\s*/\s*([-+]?\d+(?:\.\d+)?)", re.IGNORECASE
)
_JSON_OBJECT = re.compile(r"\{[^{}]*\}")


def parse_verdict(text: str) -> tuple[float, float] | None:
    """(score, max) from a judge's answer, or None when it has no valid verdict.

    The last ``SCORE: x/y`` line, else the last JSON object with numeric ``score`` and
    ``max``. Valid means finite, ``max > 0`` and ``0 <= score <= max``."""
    found: tuple[int, float, float] | None = None
    for match in _SCORE_LINE.finditer(text):
        found = (match.start(), float(match.group(1)), float(match.group(2)))
    for match in _JSON_OBJECT.finditer(text):
        with contextlib.suppress(ValueError):
            obj = json.loads(match.group(0))
            if isinstance(obj, dict):
                score, top = obj.get("score"), obj.get("max")
                numeric = all(
                    isinstance(v, int | float) and not isinstance(v, bool) for v in (score, top)
                )
                if numeric and (found is None or match.start() > found[0]):
                    found = (match.start(), float(score), float(top))  # type: ignore[arg-type]
    if found is None:
        return None
    _, score, top = found
    if not (top > 0 and 0 <= score <= top) or score != score:  # NaN never compares
        return None
    return score, top


def verdict_result(text: str) -> GradeResult:
    """The grade a judge's answer gives: a score in [0, 1] with the raw value, or an
    error row that keeps the judge's text."""
    verdict = parse_verdict(text)
    if verdict is None:
        excerpt = one_line(text, ERROR_EXCERPT) if text.strip() else "(empty)"
        return GradeResult(
            score=None,
            extracted=text[:KEPT_TEXT],
            error=one_line(
                "judge answer has no verdict (expected 'SCORE: x/y' or "
                f'{{"score": x, "max": y}}): {excerpt!r}',
                2 * ERROR_EXCERPT + 80,
            ),
        )
    score, top = verdict
    return GradeResult(score=score / top, extracted=f"{score:g}/{top:g}", raw_score=score)


def fill_rubric(rubric: str, prompt: str, completion: str, reference: str) -> str:
    """The rubric with its three placeholders replaced (any other braces kept)."""
    values = {"prompt": prompt, "completion": completion, "reference": reference}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], rubric)


def load_rubric(path: Path | None) -> str:
    """The rubric's text (the built-in one for None); UsageError naming --rubric."""
    if path is None:
        return DEFAULT_RUBRIC
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"--rubric {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--rubric {path}: cannot read it ({type(exc).__name__})") from None
    if "{completion}" not in text:
        raise UsageError(
            f"--rubric {path}: the rubric has no {{completion}} placeholder "
            "(it may use {prompt}, {completion} and {reference})"
        )
    return text


def _as_text(value: object) -> str:
    """A prompt (text or chat messages) or a reference as the judge reads it."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(m, dict) for m in value):
        return "\n".join(f"{m.get('role', 'user')}: {m.get('content') or ''}" for m in value)
    if isinstance(value, list | tuple):
        return " or ".join(_as_text(v) for v in value)
    return json.dumps(value, default=str, ensure_ascii=False)


@dataclass(frozen=True)
class JudgeConfig(OptionSchema):
    """How to reach the judge and what it reads: the `judge` kind's option schema
    (`--judge-*` flags, or `-O judge.NAME=VALUE`). Holds no secret: the key stays in the
    environment variable `api_key_env` names."""

    label: ClassVar[str] = "--grader judge"
    flag_prefix: ClassVar[str] = "--judge-"

    model: str = option(help="the judge's model name at the endpoint")
    base_url: str | None = option(
        None, "the judge's OpenAI-compatible endpoint", default_help="$OPENAI_BASE_URL"
    )
    # How to reach the judge: defaults and checks are the judge's remote settings'.
    api_key_env: str = option(
        OPENAI_KEY_ENV, "the NAME of the environment variable holding the judge's key"
    )
    rubric_path: Path | None = option(
        None, "a rubric file with {prompt}, {completion} and {reference}", cli="--rubric"
    )
    price_per_mtok: float | None = option(
        None, "USD per million judge tokens (prompt and completion)", cli="--judge-price"
    )
    concurrency: int = option(
        JUDGE.concurrency,
        "judge requests in flight at once",
        min=RemoteSettings.bound("concurrency"),
    )
    timeout: float = option(
        JUDGE.timeout, "seconds per judge request", min=RemoteSettings.bound("timeout")
    )
    max_retries: int = option(
        JUDGE.max_retries,
        "retries of a failed judge request",
        min=RemoteSettings.bound("max_retries"),
    )
    max_tokens: int = option(JUDGE_MAX_TOKENS, "the judge's answer length limit in tokens")
    # Set by the run (RUN/judge_cache.jsonl), not by the user.
    cache_path: Path | None = option(None, "the judge's answer cache", settable=False)
    # The settings the judge's calls run with, built (and validated) from the above.
    remote: RemoteSettings = field(default=JUDGE, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise UsageError("--judge-model: empty model name")
        remote = JUDGE.replace(
            base_urls=(self.base_url,) if self.base_url else None,
            api_key_env=self.api_key_env,
            concurrency=self.concurrency,
            timeout=self.timeout,
            max_retries=self.max_retries,
        )
        object.__setattr__(self, "remote", remote)
        if self.price_per_mtok is not None and not (
            self.price_per_mtok >= 0 and self.price_per_mtok != float("inf")
        ):
            raise UsageError(
                f"--judge-price {self.price_per_mtok:g}: expected a price >= 0 (USD per 1M tokens)"
            )
        if self.max_tokens < 1:
            raise UsageError(f"--judge-max-tokens {self.max_tokens}: expected at least 1")
        super().__post_init__()

    @classmethod
    def default(cls, name: str) -> Any:
        """The declared default of field `name` (for the flags' help)."""
        return next(f.default for f in fields(cls) if f.name == name)


def judge_record(config: JudgeConfig, rubric: str) -> dict[str, Any]:
    """What the manifest keeps about the judge (never the key: only its variable's name)."""
    urls = config.remote.urls()
    return {
        "model": config.model,
        "rubric": str(config.rubric_path) if config.rubric_path is not None else "default",
        "rubric_sha256": hashlib.sha256(rubric.encode()).hexdigest(),
        "base_url": redact_url(urls[0]) if urls else None,
        "api_key_env": config.api_key_env,
        "price_per_mtok": config.price_per_mtok,
    }


@dataclass
class JudgeUsage:
    """What the judge cost: calls made (paid), answers taken from the cache, tokens."""

    calls: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    price_per_mtok: float | None = None

    @property
    def cost_usd(self) -> float | None:
        if self.price_per_mtok is None:
            return None
        return (self.prompt_tokens + self.completion_tokens) * self.price_per_mtok / 1e6

    def record(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "cached": self.cached,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
        }

    def line(self) -> str:
        text = (
            f"judge: {self.calls} calls ({self.cached} from the cache), "
            f"{self.prompt_tokens:,} prompt + {self.completion_tokens:,} completion tokens"
        )
        cost = self.cost_usd
        return text + (f", ${cost:.4f}" if cost is not None else "")


@dataclass
class JudgeCache:
    """Judge answers by key, appended to a JSONL file one whole line per write."""

    path: Path | None
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.path is None or not self.path.is_file():
            return
        with self.path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                with contextlib.suppress(ValueError):
                    entry = json.loads(line)
                    if isinstance(entry, dict) and isinstance(entry.get("text"), str):
                        self.entries[str(entry.get("key"))] = entry

    def get(self, key: str) -> dict[str, Any] | None:
        return self.entries.get(key)

    def put(self, key: str, text: str, prompt_tokens: int, completion_tokens: int) -> None:
        entry = {
            "key": key,
            "text": text,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
        }
        self.entries[key] = entry
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = (json.dumps(entry, ensure_ascii=False) + "\n").encode()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            # A torn line from a killed writer must not swallow this one.
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data
            os.write(fd, data)
        finally:
            os.close(fd)


def cache_key(rubric: str, model: str, prompt: str, completion: str, reference: str) -> str:
    payload = json.dumps([rubric, model, prompt, completion, reference], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(slots=True)
class _Job:
    key: str
    message: str
    result: GradeResult | None = None


class JudgeGrader:
    """Grades by asking an LLM judge; reads each sample's prompt (``needs_context``)."""

    needs_context = True
    # Grading each reference against itself would be one paid call per sample, and a
    # judge's view of a bare answer proves nothing about the rubric: not checked.
    checks_references = False

    def __init__(self, name: str, config: JudgeConfig) -> None:
        self.name = name
        self.config = config
        self.rubric = load_rubric(config.rubric_path)
        self._key = config.remote.sdk_key()
        urls = config.remote.urls()
        if not urls:
            raise UsageError("--grader judge needs --judge-base-url (or OPENAI_BASE_URL)")
        self.base_url = urls[0]
        self.cache = JudgeCache(config.cache_path)
        self.usage = JudgeUsage(price_per_mtok=config.price_per_mtok)
        self.stats = RemoteStats()
        self._answered = False

    def record(self) -> dict[str, Any]:
        return judge_record(self.config, self.rubric)

    def scrub(self, text: str) -> str:
        # The placeholder is no secret, and blanking it would garble messages.
        return scrub(text, None if self._key.reveal() == PLACEHOLDER_KEY else self._key)

    def grade_batch(
        self,
        completions: Sequence[str],
        references: Sequence[object],
        contexts: Sequence[SampleContext] | None = None,
    ) -> list[GradeResult]:
        check_lengths(completions, references)
        rows: Sequence[Mapping[str, Any]] = contexts or [{} for _ in completions]
        jobs: list[_Job] = []
        todo: dict[str, _Job] = {}
        for completion, reference, row in zip(completions, references, rows, strict=True):
            prompt, ref = _as_text(row.get("prompt")), _as_text(reference)
            key = cache_key(self.rubric, self.config.model, prompt, completion, ref)
            job = _Job(key, fill_rubric(self.rubric, prompt, completion, ref))
            hit = self.cache.get(key)
            if hit is not None:
                self.usage.cached += 1
                job.result = verdict_result(hit["text"])
            elif key in todo:
                job = todo[key]  # the same judgement twice in one batch: one call
            else:
                todo[key] = job
            jobs.append(job)
        if todo:
            asyncio.run(self._judge_all(list(todo.values())))
        return [job.result or error_result("judge: no answer") for job in jobs]

    async def _judge_all(self, jobs: list[_Job]) -> None:
        # The openai SDK is imported when a judge first grades, not when one is built.
        from curate.remote.openai_wire import async_client, classify

        remote = self.config.remote
        caller = remote.caller(classify, stats=self.stats, answered=self._answered)
        client = async_client(remote, self.base_url, self._key)
        endpoint = client.chat.completions.with_raw_response

        async def work(job: _Job) -> None:
            job.result = await self._judge_one(caller, endpoint, job)

        try:
            await run_pool(jobs, 2 * remote.concurrency, work)
        finally:
            self._answered = caller.answered
            caller.finish()
            with contextlib.suppress(Exception):
                await client.close()

    async def _judge_one(self, caller: RemoteCaller, endpoint: Any, job: _Job) -> GradeResult:
        from curate.remote.openai_wire import parse_body, request_body

        body = request_body(
            self.config.model,
            job.message,
            "chat",
            max_tokens=self.config.max_tokens,
            temperature=0.0,
        )

        async def send() -> bytes:
            raw = await endpoint.create(**body)
            return bytes(raw.content)

        def handle(content: bytes, attempt: object) -> tuple[str, int, int]:
            choices, prompt_tokens, completion_tokens = parse_body(content, "chat")
            return choices[0].text, prompt_tokens or 0, completion_tokens or 0

        url = redact_url(self.base_url)
        try:
            text, prompt_tokens, completion_tokens = await caller.call(
                send, handle, cost=len(job.message) / 4 + self.config.max_tokens
            )
        except Rejected as rejected:
            message = self.scrub(f"judge at {url} refused: {rejected.status} {rejected.detail}")
            if rejected.status in _FATAL_STATUSES:
                if rejected.status == 401:
                    message += f" (check the key in ${self.config.api_key_env})"
                raise RunError(message) from None
            return error_result(message)
        except (Unreachable, EndpointDown) as down:
            last = down.last.message
            raise RunError(
                self.scrub(f"cannot reach the judge at {url}: {last}")
                + " (point --judge-base-url at a running OpenAI-compatible server; "
                "judgements made so far are cached)"
            ) from None
        except GaveUp as gave_up:
            fault = gave_up.fault
            if fault.cause == CONNECTION and not caller.answered:
                # Nothing at that address ever answered: a wrong URL or a server that
                # is down, not one rollout's problem.
                raise RunError(
                    self.scrub(f"cannot reach the judge at {url}: {fault.message}")
                    + " (point --judge-base-url at a running OpenAI-compatible server)"
                ) from None
            return error_result(
                self.scrub(
                    f"judge: {fault.cause}: {fault.message} "
                    f"(gave up after {gave_up.attempts} attempts)"
                )
            )
        self.usage.calls += 1
        self.usage.prompt_tokens += prompt_tokens
        self.usage.completion_tokens += completion_tokens
        self.cache.put(job.key, text, prompt_tokens, completion_tokens)
        return verdict_result(text)

    def close(self) -> None:
        """Nothing held between batches (each batch opens and closes its client)."""

    def __repr__(self) -> str:
        return f"JudgeGrader({self.config.model!r})"


def judge_usage_of(grader: object) -> dict[str, Any] | None:
    """A judge grader's usage so far (None for any other grader)."""
    usage = getattr(grader, "usage", None)
    return usage.record() if isinstance(usage, JudgeUsage) else None


def judge_settings_of(grader: object) -> dict[str, Any]:
    """The manifest's `judge` (what changes scores: model and rubric, compared on resume)
    and `judge_options` (the rest) for a judge grader; {} for any other grader."""
    if not isinstance(grader, JudgeGrader):
        return {}
    record = grader.record()
    scoring = {"model": record.pop("model"), "rubric_sha256": record.pop("rubric_sha256")}
    return {"judge": scoring, "judge_options": record}


def merge_usage(previous: object, usage: Mapping[str, Any]) -> dict[str, Any]:
    """A run's judge usage over all its sessions: this session's added to the last."""
    out = dict(usage)
    if isinstance(previous, Mapping):
        for key in ("calls", "cached", "prompt_tokens", "completion_tokens"):
            before = previous.get(key)
            if isinstance(before, int) and not isinstance(before, bool):
                out[key] = int(out.get(key) or 0) + before
        before_cost = previous.get("cost_usd")
        if isinstance(before_cost, int | float) and out.get("cost_usd") is not None:
            out["cost_usd"] = float(out["cost_usd"]) + float(before_cost)
    return out


def judge_grader(spec: str, argument: str | None, options: GraderOptions) -> JudgeGrader:
    """The registry's factory: ``judge`` (the judge's settings come in the options)."""
    if argument is not None:
        raise UsageError(f"grader {spec!r}: the judge takes no argument; use --rubric PATH")
    config = options.kind_options
    if not isinstance(config, JudgeConfig):
        raise UsageError("--grader judge needs --judge-model (and --judge-base-url)")
    return JudgeGrader(spec, config)


__all__ = [
    "CACHE_FILE",
    "DEFAULT_RUBRIC",
    "GradingError",
    "JudgeCache",
    "JudgeConfig",
    "JudgeGrader",
    "JudgeUsage",
    "cache_key",
    "fill_rubric",
    "judge_grader",
    "judge_settings_of",
    "judge_usage_of",
    "load_rubric",
    "merge_usage",
    "parse_verdict",
    "verdict_result",
]
