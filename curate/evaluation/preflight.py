"""What `curate eval` settles before anything is generated: how the references are
read (`curate.graders.references`), which grader scores them and why, whether that
grader can use them (`curate.graders.checks`), and one sample's prompt exactly as the
model will see it.

`preflight(opts)` does all of it for `evaluate` and for `--dry-run`; `Preflight.lines()`
is what the CLI prints on stderr at the start, `Preflight.refusal()` the error that
stops a run whose references the grader cannot use, before the engine starts.
"""

from __future__ import annotations

import json
import math
import textwrap
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.core.prompts import Mode, Prompt
from curate.data.layouts import get_layout
from curate.data.samples import FieldMap, build_prompts, field_values, references_by_id
from curate.data.sanity import index_warnings
from curate.errors import MissingExtraError, UsageError
from curate.evaluation.options import EvalOptions, load_eval_samples
from curate.evaluation.runner import sample_contexts
from curate.graders import Grader, get_grader
from curate.graders.base import SampleContext, needs_context, one_line
from curate.graders.checks import DEFAULT_MAX_BAD_FRACTION, ReferenceCheck, check_references
from curate.graders.code import SCORE_MODES, SOLUTION_FIELDS, with_score_mode
from curate.graders.judge import CACHE_FILE
from curate.graders.references import (
    EXTRACT_MODES,
    ReferenceExtraction,
    choose_grader,
    extract_references,
)
from curate.graders.registry import AS_STORED_KINDS, RANGED_KINDS, grader_kind

if TYPE_CHECKING:
    import polars as pl

__all__ = ["DEFAULT_MAX_BAD_FRACTION", "Preflight", "parse_score_range", "preflight"]

WIDTH = 80  # the start lines fit a standard terminal
PROMPT_LINES = 12  # at most this many lines of the example prompt
# Examples under the one-line refusal (the manifest keeps the check's own few).
REFUSAL_EXAMPLES = 3

_LAYOUTS = {
    "gsm8k": "the '#### N' line",
    "boxed": "the last \\boxed{}",
    "answer-is": "the 'The answer is' line",
    "last-number": "the last number",
}


