"""Prompts wrapped by the chat templates of the common model families match their
samples, whether the dump kept the special tokens or skipped them (verl decodes with
`skip_special_tokens=True`), with and without a system prompt, for questions that end
or start on a letter, a digit, punctuation or LaTeX, and that are prefixes or suffixes
of one another.

The rendered forms are written here from each family's documented chat format (no
tokenizer is downloaded): `render(family, system, question)` gives the text with every
token, `skipped(...)` the same less the family's special tokens.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curate.trainers.match import PromptMatcher
from tests.conftest import invoke_curate

LLAMA_DATE = "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def render(family: str, system: str | None, q: str) -> str:
    """The prompt with a generation prompt, as the family's chat template writes it."""
    if family == "llama3":
        sys_turn = (
            f"<|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>" if system else ""
        )
        return (
            f"<|begin_of_text|>{sys_turn}<|start_header_id|>user<|end_header_id|>\n\n{q}"
            "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        )
    if family == "llama3.1":  # the date header is always there
        return (
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            f"{LLAMA_DATE}{system or ''}<|eot_id|>"
            f"<|start_header_id|>user<|end_header_id|>\n\n{q}<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n"
        )
    if family == "deepseek-r1":  # the question runs straight into the assistant marker
        return f"<｜begin▁of▁sentence｜>{system or ''}<｜User｜>{q}<｜Assistant｜><think>\n"
    if family == "qwen2.5":
        return (
            f"<|im_start|>system\n{system or QWEN_SYSTEM}<|im_end|>\n"
            f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n"
        )
    if family == "qwen3-no-think":
        sys_turn = f"<|im_start|>system\n{system}<|im_end|>\n" if system else ""
        return (
            f"{sys_turn}<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n"
            "<think>\n\n</think>\n\n"
        )
    if family == "gemma":  # the system prompt goes into the user turn
        text = f"{system}\n\n{q}" if system else q
        return f"<bos><start_of_turn>user\n{text}<end_of_turn>\n<start_of_turn>model\n"
    if family == "mistral-v0.3":
        text = f"{system}\n\n{q}" if system else q
        return f"<s>[INST] {text}[/INST]"
    if family == "mistral-v0.1":
        text = f"{system}\n\n{q}" if system else q
        return f"<s>[INST] {text} [/INST]"
    if family == "phi3":
        sys_turn = f"<|system|>\n{system}<|end|>\n" if system else ""
        return f"{sys_turn}<|user|>\n{q}<|end|>\n<|assistant|>\n"
    if family == "phi4":
        sys_turn = f"<|im_start|>system<|im_sep|>{system}<|im_end|>" if system else ""
        return f"{sys_turn}<|im_start|>user<|im_sep|>{q}<|im_end|><|im_start|>assistant<|im_sep|>"
    raise AssertionError(family)


SPECIAL = {
    "llama3": ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
    "deepseek-r1": ("<｜begin▁of▁sentence｜>",),  # <｜User｜>, <｜Assistant｜> are not special
    "qwen": ("<|im_start|>", "<|im_end|>"),  # <think> is not special in Qwen3
    "gemma": ("<bos>", "<start_of_turn>", "<end_of_turn>"),
    "mistral": ("<s>", "[INST]", "[/INST]"),
    "phi3": ("<|system|>", "<|user|>", "<|end|>", "<|assistant|>"),
    "phi4": ("<|im_start|>", "<|im_sep|>", "<|im_end|>"),
}
FAMILIES = (
    "llama3",
    "llama3.1",
    "deepseek-r1",
    "qwen2.5",
    "qwen3-no-think",
    "gemma",
    "mistral-v0.3",
    "mistral-v0.1",
    "phi3",
    "phi4",
)


def skipped(family: str, system: str | None, q: str) -> str:
    """What `tokenizer.decode(ids, skip_special_tokens=True)` leaves of `render`."""
    text = render(family, system, q)
    key = next(k for k in SPECIAL if family.startswith(k))
    for token in SPECIAL[key]:
        text = text.replace(token, "")
    return text


# Ends on a letter, a digit, '?', '.', LaTeX, a parenthesis; starts on a digit, '$', a
# quote; multi-line; pairs where one is a prefix or a suffix of another.
QUESTIONS = {
    "a": "Compute 7 times 8",
    "b": "Compute 7 times 8 plus 1",
    "c": "What is 2 * 1?",
    "d": "What is 2 * 11?",
    "e": "12 apples are shared by 4 children. How many does each get",
    "f": "$x^2 = 49$; find the positive $x$",
    "g": "Simplify \\frac{6}{8}.",
    "h": '"Hello" has how many letters?\nAnswer with a number.',
    "i": "Evaluate f(3) for f(x) = x + 1 (give an integer)",
    "j": "Find the product of 7 and 8. Compute 7 times 8",
    "k": "user interfaces: name three",  # starts with the role word itself
    "l": "Is this a good model",  # ends with Gemma's role word
}
SYSTEMS = (None, "Please reason step by step, and put your final answer within \\boxed{}.")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("form", ["kept", "skipped"])
@pytest.mark.parametrize("system", SYSTEMS, ids=["no-system", "system"])
def test_each_family_matches_every_question(family: str, form: str, system: str | None) -> None:
    make = render if form == "kept" else skipped
    texts = {sid: make(family, system, q) for sid, q in QUESTIONS.items()}
    got = PromptMatcher(QUESTIONS).match(texts.values())
    assert got.unmatched == [] and got.ambiguous == []
    assert {text: got.ids[text] for text in texts.values()} == {t: s for s, t in texts.items()}


def test_the_same_question_twice_is_ambiguous_not_matched() -> None:
    samples = {"a": "Compute 7 times 8", "a2": "Compute 7 times 8"}
    got = PromptMatcher(samples).match([skipped("llama3.1", None, "Compute 7 times 8")])
    assert got.ids == {} and len(got.ambiguous) == 1


def test_a_question_inside_another_word_is_not_matched() -> None:
    """A role word is allowed to touch the question's start; other letters are not."""
    got = PromptMatcher({"a": "Compute 7 times 8"}).match(
        ["xCompute 7 times 8", "user Compute 7 times 80assistant"]
    )
    assert got.ids == {} and len(got.unmatched) == 2


def _dump(path: Path, step: int, entries: list[dict[str, object]]) -> None:
    """verl's `_dump_generations`: one JSON object a line, `step` added."""
    path.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({**e, "step": step}, ensure_ascii=False) for e in entries]
    (path / f"{step}.jsonl").write_text("\n".join(lines) + "\n")


