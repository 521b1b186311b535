"""Public data set layouts through the real CLI (`python -m curate eval`, a subprocess)
with default options, against an OpenAI-compatible server that answers from a script.

The class under test: every layout family of the catalogue (multiple choice, math,
code, chat, trainer files), each in a small file written with the real field names
and types of its public set. For every sample the server draws its completion from a
list labelled beforehand (1: right, 0: wrong); the labels of the right answers are
found from the prompt the model was really sent (the letter shown beside the correct
option's text), so a prompt without its options, a wrong letter mapping or a message
list sent as one string cannot pass. Every stored rollout's score must equal the label
of the completion it stored.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest

pytest.importorskip("openai")

from curate.store.run_dir import RolloutStore
from tests.backends.fault_proxy import FakeOpenAIServer
from tests.conftest import ROOT

MMLU_SAMPLE = ROOT / "sample_data" / "mmlu_layout.jsonl"
HUMANEVAL = ROOT / "sample_data" / "humaneval_layout.jsonl"
RUNS = 6

Script = Callable[[str], Sequence[tuple[str, float]]]  # prompt -> (completion, label)s


@dataclass
class Case:
    """One layout's file and how the scripted model answers its prompts."""

    layout: str
    data: Path
    script: Script
    ids: set[str] | None = None  # the data set's own ids, when it has them


def _pick(options: Sequence[tuple[str, float]], seed: int | None, index: int) -> str:
    digest = hashlib.sha256(f"{seed}:{index}".encode()).digest()
    return options[digest[0] % len(options)][0]


def _letter_of(prompt: str, text: str) -> str:
    """The letter the prompt shows beside the option `text` ("C) 7")."""
    found = re.search(rf"^([A-J])\) {re.escape(text)}$", prompt, re.MULTILINE)
    assert found is not None, f"option {text!r} is not in the prompt:\n{prompt}"
    return found[1]


def _choice_script(correct_text: Mapping[str, str]) -> Script:
    """Multiple choice: the right letter is read off the prompt, next to the correct
    option's text (keyed by a phrase of the question)."""

    def script(prompt: str) -> list[tuple[str, float]]:
        key = next(k for k in correct_text if k in prompt)
        right = _letter_of(prompt, correct_text[key])
        shown = re.findall(r"^([A-J])\) ", prompt, re.MULTILINE)
        wrong = next(letter for letter in shown if letter != right)
        return [
            (f"Thinking.\nAnswer: {right}", 1.0),
            (f"The answer is ({right}).", 1.0),
            (f"Answer: {wrong}", 0.0),
            (f"I am not sure; maybe {right.lower()}ish.", 0.0),
        ]

    return script


def _table_script(table: Mapping[str, Sequence[tuple[str, float]]]) -> Script:
    def script(prompt: str) -> Sequence[tuple[str, float]]:
        return next(v for k, v in table.items() if k in prompt)

    return script


def _jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# -- the files, in the public sets' own field names and types -----------------------------


def mmlu_case(tmp: Path) -> Case:
    # The pinned file: cais/mmlu's fields (question, subject, choices, answer: int).
    rows = [json.loads(line) for line in MMLU_SAMPLE.read_text().splitlines()]
    correct = {r["question"][:30]: r["choices"][r["answer"]] for r in rows}
    return Case("mmlu", MMLU_SAMPLE, _choice_script(correct))


def arc_case(tmp: Path) -> Case:
    rows = [
        {
            "id": "Mercury_7175875",
            "question": "Which gas do plants take in for photosynthesis?",
            "choices": {
                "text": ["oxygen", "carbon dioxide", "nitrogen", "helium"],
                "label": ["A", "B", "C", "D"],
            },
            "answerKey": "B",
        },
        {
            # Some ARC rows label their options 1-4.
            "id": "NYSEDREGENTS_2015_4_8",
            "question": "Which tool measures the mass of a rock?",
            "choices": {
                "text": ["ruler", "thermometer", "balance", "graduated cylinder"],
                "label": ["1", "2", "3", "4"],
            },
            "answerKey": "3",
        },
    ]
    correct = {"photosynthesis": "carbon dioxide", "mass of a rock": "balance"}
    return Case(
        "arc",
        _jsonl(tmp / "arc.jsonl", rows),
        _choice_script(correct),
        ids={"Mercury_7175875", "NYSEDREGENTS_2015_4_8"},
    )