@dataclass
class Preflight:
    """The references as the grader will read them, the grader, and its self-check."""

    frame: pl.DataFrame  # the samples, with `sample_id`
    fields: FieldMap
    extraction: ReferenceExtraction
    grader_spec: str
    grader_reason: str
    grader: Grader  # open: `evaluate` hands it on and closes it; else call `close()`
    check: ReferenceCheck
    max_bad_fraction: float
    example: tuple[str, Prompt, str] | None  # (sample id, prompt, how it was rendered)
    example_text: str | None = None  # the example prompt as the model sees it
    raw_references: dict[str, object] | None = None  # as the data set holds them
    grader_notes: tuple[str, ...] = ()  # the grader's own start lines (code: layouts, sandbox)
    layout_line: str = ""  # which layout the data was read with, and from which fields
    example_stored: object = None  # the example's answer field as the file holds it
    sanity: tuple[str, ...] = ()  # what the layout catalogue did not know (curate.data.sanity)

    @property
    def references(self) -> dict[str, object]:
        """Sample id -> the reference the grader reads (after extraction)."""
        return self.extraction.references

    def close(self) -> None:
        self.grader.close()

    def refusal(self, data: object) -> UsageError | None:
        """The error that keeps a run from starting (None: the references are usable).

        One line naming the data file, the count and the options that fix it, then the
        first few bad references, one per line."""
        check = self.check
        if not check.exceeds(self.max_bad_fraction):
            return None
        allow = math.ceil(check.bad_fraction * 100) / 100
        if grader_kind(self.grader_spec) == "code" and _is_solution(self.fields.answer_field):
            # A solution is not a test: allowing the bad references would grade nothing.
            head = (
                f"grader {self.grader_spec!r} runs tests, but --answer-field "
                f"{self.fields.answer_field} holds a solution: name the tests column with "
                f"--answer-field (e.g. test, test_list, input_output) or drop it to use "
                f"the layout's"
            )
            return UsageError(head, path=data)
        head = (
            f"grader {self.grader_spec!r} cannot use {check.bad} of {check.total} references "
            f"({check.bad_fraction:.1%}; --max-bad-references allows "
            f"{self.max_bad_fraction:g}): read them another way with --reference-extract "
            f"(now {self.extraction.mode}), choose another --grader, or allow them with "
            f"--max-bad-references {allow:g}"
        )
        examples = [
            f"  sample {bad.sample_id}: {bad.reference}: {one_line(bad.problem, 120)}"
            for bad in check.examples[:REFUSAL_EXAMPLES]
        ]
        return UsageError("\n".join([head, *examples]), path=data)

    def lines(self) -> list[str]:
        """The start-of-eval lines (each at most WIDTH columns)."""
        ex = self.extraction
        if ex.mode == "none":
            how = "as given"
            if ex.requested == "auto":
                how += " (auto: " + (
                    "a reward function reads the data as stored)"
                    if self.grader_spec.partition(":")[0].strip().lower() in RANGED_KINDS
                    else "no known answer layout)"
                )
            if grader_kind(self.grader_spec) == "code":
                how = "the tests as given"
            what = f"references: {how}, {ex.total} in all"
        else:
            chosen = "auto" if ex.requested == "auto" else "--reference-extract"
            what = (
                f"references: {ex.mode} ({chosen}): answer from {_LAYOUTS[ex.mode]}, in "
                f"{ex.applied} of {ex.total} references"
            )
            if ex.unread:
                what += f"; {len(ex.unread)} kept as given"
        out = [*_fit(self.layout_line)] if self.layout_line else []
        out += [*_fit(what), *_fit(f"grader: {self.grader_reason}")]
        for note in self.grader_notes:
            out += _fit(note)
        out += _fit(f"check: {self.check.summary}")
        for note in self.sanity:
            out += _fit(f"warning: {note}")
        if self.example is not None:
            sid, _, how = self.example
            out += _fit(f"sample {sid}, as the model sees it ({how}):")
            out += _prompt_lines(self.example_text or "")
            reference = self.references.get(sid)
            raw = (self.raw_references or {}).get(sid, reference)
            if raw == reference and self.example_stored is not None:
                raw = self.example_stored  # as the file holds it, before the layout read it
            shown = f"reference as graded: {_short(reference, 40)}"
            if grader_kind(self.grader_spec) == "code":
                shown = f"tests as run: {_short(reference, 60)}"  # the tests are the reference
            elif raw != reference:
                shown += f" (from {_short(raw, 30)})"
            out += _fit(shown)
        return out

    def extraction_record(self) -> dict[str, Any]:
        """The manifest's `reference_extract`: the mode asked and the mode used."""
        ex = self.extraction
        return {
            "requested": ex.requested,
            "mode": ex.mode,
            "applied": ex.applied,
            "total": ex.total,
            "unread": len(ex.unread),
            "summary": ex.summary,
        }

    def check_record(self) -> dict[str, Any]:
        """The manifest's `reference_check` (what `curate report` can show)."""
        check = self.check
        return {
            "grader": check.grader,
            "total": check.total,
            "bad": check.bad,
            "unparsable": check.unparsable,
            "rejected": check.rejected,
            "unchecked": check.unchecked,
            "max_bad_fraction": self.max_bad_fraction,
            "summary": check.summary,
            "examples": [
                {"sample_id": bad.sample_id, "reference": bad.reference, "problem": bad.problem}
                for bad in check.examples
            ],
        }


def _is_solution(field: str) -> bool:

    return field in SOLUTION_FIELDS


def parse_score_range(text: str) -> tuple[float, float]:
    """``"LO:HI"`` (e.g. ``-1:1``, ``0:10``) as two finite numbers with LO < HI."""
    low, sep, high = text.partition(":")
    try:
        if not sep:
            raise ValueError
        pair = (float(low), float(high))
    except ValueError:
        raise UsageError(f"--score-range {text!r}: expected LO:HI, e.g. -1:1") from None
    if not all(math.isfinite(v) for v in pair) or pair[0] >= pair[1]:
        raise UsageError(f"--score-range {text!r}: expected two finite numbers with LO < HI")
    return pair


def check_options(opts: EvalOptions) -> None:
    """UsageError for a grading option out of range (one line, before any work)."""
    if opts.reference_extract not in EXTRACT_MODES:
        raise UsageError(
            f"--reference-extract {opts.reference_extract!r}: expected one of "
            f"{', '.join(EXTRACT_MODES)}"
        )
    if not 0.0 <= opts.max_bad_references <= 1.0:
        raise UsageError(
            f"--max-bad-references {opts.max_bad_references:g}: expected a fraction in [0, 1]"
        )
    check_grader_options(
        opts.grader,
        grader_timeout=opts.grader_timeout,
        grader_workers=opts.grader_workers,
        code_score=opts.code_score,
    )


def check_grader_options(
    grader: str | None,
    *,
    grader_timeout: float,
    grader_workers: int | None,
    code_score: str | None,
) -> None:
    """UsageError for a grader option out of range (`curate eval` and `curate grade`)."""
    if not (math.isfinite(grader_timeout) and grader_timeout > 0):
        raise UsageError(
            f"--grader-timeout {grader_timeout:g}: expected a positive number of seconds"
        )
    if grader_workers is not None and grader_workers < 1:
        raise UsageError(f"--grader-workers {grader_workers}: expected at least 1")
    if code_score is not None:
        if code_score not in SCORE_MODES:
            raise UsageError(
                f"--code-score {code_score!r}: expected one of {', '.join(SCORE_MODES)}"
            )
        if grader_kind(grader) != "code":
            raise UsageError("--code-score applies to --grader code only")


