#!/usr/bin/env python
"""Write the bundled arithmetic problems in the layouts real public data sets use.

    python scripts/make_layout_data.py      # sample_data/gsm8k_layout.jsonl, math_layout.jsonl

Real data sets rarely store a bare answer. GSM8K stores a worked rationale that ends in
`#### 68` (thousands written `#### 1,234`); MATH and NuminaMath store a full solution with the
answer in `\\boxed{...}`. These files hold problems the bundled tiny model can partly solve
(the "medium" band of scripts/make_arithmetic_data.py plus a few three-digit sums above 1,000)
in those two layouts, so that `curate eval` with default options can be checked to read the
reference the way a person would: the per-sample pass rates must equal those of the same
problems with hand-extracted answers (tests/evaluation/test_reference_layouts.py).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from make_arithmetic_data import make_problem

ROOT = Path(__file__).resolve().parent.parent

# (operator, digits of a, digits of b, count): mostly mixed outcomes for the tiny model.
MIX: list[tuple[str, int, int, int]] = [
    ("+", 2, 1, 10),
    ("-", 2, 1, 8),
    ("+", 2, 2, 10),
    ("-", 2, 2, 6),
    ("+", 3, 3, 6),
]
WORDS = {"+": ("add", "sum"), "-": ("subtract", "difference"), "*": ("multiply", "product")}


def problems(seed: int) -> list[tuple[str, str, str, int]]:
    """(question, operator, expression, value) rows, unique, in a fixed shuffled order."""
    rng = random.Random(seed)
    seen: set[str] = set()
    rows: list[tuple[str, str, str, int]] = []
    for op, da, db, count in MIX:
        made = 0
        while made < count:
            question, answer = make_problem(rng, op, da, db)
            if question in seen:
                continue
            seen.add(question)
            expression = question.removeprefix("What is ").removesuffix("?")
            rows.append((question, op, expression, int(answer)))
            made += 1
    rng.shuffle(rows)
    return rows


def gsm8k_row(question: str, op: str, expression: str, value: int) -> dict[str, str]:
    verb, noun = WORDS[op]
    compact = expression.replace(" ", "")  # GSM8K's calculator annotations have no spaces
    working = f"The {noun} is {expression} = <<{compact}={value}>>{value}."
    rationale = f"We {verb} the two numbers.\n{working}"
    return {"question": question, "answer": f"{rationale}\n#### {value:,}"}


def math_row(question: str, op: str, expression: str, value: int) -> dict[str, str]:
    _, noun = WORDS[op]
    solution = f"The {noun} is ${expression} = {value}$, so the answer is $\\boxed{{{value}}}$."
    return {"problem": question, "solution": solution, "level": "Level 1", "type": "Arithmetic"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default=str(ROOT / "sample_data"))
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    rows = problems(args.seed)
    out = Path(args.out_dir)
    for name, make in (("gsm8k_layout.jsonl", gsm8k_row), ("math_layout.jsonl", math_row)):
        (out / name).write_text("".join(json.dumps(make(*row)) + "\n" for row in rows))
        print(f"wrote {len(rows)} problems to {out / name}")


if __name__ == "__main__":
    main()