def openbookqa_case(tmp: Path) -> Case:
    rows = [
        {
            "id": "7-980",
            "question_stem": "The sun is responsible for",
            "choices": {
                "text": [
                    "puppies learning new tricks",
                    "plants sprouting, blooming and wilting",
                    "children growing up",
                    "flowers wilting in a vase",
                ],
                "label": ["A", "B", "C", "D"],
            },
            "answerKey": "B",
        }
    ]
    return Case(
        "arc",
        _jsonl(tmp / "openbookqa.jsonl", rows),
        _choice_script({"The sun": "plants sprouting, blooming and wilting"}),
        ids={"7-980"},
    )


def gpqa_case(tmp: Path) -> Case:
    rows = []
    correct = {}
    for i in range(4):
        question = f"Which isotope is described in problem number {i}?"
        rows.append(
            {
                "Record ID": f"rec{i}",
                "Question": question,
                "Correct Answer": f"isotope {i}-right",
                "Incorrect Answer 1": f"isotope {i}-wrong-a",
                "Incorrect Answer 2": f"isotope {i}-wrong-b",
                "Incorrect Answer 3": f"isotope {i}-wrong-c",
                "Explanation": "Because.",
            }
        )
        correct[f"problem number {i}?"] = f"isotope {i}-right"
    return Case(
        "gpqa",
        _jsonl(tmp / "gpqa.jsonl", rows),
        _choice_script(correct),
        ids={f"rec{i}" for i in range(4)},
    )


def mmlu_pro_case(tmp: Path) -> Case:
    options = [f"option number {k}" for k in range(10)]
    rows = [
        {
            "question_id": 70 + i,
            "question": f"Pick the right statement about law case {i}.",
            "options": options,
            "answer": "ABCDEFGHIJ"[idx],
            "answer_index": idx,
            "cot_content": "",
            "category": "law",
            "src": "ori_mmlu-professional_law",
        }
        for i, idx in enumerate((9, 0, 4))
    ]
    correct = {f"law case {i}.": options[idx] for i, idx in enumerate((9, 0, 4))}
    return Case(
        "mmlu-pro",
        _jsonl(tmp / "mmlu_pro.jsonl", rows),
        _choice_script(correct),
        {"70", "71", "72"},
    )


def aqua_case(tmp: Path) -> Case:
    rows = [
        {
            "question": "A train covers 60 km in 1.5 hours. What is its speed in km/h?",
            "options": ["A)30", "B)40", "C)45", "D)50", "E)90"],
            "rationale": "60 / 1.5 = 40",
            "correct": "B",
        },
        {
            "question": "What is 15% of 200?",
            "options": ["A)15", "B)20", "C)25", "D)30", "E)35"],
            "rationale": "0.15 * 200 = 30",
            "correct": "D",
        },
    ]
    return Case(
        "lettered-options",
        _jsonl(tmp / "aqua.jsonl", rows),
        _choice_script({"60 km": "40", "15% of 200": "30"}),
    )


def math500_case(tmp: Path) -> Case:
    rows = [
        {
            "problem": "A pen costs five dollars. How much does it cost?",
            "solution": "It costs $\\boxed{\\$5}$.",
            "answer": "\\$5",
            "subject": "Prealgebra",
            "level": 1,
            "unique_id": "test/prealgebra/1.json",
        },
        {
            "problem": "What percent of 80 is 40?",
            "solution": "Half: $\\boxed{50\\%}$.",
            "answer": "50\\%",
            "subject": "Prealgebra",
            "level": 2,
            "unique_id": "test/prealgebra/2.json",
        },
        {
            "problem": "A rope of 30 cm is cut in three equal parts. How long is each?",
            "solution": "$\\boxed{10\\text{ cm}}$",
            "answer": "10\\text{ cm}",
            "subject": "Prealgebra",
            "level": 1,
            "unique_id": "test/prealgebra/3.json",
        },
        {
            "problem": "Simplify one half plus one third.",
            "solution": "$\\boxed{\\frac{5}{6}}$",
            "answer": "\\frac{5}{6}",
            "subject": "Algebra",
            "level": 1,
            "unique_id": "test/algebra/4.json",
        },
    ]
    table = {
        "pen costs": [("\\boxed{5}", 1.0), ("So \\boxed{\\$5}.", 1.0), ("\\boxed{6}", 0.0)],
        "percent of 80": [("\\boxed{50\\%}", 1.0), ("\\boxed{50}", 1.0), ("\\boxed{40}", 0.0)],
        "rope of 30": [("\\boxed{10}", 1.0), ("\\boxed{10\\text{ cm}}", 1.0), ("\\boxed{9}", 0.0)],
        "one half plus": [("\\boxed{\\frac{5}{6}}", 1.0), ("\\boxed{\\frac{2}{5}}", 0.0)],
    }
    return Case(
        "math",
        _jsonl(tmp / "math500.jsonl", rows),
        _table_script(table),
        ids={r["unique_id"] for r in rows},
    )