def grader_spec(opts: EvalOptions) -> str | None:
    """The --grader spec with --code-score folded in (`fold_code_score`)."""
    return fold_code_score(opts.grader, opts.code_score)


def fold_code_score(grader: str | None, code_score: str | None) -> str | None:
    """The --grader spec with --code-score folded in (so the manifest's grader says how
    the code grader scores, and a resume with another scoring is refused)."""
    if grader is None or code_score is None:
        return grader.strip() if grader is not None else None

    return with_score_mode(grader, code_score)


def preflight(opts: EvalOptions, mode: Mode | None = None) -> Preflight:
    """Load the samples, read their references, choose and open the grader, and check
    every reference against it. `mode` is the prompt mode when known (else the one the
    options imply, chat when unknown). Raises for bad options or data; a check above
    the allowed share is returned, not raised (`Preflight.refusal`)."""
    check_options(opts)
    frame, fields = load_eval_samples(opts)
    raw = references_by_id(frame, fields)
    layout = get_layout(fields.layout) if fields.layout is not None else None
    layout_grader = layout.grader if layout is not None and opts.grader is None else None
    as_stored = grader_kind(opts.grader or layout_grader) in AS_STORED_KINDS
    if opts.reference_extract == "auto" and as_stored:
        # A reward function is called as the trainer will call it: on the data as stored;
        # the code grader's references are tests.
        extraction = replace(extract_references(raw, "none"), requested="auto")
    else:
        extraction = extract_references(raw, opts.reference_extract)
    given = grader_spec(opts)
    if given is not None:
        spec, reason = given, f"{given} (given with --grader)"
        grader = _open(spec, opts)
    elif layout is not None and layout_grader is not None:
        spec, reason = layout_grader, f"{layout_grader} (the {layout.name} layout's grader)"
        try:
            grader = _open(spec, opts)
        except MissingExtraError:
            spec = "exact"
            reason += "; math-verify is not installed (pip install 'curate[math]'): exact"
            grader = _open(spec, opts)
    else:
        # Chosen on the references the extractor read: the ones it could not are data
        # problems for the check to report, not a reason to grade everything by `exact`.
        unread = set(extraction.unread)
        read = {s: ref for s, ref in extraction.references.items() if s not in unread}
        choice = choose_grader(read or extraction.references)
        spec, reason = choice.spec, _reason(choice.spec, choice.reason)
        if unread and read:
            reason = f"{reason[:-1]}; {len(unread)} unread left out)"
        try:
            grader = _open(spec, opts)
        except MissingExtraError:
            # `math` needs an extra; string equality is what runs without it.
            spec = "exact"
            reason += "; math-verify is not installed (pip install 'curate[math]'): exact"
            grader = _open(spec, opts)
    try:
        mode = mode or opts.known_mode() or "chat"
        prompts = dict(
            zip(
                frame["sample_id"].to_list(),
                build_prompts(frame, fields, mode, system=opts.system, source=opts.data),
                strict=True,
            )
        )
        contexts: dict[str, SampleContext] | None = None
        if needs_context(grader):
            contexts = sample_contexts(frame, prompts)
        check = check_references(grader, extraction.references, contexts=contexts)
        notes_of = getattr(grader, "preflight_notes", None)
        notes = tuple(notes_of(extraction.references, contexts)) if notes_of else ()
        example = None
        example_text = None
        example_stored = None
        if prompts:
            sid = next(iter(prompts))
            example_text, how = shown_prompt(prompts[sid], opts.model, mode)
            example = (sid, prompts[sid], how)
            if fields.layout is not None:
                example_stored = field_values(frame.head(1), fields.answer_field).to_list()[0]
    except BaseException:
        grader.close()
        raise
    return Preflight(
        layout_line=layout_line(frame, fields, opts.layout),
        example_stored=example_stored,
        sanity=tuple(index_warnings(frame, fields, raw)),
        frame=frame,
        fields=fields,
        extraction=extraction,
        grader_spec=spec,
        grader_reason=reason,
        grader=grader,
        check=check,
        max_bad_fraction=opts.max_bad_references,
        example=example,
        example_text=example_text,
        raw_references=raw,
        grader_notes=notes,
    )


