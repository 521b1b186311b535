"""The layout catalogue: each public layout recognised from its field names AND types,
its prompt and reference as the grader needs them, its id field, and `--layout`.

The class: one small frame per public set, in that set's own field names and types;
look-alikes with the right names but the wrong types must not be taken for it."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import polars as pl
import pytest

from curate.data.layouts import LAYOUTS, detect, get_layout, pick
from curate.data.layouts.base import LETTERS, render_choices, shuffled_options
from curate.data.samples import answer_values, build_prompts, load_samples, resolve_fields
from curate.errors import InputError, UsageError

MESSAGE = pl.List(pl.Struct({"role": pl.String, "content": pl.String}))
USER = [{"role": "user", "content": "What is 2 + 2?"}]

# name -> (columns, schema overrides): one row in the public set's fields and types.
PUBLIC: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "mmlu": (
        {
            "question": ["2+2?"],
            "subject": ["math"],
            "choices": [["3", "4", "5", "6"]],
            "answer": [1],
        },
        {},
    ),
    "arc": (
        {
            "id": ["Mercury_1"],
            "question": ["Q?"],
            "choices": [{"text": ["a", "b", "c", "d"], "label": ["A", "B", "C", "D"]}],
            "answerKey": ["C"],
        },
        {},
    ),
    "gpqa": (
        {
            "Record ID": ["recA"],
            "Question": ["Q?"],
            "Correct Answer": ["right"],
            "Incorrect Answer 1": ["w1"],
            "Incorrect Answer 2": ["w2"],
            "Incorrect Answer 3": ["w3"],
        },
        {},
    ),
    "mmlu-pro": (
        {
            "question_id": [7],
            "question": ["Q?"],
            "options": [[f"o{i}" for i in range(10)]],
            "answer": ["J"],
            "answer_index": [9],
            "category": ["law"],
        },
        {},
    ),
    "lettered-options": (
        {"question": ["Q?"], "options": [["A)1", "B)2", "C)3", "D)4", "E)5"]], "correct": ["E"]},
        {},
    ),
    "gsm8k": ({"question": ["Q?"], "answer": ["2 + 2 = 4\n#### 4"]}, {}),
    "aime": ({"ID": ["2024-I-1"], "Problem": ["P"], "Solution": ["S"], "Answer": [204]}, {}),
    "math": (
        {
            "problem": ["P"],
            "solution": ["$\\boxed{\\$5}$"],
            "answer": ["\\$5"],
            "subject": ["Algebra"],
            "level": [1],
            "unique_id": ["test/algebra/1.json"],
        },
        {},
    ),
    "humaneval": (
        {
            "task_id": ["HumanEval/0"],
            "prompt": ["def f():\n"],
            "canonical_solution": ["    return 1\n"],
            "test": ["def check(c):\n    assert c() == 1\n"],
            "entry_point": ["f"],
        },
        {},
    ),
    "mbpp": (
        {
            "task_id": [2],
            "text": ["Add."],
            "code": ["def add(a,b): return a+b"],
            "test_list": [["assert add(1,2)==3"]],
            "test_setup_code": [""],
        },
        {},
    ),
    "apps": (
        {
            "problem_id": [1],
            "question": ["Sum."],
            "solutions": ["[]"],
            "input_output": ['{"inputs": ["1 2\\n"], "outputs": ["3\\n"]}'],
            "starter_code": [""],
        },
        {},
    ),
    "codecontests": (
        {
            "name": ["1_A"],
            "description": ["D"],
            "public_tests": [{"input": ["1\n"], "output": ["2\n"]}],
            "private_tests": [{"input": [], "output": []}],
        },
        {"private_tests": pl.Struct({"input": pl.List(pl.String), "output": pl.List(pl.String)})},
    ),
    "livecodebench": (
        {
            "question_id": ["abc1_a"],
            "question_content": ["C"],
            "starter_code": [""],
            "public_test_cases": ['[{"input": "1\\n", "output": "1\\n", "testtype": "stdin"}]'],
        },
        {},
    ),
    "chat": ({"messages": [USER], "ground_truth": ["4"]}, {"messages": MESSAGE}),
    "verl": (
        {
            "data_source": ["gsm8k"],
            "prompt": [USER],
            "ability": ["math"],
            "reward_model": [{"style": "rule", "ground_truth": "4"}],
            "extra_info": [{"index": 0, "sample_id": "s0"}],
        },
        {"prompt": MESSAGE},
    ),
    "trl": ({"prompt": [USER], "solution": ["4"]}, {"prompt": MESSAGE}),
    "openrlhf": ({"input": [USER], "label": ["4"], "datasource": ["x"]}, {"input": MESSAGE}),
    "openai-rft": ({"messages": [USER], "reference_answer": ["4"]}, {"messages": MESSAGE}),
}


def frame_of(name: str) -> pl.DataFrame:
    columns, overrides = PUBLIC[name]
    return pl.DataFrame(columns, schema_overrides=overrides)


def test_every_registered_layout_has_a_public_example_here() -> None:
    assert set(LAYOUTS.names()) == set(PUBLIC)


@pytest.mark.parametrize("name", list(PUBLIC))
def test_each_public_layout_is_recognised_as_itself(name: str) -> None:
    layout = detect(frame_of(name))
    assert layout is not None and layout.name == name


@pytest.mark.parametrize(
    ("name", "column", "value", "dtype"),
    [
        # The names are MMLU's, the types are not: choices as one string, answer as text.
        ("mmlu", "choices", ["3, 4, 5, 6"], pl.String),
        ("mmlu", "answer", ["four"], pl.String),
        # ARC's choices as a plain list has no labels to map answerKey with.
        ("arc", "choices", [["a", "b", "c", "d"]], pl.List(pl.String)),
        # A GSM8K answer without its '#### N' line.
        ("gsm8k", "answer", ["4"], pl.String),
        # HumanEval's test as a list is MBPP's, not HumanEval's layout.
        ("humaneval", "test", [["assert f() == 1"]], pl.List(pl.String)),
    ],
)
def test_the_right_names_with_the_wrong_types_are_not_that_layout(
    name: str, column: str, value: list[Any], dtype: pl.DataType
) -> None:
    frame = frame_of(name).with_columns(pl.Series(column, value, dtype=dtype))
    layout = detect(frame)
    assert layout is None or layout.name != name


def _read(frame: pl.DataFrame) -> tuple[list[Any], list[Any], str | None]:
    fields = resolve_fields(frame, layout="auto")
    prompts = build_prompts(
        frame, fields, "completion" if fields.messages_field is None else "chat"
    )
    return prompts, answer_values(frame, fields), fields.id_field


def test_mmlu_shows_its_choices_and_maps_the_index_to_a_letter() -> None:
    prompts, refs, _ = _read(frame_of("mmlu"))
    assert prompts[0].startswith("2+2?\n\nA) 3\nB) 4\nC) 5\nD) 6\n\n")
    assert "(A-D)" in prompts[0] and refs == ["B"]


def test_arc_maps_a_numeric_answer_key_through_its_labels() -> None:
    frame = frame_of("arc").with_columns(
        pl.Series("choices", [{"text": ["a", "b", "c"], "label": ["1", "2", "3"]}]),
        pl.Series("answerKey", ["3"]),
    )
    prompts, refs, ids = _read(frame)
    assert "C) c" in prompts[0] and refs == ["C"] and ids == "id"


def test_mmlu_pro_takes_ten_options_up_to_j() -> None:
    prompts, refs, ids = _read(frame_of("mmlu-pro"))
    assert "J) o9" in prompts[0] and "(A-J)" in prompts[0] and refs == ["J"]
    assert ids == "question_id"


def test_lettered_options_are_relettered_in_the_standard_template() -> None:
    prompts, refs, _ = _read(frame_of("lettered-options"))
    assert "\nA) 1\n" in prompts[0] and "A)1" not in prompts[0] and refs == ["E"]


def test_gpqa_shuffles_once_per_sample_and_records_the_correct_letter() -> None:
    prompts, refs, ids = _read(frame_of("gpqa"))
    again, _, _ = _read(frame_of("gpqa"))
    assert prompts == again  # the same sample always shows the same order
    assert f"{refs[0]}) right" in prompts[0] and ids == "Record ID"


def test_the_shuffled_correct_letter_is_spread_evenly_over_a_set() -> None:
    # 4,000 questions: each of the four letters near 1,000 (a binomial's sd is ~27).
    letters = Counter(
        shuffled_options("right", ["w1", "w2", "w3"], f"question {i}")[1] for i in range(4000)
    )
    assert set(letters) == set("ABCD")
    assert all(abs(count - 1000) < 6 * 27 for count in letters.values()), letters


def test_render_choices_letters_up_to_ten_options() -> None:
    text = render_choices("Q", [f"o{i}" for i in range(10)])
    assert [line[0] for line in text.splitlines()[2:12]] == list(LETTERS)


def test_ids_come_from_the_data_sets_own_field() -> None:
    assert _read(frame_of("math"))[2] == "unique_id"
    assert _read(frame_of("humaneval"))[2] == "task_id"
    assert _read(frame_of("livecodebench"))[2] == "question_id"
    assert _read(frame_of("verl"))[2] == "extra_info.sample_id"


def test_a_message_list_is_sent_as_chat_turns() -> None:
    for name in ("chat", "verl", "trl", "openrlhf", "openai-rft"):
        prompts, _, _ = _read(frame_of(name))
        assert prompts == [USER], name


def test_codecontests_grades_public_and_private_tests_together() -> None:
    frame = frame_of("codecontests").with_columns(
        pl.Series("private_tests", [{"input": ["5\n"], "output": ["10\n"]}])
    )
    _, refs, ids = _read(frame)
    assert refs == [{"input": ["1\n", "5\n"], "output": ["2\n", "10\n"]}] and ids == "name"


def test_layout_none_uses_the_generic_names_and_a_forced_layout_must_fit() -> None:
    frame = frame_of("gsm8k")
    assert pick(frame, "none") is None
    assert pick(frame, "GSM8K") is get_layout("gsm8k")
    with pytest.raises(InputError, match=r"--layout mmlu: the data does not have its fields"):
        pick(frame, "mmlu", source="x.jsonl")
    with pytest.raises(UsageError, match=r"unknown layout 'mmlux'; did you mean 'mmlu'"):
        pick(frame, "mmlux")


def test_a_field_the_user_names_is_used_as_it_is(tmp_path: Any) -> None:
    # --template replaces the layout's prompt; the layout still reads the reference.
    path = tmp_path / "arc.parquet"
    frame_of("arc").write_parquet(path)
    frame, fields = load_samples(path, template="{question} {choices.text[2]}", layout="auto")
    assert build_prompts(frame, fields, "completion") == ["Q? c"]
    assert answer_values(frame, fields) == ["C"]


@pytest.mark.parametrize("template", ["{choices.nope}", "{choices.text[9]}", "{choices.text.x}"])
def test_a_template_that_cannot_be_filled_is_one_input_error(template: str) -> None:
    frame = frame_of("arc")
    fields = resolve_fields(frame, template=template, layout="auto")
    with pytest.raises(InputError, match="--template could not be filled"):
        build_prompts(frame, fields, "completion", source="arc.jsonl")


def test_a_message_list_found_by_name_without_a_layout_is_still_chat_turns() -> None:
    # OpenRLHF's `input` with a reference no layout knows by name.
    frame = pl.DataFrame({"input": [USER], "answer": ["4"]}, schema_overrides={"input": MESSAGE})
    assert detect(frame) is None
    fields = resolve_fields(frame, layout="auto")
    assert fields.messages_field == "input" and fields.prompt_field is None
    assert build_prompts(frame, fields, "chat") == [USER]


def test_livecodebench_functional_cases_become_calls_of_func_name() -> None:
    cases = [{"input": "[2,7,11,15]\n9", "output": "[0, 1]", "testtype": "functional"}]
    frame = frame_of("livecodebench").with_columns(
        pl.Series("public_test_cases", [json.dumps(cases)]),
        pl.Series("metadata", [json.dumps({"func_name": "twoSum"})]),
    )
    _, refs, _ = _read(frame)
    assert refs == [{"fn_name": "twoSum", "inputs": [[[2, 7, 11, 15], 9]], "outputs": [[0, 1]]}]