def aime_case(tmp: Path) -> Case:
    rows = [
        {
            "ID": "2024-I-1",
            "Problem": "Find the remainder of 2024 divided by 1000.",
            "Solution": "It is 24.",
            "Answer": 24,
        },
        {"ID": "2024-I-2", "Problem": "Find 17 times 12.", "Solution": "204.", "Answer": 204},
    ]
    table = {
        "remainder of 2024": [("\\boxed{24}", 1.0), ("\\boxed{024}", 1.0), ("\\boxed{25}", 0.0)],
        "17 times 12": [("The answer is 204.", 1.0), ("\\boxed{214}", 0.0)],
    }
    return Case(
        "aime", _jsonl(tmp / "aime.jsonl", rows), _table_script(table), {"2024-I-1", "2024-I-2"}
    )


def gsm8k_case(tmp: Path) -> Case:
    rows = [
        {
            "question": "Tom has 3 apples and buys 4 more. How many apples?",
            "answer": "3 + 4 = <<3+4=7>>7\n#### 7",
        },
        {
            "question": "A box holds 1,200 pins; 200 are used. How many are left?",
            "answer": "1,200 - 200 = 1,000\n#### 1,000",
        },
    ]
    table = {
        "Tom has": [("#### 7", 1.0), ("The answer is 7.", 1.0), ("#### 8", 0.0)],
        "1,200 pins": [("\\boxed{1000}", 1.0), ("1,000 pins", 1.0), ("#### 1001", 0.0)],
    }
    return Case("gsm8k", _jsonl(tmp / "gsm8k.jsonl", rows), _table_script(table))


def humaneval_case(tmp: Path) -> Case:
    rows = [json.loads(line) for line in HUMANEVAL.read_text().splitlines()]
    table = {
        row["prompt"][-60:]: [
            (f"```python\n{row['prompt']}{row['canonical_solution']}\n```", 1.0),
            (f"```python\n{row['prompt']}    return None\n```", 0.0),
        ]
        for row in rows
    }
    return Case("humaneval", HUMANEVAL, _table_script(table), {r["task_id"] for r in rows})


def mbpp_case(tmp: Path) -> Case:
    rows = [
        {
            "task_id": 11,
            "text": "Write a function to add two numbers.",
            "code": "def add(a, b):\n    return a + b",
            "test_list": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"],
            "test_setup_code": "",
            "challenge_test_list": [],
        },
        {
            "task_id": 12,
            "text": "Write a function to reverse a string.",
            "code": "def rev(s):\n    return s[::-1]",
            "test_list": ["assert rev('ab') == 'ba'", "assert rev('') == ''"],
            "test_setup_code": "",
            "challenge_test_list": [],
        },
    ]
    table = {
        "add two numbers": [
            ("```python\ndef add(a, b):\n    return a + b\n```", 1.0),
            ("```python\ndef add(a, b):\n    return a - b\n```", 0.0),
        ],
        "reverse a string": [
            ("```python\ndef rev(s):\n    return s[::-1]\n```", 1.0),
            ("```python\ndef rev(s):\n    return s\n```", 0.0),
        ],
    }
    return Case("mbpp", _jsonl(tmp / "mbpp.jsonl", rows), _table_script(table), {"11", "12"})