def layout_line(frame: pl.DataFrame, fields: FieldMap, asked: str | None) -> str:
    """`layout: mmlu (multiple choice; detected from question, choices, answer)`, or
    which fields were taken by name when no layout was recognised."""
    used = [
        f
        for f in (fields.prompt_field, fields.messages_field, fields.answer_field)
        if f is not None
    ]
    if fields.template is not None:
        used.insert(0, f"--template {fields.template!r}")
    if fields.layout is None:
        how = "--layout none" if (asked or "").strip().lower() == "none" else "none recognised"
        return (
            f"layout: {how}; fields by name: {', '.join(used)} "
            "(curate layouts lists the known ones; --layout NAME forces one)"
        )
    layout = get_layout(fields.layout)
    if fields.template is None and fields.messages_field is None:
        # The columns the layout's prompt is made of, after the question.
        used[1:1] = [c for c in layout.also if c in frame.columns and c not in used]
    how = "detected" if (asked or "auto").strip().lower() == "auto" else "--layout"
    ids = f", ids from {fields.id_field}" if fields.id_field else ""
    return f"layout: {layout.name} ({layout.family}; {how}: {', '.join(used)}{ids})"


def _open(spec: str, opts: EvalOptions) -> Grader:
    judge = opts.judge
    if judge is not None and judge.cache_path is None:
        # The run directory is the judge's cache: a resume never pays twice.

        judge = replace(judge, cache_path=opts.run_dir() / CACHE_FILE)
    return get_grader(
        spec,
        timeout_s=opts.grader_timeout,
        score_range=opts.score_range,
        reward_model=opts.reward_model,
        workers=opts.grader_workers,
        judge=judge,
        kind_options=opts.grader_options,
    )


def _reason(spec: str, reason: str) -> str:
    """`numeric (auto: 40 of 40 references are numbers)` from choose_grader's reason."""
    detail = reason.removeprefix(f"{spec}:").strip()
    return f"{spec} (auto: {detail})"


# -- the prompt as the model sees it ------------------------------------------------------


def shown_prompt(prompt: Prompt, model: str, mode: Mode) -> tuple[str, str]:
    """(the prompt as the model sees it, how it was rendered): completion text as is; a
    chat prompt through the local model's chat template when there is one, else its
    messages (the backend applies the template)."""
    if isinstance(prompt, str):
        return prompt, "completion mode, the text as is"
    if mode == "chat":
        text = apply_local_template(model, prompt)
        if text is not None:
            return text, "its chat template applied"
    body = "\n".join(f"[{m.get('role')}] {m.get('content')}" for m in prompt)
    return body, "chat messages; the backend applies the model's template"


def apply_local_template(model: str, messages: Prompt) -> str | None:
    """`messages` rendered with a local model directory's chat template, as vLLM's
    chat() does (generation prompt added); None when there is no template or jinja2."""
    directory = Path(model)
    try:
        config = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: the default one
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    jinja_file = directory / "chat_template.jinja"
    if not isinstance(template, str) and jinja_file.is_file():
        template = jinja_file.read_text(encoding="utf-8")
    if not isinstance(template, str):
        return None
    try:
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        return None

    def raise_exception(message: str) -> None:
        raise ValueError(message)

    # The settings transformers renders chat templates with.
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    tokens = {
        key: value.get("content") if isinstance(value, dict) else value
        for key, value in config.items()
        if key.endswith("_token") and isinstance(value, str | dict)
    }
    try:
        return env.from_string(template).render(
            messages=messages, add_generation_prompt=True, **tokens
        )
    except Exception:  # a template this renderer cannot run: show the messages instead
        return None


# -- layout --------------------------------------------------------------------------------


def _fit(text: str, width: int = WIDTH) -> list[str]:
    return textwrap.wrap(text, width, subsequent_indent="  ", break_on_hyphens=False) or [""]


def _prompt_lines(text: str, width: int = WIDTH) -> list[str]:
    """The prompt, indented, long lines wrapped (whitespace kept), at most PROMPT_LINES."""
    out: list[str] = []
    for line in text.split("\n"):
        pieces = textwrap.wrap(
            line, width - 4, replace_whitespace=False, drop_whitespace=False
        ) or [""]
        out += [f"  | {piece}" for piece in pieces]
    if len(out) > PROMPT_LINES:
        out = [*out[: PROMPT_LINES - 1], f"  | ... ({len(out) - PROMPT_LINES + 1} more lines)"]
    return out


def _short(value: object, limit: int) -> str:
    """A value as written, on one line: a string in quotes with no escapes added (a
    reference `\\$5` shows as '\\$5', not with doubled backslashes), whitespace runs
    shown as one space; lists and dicts the same way inside."""
    text = _as_written(value)
    if len(text) <= limit:
        return text
    tail = "...'" if isinstance(value, str) else "..."
    return text[: limit - len(tail)] + tail


def _as_written(value: object) -> str:
    if isinstance(value, str):
        return "'" + " ".join(value.split()) + "'"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_as_written(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_as_written(v)}" for k, v in value.items()) + "}"
    return str(value)