def test_ingest_of_llama_and_r1_dumps_counts_every_rollout(tmp_path: Path) -> None:
    """Through the CLI: Llama-3.1 and DeepSeek-R1-distill prompts as verl dumps them
    (special tokens skipped); the summary's matched, unmatched and ambiguous rollouts
    add up to every rollout read."""
    rows = [{"id": sid, "question": q, "answer": "1"} for sid, q in QUESTIONS.items()]
    rows.append({"id": "dup", "question": QUESTIONS["a"], "answer": "1"})  # ambiguous
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    entries: list[dict[str, object]] = []
    for family in ("llama3.1", "deepseek-r1"):
        for q in QUESTIONS.values():
            for r in range(3):
                prompt = skipped(family, SYSTEMS[1], q)
                entries.append({"input": prompt, "output": "1", "gts": "1", "score": float(r % 2)})
    for _ in range(2):
        entries.append(
            {
                "input": skipped("llama3.1", None, "Not a question of the set"),
                "output": "1",
                "gts": "1",
                "score": 0.0,
            }
        )
    _dump(tmp_path / "dump", 3, entries)
    result = invoke_curate("ingest", tmp_path / "dump", "--data", data, "-o", tmp_path / "runs")
    assert result.exit_code == 0, result.stderr
    matched = 2 * 3 * (len(QUESTIONS) - 1)  # question a is ambiguous
    ambiguous = 2 * 3
    total = len(entries)
    assert matched + ambiguous + 2 == total
    assert (
        f"{matched} of {total} rollouts matched to samples of {data} "
        f"(2 matched no sample, {ambiguous} matched several)"
    ) in result.stdout
    index = json.loads((tmp_path / "runs" / "ingest.json").read_text())
    assert index["rollouts_read"] == total and index["rollouts_matched"] == matched
    assert index["unmatched_rollouts"] == 2 and index["ambiguous_rollouts"] == ambiguous