def apps_case(tmp: Path) -> Case:
    rows = [
        {
            "problem_id": 4000,
            "question": "Read two integers a and b and print their sum.",
            "solutions": json.dumps(["a, b = map(int, input().split())\nprint(a + b)"]),
            "input_output": json.dumps({"inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]}),
            "difficulty": "introductory",
            "url": "https://example.invalid/problem/4000",
            "starter_code": "",
        }
    ]
    table = {
        "print their sum": [
            ("```python\na, b = map(int, input().split())\nprint(a + b)\n```", 1.0),
            ("```python\na, b = map(int, input().split())\nprint(a * b)\n```", 0.0),
        ]
    }
    return Case("apps", _jsonl(tmp / "apps.jsonl", rows), _table_script(table), {"4000"})


def codecontests_case(tmp: Path) -> Case:
    rows = [
        {
            "name": "1_A. Double it",
            "description": "Read an integer n and print 2n.",
            "public_tests": {"input": ["3\n"], "output": ["6\n"]},
            "private_tests": {"input": ["10\n"], "output": ["20\n"]},
            "generated_tests": {"input": [], "output": []},
            "source": 2,
            "difficulty": 7,
        }
    ]
    table = {
        "print 2n": [
            ("```python\nprint(2 * int(input()))\n```", 1.0),
            ("```python\nprint(int(input()) + 3)\n```", 0.0),  # passes public, fails private
        ]
    }
    return Case(
        "codecontests",
        _jsonl(tmp / "codecontests.jsonl", rows),
        _table_script(table),
        {"1_A. Double it"},
    )


def livecodebench_case(tmp: Path) -> Case:
    cases = [{"input": "4\n", "output": "16\n", "testtype": "stdin"}]
    rows = [
        {
            "question_title": "Square",
            "question_content": "Read n and print n squared.",
            "platform": "atcoder",
            "question_id": "abc300_a",
            "contest_id": "abc300",
            "contest_date": "2023-04-29T00:00:00",
            "starter_code": "",
            "difficulty": "easy",
            "public_test_cases": json.dumps(cases),
            "private_test_cases": "",
            "metadata": "{}",
        }
    ]
    table = {
        "n squared": [
            ("```python\nn = int(input())\nprint(n * n)\n```", 1.0),
            ("```python\nn = int(input())\nprint(n + n + 1)\n```", 0.0),
        ]
    }
    return Case(
        "livecodebench", _jsonl(tmp / "lcb.jsonl", rows), _table_script(table), {"abc300_a"}
    )


def livecodebench_functional_case(tmp: Path) -> Case:
    # LeetCode problems: one JSON argument a line, the function named in metadata.
    cases = [
        {"input": "[2,7,11,15]\n9", "output": "[0, 1]", "testtype": "functional"},
        {"input": "[3,2,4]\n6", "output": "[1, 2]", "testtype": "functional"},
    ]
    rows = [
        {
            "question_title": "two-sum",
            "question_content": "Return the indices of the two numbers adding up to target.",
            "platform": "leetcode",
            "question_id": "1",
            "contest_id": "weekly-contest-1",
            "contest_date": "2023-05-01T00:00:00",
            "starter_code": "class Solution:\n    def twoSum(self, nums: list, target: int):\n",
            "difficulty": "easy",
            "public_test_cases": json.dumps(cases),
            "private_test_cases": "",
            "metadata": json.dumps({"func_name": "twoSum"}),
        }
    ]
    right = (
        "class Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n"
        "        for i, x in enumerate(nums):\n            if target - x in seen:\n"
        "                return [seen[target - x], i]\n            seen[x] = i\n"
    )
    wrong = "class Solution:\n    def twoSum(self, nums, target):\n        return [0, 1]\n"
    table = {
        "adding up to target": [(f"```python\n{right}```", 1.0), (f"```python\n{wrong}```", 0.0)]
    }
    return Case("livecodebench", _jsonl(tmp / "lcb_fn.jsonl", rows), _table_script(table), {"1"})


def chat_case(tmp: Path) -> Case:
    rows = [
        {
            "id": f"c{i}",
            "messages": [
                {"role": "system", "content": "You are a careful calculator."},
                {"role": "user", "content": f"Compute {i} times 3."},
            ],
            "ground_truth": str(3 * i),
        }
        for i in range(1, 4)
    ]
    table = {
        f"Compute {i} times 3.": [(f"\\boxed{{{3 * i}}}", 1.0), (f"{3 * i + 1}", 0.0)]
        for i in range(1, 4)
    }
    return Case("chat", _jsonl(tmp / "chat.jsonl", rows), _table_script(table), {"c1", "c2", "c3"})


def openai_rft_case(tmp: Path) -> Case:
    rows = [
        {
            "messages": [
                {"role": "developer", "content": "Answer with one word."},
                {"role": "user", "content": f"Which colour is the sky on a clear day, {k}?"},
            ],
            "reference_answer": "blue",
            "sample_id": f"s{k}",
        }
        for k in range(2)
    ]
    table = {"clear day": [("blue", 1.0), ("Blue", 1.0), ("green", 0.0)]}
    return Case("openai-rft", _jsonl(tmp / "rft.jsonl", rows), _table_script(table), {"s0", "s1"})


def verl_case(tmp: Path) -> Case:
    message = pl.List(pl.Struct({"role": pl.String, "content": pl.String}))
    frame = pl.DataFrame(
        {
            "data_source": ["openai/gsm8k"] * 2,
            "prompt": [
                [{"role": "user", "content": "How many legs do 2 cats have?"}],
                [{"role": "user", "content": "How many wheels do 3 bikes have?"}],
            ],
            "ability": ["math"] * 2,
            "reward_model": [
                {"style": "rule", "ground_truth": "8"},
                {"style": "rule", "ground_truth": "6"},
            ],
            "extra_info": [{"split": "train", "index": 0}, {"split": "train", "index": 1}],
        },
        schema_overrides={"prompt": message},
    )
    path = tmp / "verl.parquet"
    frame.write_parquet(path)
    table = {
        "2 cats": [("#### 8", 1.0), ("#### 4", 0.0)],
        "3 bikes": [("The answer is 6.", 1.0), ("#### 3", 0.0)],
    }
    return Case("verl", path, _table_script(table))


def openrlhf_case(tmp: Path) -> Case:
    rows = [
        {
            "input": [{"role": "user", "content": f"Name the capital of country {c}."}],
            "label": city,
            "datasource": "capitals",
        }
        for c, city in (("FR", "Paris"), ("IT", "Rome"))
    ]
    table = {
        "country FR": [("Paris", 1.0), ("Lyon", 0.0)],
        "country IT": [("Rome", 1.0), ("Milan", 0.0)],
    }
    return Case("openrlhf", _jsonl(tmp / "openrlhf.jsonl", rows), _table_script(table))


def trl_case(tmp: Path) -> Case:
    rows = [
        {"prompt": [{"role": "user", "content": "What is 6 times 7?"}], "solution": "42"},
        {"prompt": [{"role": "user", "content": "What is 9 minus 4?"}], "solution": "5"},
    ]
    table = {
        "6 times 7": [("\\boxed{42}", 1.0), ("\\boxed{48}", 0.0)],
        "9 minus 4": [("5", 1.0), ("13", 0.0)],
    }
    return Case("trl", _jsonl(tmp / "trl.jsonl", rows), _table_script(table))


CASES: dict[str, Callable[[Path], Case]] = {
    "mmlu": mmlu_case,
    "arc": arc_case,
    "openbookqa": openbookqa_case,
    "gpqa": gpqa_case,
    "mmlu-pro": mmlu_pro_case,
    "aqua": aqua_case,
    "math-500": math500_case,
    "aime": aime_case,
    "gsm8k": gsm8k_case,
    "humaneval": humaneval_case,
    "mbpp": mbpp_case,
    "apps": apps_case,
    "codecontests": codecontests_case,
    "livecodebench": livecodebench_case,
    "livecodebench-functional": livecodebench_functional_case,
    "chat": chat_case,
    "openai-rft": openai_rft_case,
    "verl": verl_case,
    "openrlhf": openrlhf_case,
    "trl": trl_case,
}


# -- the harness ---------------------------------------------------------------------------


class ScriptedServer:
    """A FakeOpenAIServer whose completion for a prompt is drawn from the case's
    labelled list; every completion it ever sent is remembered with its label."""

    def __init__(self) -> None:
        self.script: Script | None = None
        self.labels: dict[str, float] = {}
        self.server = FakeOpenAIServer(answer=self.answer)

    def answer(self, prompt: str, seed: int | None, index: int) -> str:
        assert self.script is not None
        options = self.script(prompt)
        text = _pick(options, seed, index)
        self.labels[text] = dict(options)[text]
        return text


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedServer]:
    holder = ScriptedServer()
    with holder.server:
        yield holder


def run_eval(
    run_curate: Callable[..., subprocess.CompletedProcess[str]],
    data: Path,
    out: Path,
    base_url: str,
    *extra: object,
) -> subprocess.CompletedProcess[str]:
    return run_curate(
        "eval",
        data,
        "--backend",
        "openai",
        "--model",
        "fake-model",
        "--base-url",
        base_url,
        "--rollouts",
        RUNS,
        "--max-tokens",
        400,
        "--out",
        out,
        *extra,
    )


@pytest.mark.parametrize("name", list(CASES))
def test_every_layout_family_is_graded_right_with_default_options(
    name: str,
    tmp_path: Path,
    scripted: ScriptedServer,
    run_curate: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    case = CASES[name](tmp_path)
    scripted.script, scripted.labels = case.script, {}
    scripted.server.bodies.clear()
    out = tmp_path / "run"
    res = run_eval(run_curate, case.data, out, scripted.server.base_url)
    assert res.returncode == 0, res.stderr
    assert res.stderr.startswith(f"layout: {case.layout} ("), res.stderr
    frame = RolloutStore(out).rollouts(["sample_id", "completion", "score", "error"])
    rows = pl.read_ndjson(case.data) if case.data.suffix == ".jsonl" else pl.read_parquet(case.data)
    assert frame.height == rows.height * RUNS
    assert frame["error"].null_count() == frame.height, frame["error"].drop_nulls().to_list()
    for completion, score in zip(frame["completion"], frame["score"], strict=True):
        assert score == scripted.labels[completion], (completion, score)
    assert {0.0, 1.0} <= set(frame["score"].to_list())  # both labels were drawn
    if case.ids is not None:
        assert set(frame["sample_id"].to_list()) == case.ids
    # A message list is sent as chat turns, never as one string.
    for body in scripted.server.bodies:
        assert all("[{'role'" not in str(m["content"]) for m in body["messages"])
    if name == "chat":
        assert [m["role"] for m in scripted.server.bodies[0]["messages"]] == ["system", "user"]


def test_the_mmlu_file_without_a_layout_is_flagged_and_stopped(
    tmp_path: Path,
    scripted: ScriptedServer,
    run_curate: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """The catalogue's blind spot: MMLU under other field names. The start lines say
    the references look like indices into the options; the first chunk's answers are
    letters against numbers, so the run stops with one line naming the likely fix."""
    rows = [json.loads(line) for line in MMLU_SAMPLE.read_text().splitlines()]
    renamed = [{"query": r["question"], "options": r["choices"], "gold": r["answer"]} for r in rows]
    data = _jsonl(tmp_path / "renamed.jsonl", renamed)

    def letters(prompt: str) -> list[tuple[str, float]]:
        return [("Answer: B", 0.0), ("Answer: C", 0.0)]

    scripted.script, scripted.labels = letters, {}
    out = tmp_path / "run"
    res = run_eval(
        run_curate,
        data,
        out,
        scripted.server.base_url,
        "--prompt-field",
        "query",
        "--answer-field",
        "gold",
    )
    assert res.returncode == 1, res.stderr
    assert "layout: none recognised" in res.stderr
    assert "look like indices into 'options'" in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert "no extracted answer shares a form with the references" in last
    assert "letters" in last and "indices" in last and "--layout mmlu" in last


_MARKED = re.compile(r"Answer:\s*\(?([A-J])\)?")
_LONE = re.compile(r"^\s*\(?([A-J])\)?[.)]?\s*$")


def _label(completion: str, right: str) -> float:
    """The label of a real model's completion, decided here without the grader: the
    letter it marks ("Answer: C") or that it is ("C", "(C)"), against the right one."""
    marked = _MARKED.findall(completion)
    lone = _LONE.match(completion)
    chosen = marked[-1] if marked else (lone[1] if lone else None)
    return 1.0 if chosen == right else 0.0


@pytest.mark.slow
def test_the_mmlu_file_on_the_local_engine_with_default_options(tmp_path: Path) -> None:
    model = ROOT / "sample_data" / "tiny-math"
    out = tmp_path / "run"
    args = ["eval", MMLU_SAMPLE, "--model", model, "-n", 4, "--max-tokens", 16, "--out", out]
    res = subprocess.run(
        [sys.executable, "-m", "curate", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=900,  # the engine's start on a shared CPU
        env={**os.environ, "CURATE_DEBUG": ""},
    )
    assert res.returncode == 0, res.stderr[-2000:]
    head = "layout: mmlu (multiple choice; detected: question, choices, answer)"
    assert res.stderr.startswith(head)
    assert "grader: choice (the mmlu layout's grader)" in res.stderr
    assert "<|user|>What is 3 + 4?" in res.stderr and "  | C) 7" in res.stderr
    assert "reference as graded: 'C' (from 2)" in res.stderr
    rows = [json.loads(line) for line in MMLU_SAMPLE.read_text().splitlines()]
    frame = RolloutStore(out).rollouts(["sample_id", "completion", "score", "error"])
    samples = pl.read_parquet(out / "samples.parquet")
    right = {
        sid: "ABCD"[answer]
        for sid, answer in zip(samples["sample_id"], samples["answer"], strict=True)
    }
    assert frame.height == len(rows) * 4 and frame["error"].null_count() == frame.height
    for sid, completion, score in frame.select("sample_id", "completion", "score").iter_rows():
        assert score == _label(completion, right[sid]), (completion, score)
