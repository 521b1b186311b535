#!/usr/bin/env python
"""Write sample_data/arithmetic.jsonl: arithmetic questions in difficulty bands for the tiny model.

    python scripts/make_arithmetic_data.py             # fixed seed, ~300 problems
    python scripts/make_arithmetic_data.py --seed 7 --out /tmp/arith.jsonl

Each line is {"id": "arith-0001", "question": "What is 37 + 48?", "answer": "85",
"difficulty": "medium"}. Answers are non-negative integers (subtraction puts the larger operand
first). The bands are tuned to sample_data/tiny-math (scripts/train_tiny_model.py), sampled
N=8 times at temperature 1.0: "easy" problems come out always correct, "medium" ones mostly
mixed, "hard" and "very-hard" ones almost always wrong; see scripts/check_tiny_model.py.

The problems come from the same generator as the model's training data, so this is not a
held-out set: every single-digit problem (there are only 100 sums and 55 differences) and
most two-digit ones were seen in training. That is intended: the file is a fixture for
measuring per-prompt pass-rate variance, not a benchmark of generalisation. Problems are
unique within the file.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (band, operator, digits of a, digits of b, count)
BANDS: list[tuple[str, str, int, int, int]] = [
    ("easy", "+", 1, 1, 45),
    ("easy", "-", 1, 1, 45),
    ("medium", "+", 2, 1, 30),
    ("medium", "-", 2, 1, 25),
    ("medium", "+", 2, 2, 30),
    ("medium", "-", 2, 2, 20),
    ("medium", "*", 1, 1, 15),
    ("hard", "*", 2, 1, 25),
    ("hard", "+", 3, 3, 10),
    ("hard", "-", 3, 3, 10),
    ("very-hard", "*", 2, 2, 25),
    ("very-hard", "*", 3, 2, 20),
]


# The problem generator; scripts/train_tiny_model.py imports it (this module needs no torch).
def rand_int(rng: random.Random, digits: int) -> int:
    if digits == 1:
        return rng.randint(0, 9)
    return rng.randint(10 ** (digits - 1), 10**digits - 1)


def make_problem(rng: random.Random, op: str, da: int, db: int) -> tuple[str, str]:
    a, b = rand_int(rng, da), rand_int(rng, db)
    if op == "-" and a < b:
        a, b = b, a
    value = {"+": a + b, "-": a - b, "*": a * b}[op]
    return f"What is {a} {op} {b}?", str(value)


def generate(seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    seen: set[str] = set()
    rows: list[dict[str, str]] = []
    for band, op, da, db, count in BANDS:
        made = 0
        while made < count:
            question, answer = make_problem(rng, op, da, db)
            if question in seen:
                continue
            seen.add(question)
            rows.append({"question": question, "answer": answer, "difficulty": band})
            made += 1
    rng.shuffle(rows)
    return [{"id": f"arith-{i:04d}", **row} for i, row in enumerate(rows, start=1)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "sample_data" / "arithmetic.jsonl"))
    ap.add_argument("--seed", type=int, default=2024)
    args = ap.parse_args()
    rows = generate(args.seed)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["difficulty"]] = counts.get(r["difficulty"], 0) + 1
    print(f"wrote {len(rows)} problems to {out}: {counts}")


if __name__ == "__main__":
    main()
