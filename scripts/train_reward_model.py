#!/usr/bin/env python
"""Train a tiny arithmetic reward model from scratch on CPU (for tests and demos of
`curate eval --grader reward-model`).

The model is a LlamaForSequenceClassification with one output (a logit: high for a right
answer, low for a wrong one), the character-level tokenizer and chat template of
sample_data/tiny-math (scripts/train_tiny_model.py), saved in Hugging Face format so that
vLLM's CPU build serves it for classification (`/classify`, `/pooling`).

    python scripts/train_reward_model.py                 # writes sample_data/tiny-reward/
    python scripts/train_reward_model.py --out /tmp/rm --seed 1 --steps 600

Each example is a conversation rendered through the chat template, user question then
assistant answer ("<s><|user|>What is 37 + 48?\\n<|assistant|>85</s>\\n"), labelled 1 when the
answer is right. Half the answers are right; the other half are plausible mistakes made from
the right one (off by one, two or ten, a digit changed, two digits swapped, a digit dropped or
doubled, another operator's result). Problems come from the generator that trains the policy
(scripts/make_arithmetic_data.py), over every difficulty band of sample_data/arithmetic.jsonl.
Loss: binary cross-entropy on the logit. Deterministic for a given seed, number of steps and
torch build (single process, 2 threads).
"""

from __future__ import annotations

import time

_T_START = time.perf_counter()  # wall time is measured from here, imports included

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
from pathlib import Path  # noqa: E402

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see train_tiny_model.py

import sys  # noqa: E402

import torch  # noqa: E402
from make_arithmetic_data import make_problem  # noqa: E402  (scripts/ is on sys.path)
from train_tiny_model import build_tokenizer, make_portable, tiny_llama_config  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from curate.stats.auc import roc_auc  # noqa: E402

# (operator, digits of a, digits of b, weight): the policy's training mix plus the harder
# bands of sample_data/arithmetic.jsonl, where the policy's answers are mostly wrong.
MIX = [
    ("+", 1, 1, 3),
    ("-", 1, 1, 3),
    ("+", 2, 1, 3),
    ("-", 2, 1, 3),
    ("+", 2, 2, 3),
    ("-", 2, 2, 3),
    ("*", 1, 1, 3),
    ("*", 2, 1, 2),
    ("+", 3, 3, 2),
    ("-", 3, 3, 2),
    ("*", 2, 2, 2),
    ("*", 3, 2, 1),
]


def operands(question: str) -> tuple[int, str, int]:
    """(a, op, b) of "What is a op b?"."""
    a, op, b = question.removeprefix("What is ").removesuffix("?").split()
    return int(a), op, int(b)


def wrong_answer(rng: random.Random, question: str, right: str) -> str:
    """A plausible wrong answer to `question`: a mistake a weak model makes."""
    a, _, b = operands(question)
    value = int(right)
    for _ in range(100):
        kind = rng.randrange(8)
        digits = list(right)
        if kind == 0:
            cand = value + rng.choice([-1, 1])
        elif kind == 1:
            cand = value + rng.choice([-10, 10, -2, 2])
        elif kind == 2:  # one digit changed
            i = rng.randrange(len(digits))
            digits[i] = rng.choice([d for d in "0123456789" if d != digits[i]])
            cand = int("".join(digits))
        elif kind == 3 and len(digits) >= 2:  # two neighbouring digits swapped
            i = rng.randrange(len(digits) - 1)
            digits[i], digits[i + 1] = digits[i + 1], digits[i]
            cand = int("".join(digits))
        elif kind == 4 and len(digits) >= 2:  # a digit dropped
            del digits[rng.randrange(len(digits))]
            cand = int("".join(digits))
        elif kind == 5:  # a digit doubled
            i = rng.randrange(len(digits))
            digits.insert(i, digits[i])
            cand = int("".join(digits))
        elif kind == 6:  # another operator's result
            cand = rng.choice([a + b, abs(a - b), a * b])
        else:  # a number of the same length
            n = len(right)
            cand = rng.randint(10 ** (n - 1) if n > 1 else 0, 10**n - 1)
        if cand >= 0 and str(cand) != right:
            return str(cand)
    return str(value + 1)


def make_example(rng: random.Random) -> tuple[str, str, int]:
    """(question, answer, label 1 when the answer is right)."""
    kinds = [(op, da, db) for op, da, db, _ in MIX]
    op, da, db = rng.choices(kinds, weights=[w for *_, w in MIX])[0]
    question, right = make_problem(rng, op, da, db)
    if rng.random() < 0.5:
        return question, right, 1
    return question, wrong_answer(rng, question, right), 0


@torch.no_grad()
def policy_samples(
    policy_dir: str, tok, rng: random.Random, count: int, batch_size: int = 512
) -> list[tuple[str, str, int]]:
    """`count` answers sampled from the policy (temperature 1) to problems drawn from MIX,
    labelled by whether they are right: the verifier recipe of Cobbe et al. (2021), which
    trains on the generator's own samples so that the reward model learns the mistakes the
    policy makes, and how often it makes them on each kind of problem."""
    from transformers import LlamaForCausalLM

    policy = LlamaForCausalLM.from_pretrained(policy_dir, dtype=torch.float32).eval()
    kinds = [(op, da, db) for op, da, db, _ in MIX]
    weights = [w for *_, w in MIX]
    out: list[tuple[str, str, int]] = []
    while len(out) < count:
        problems = [
            make_problem(rng, *rng.choices(kinds, weights=weights)[0])
            for _ in range(min(batch_size, count - len(out)))
        ]
        prompts = [
            tok.apply_chat_template(
                [{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True
            )
            for q, _ in problems
        ]
        ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
        width = max(len(i) for i in ids)
        input_ids = torch.full((len(ids), width), tok.pad_token_id, dtype=torch.long)
        for row, seq in enumerate(ids):  # left padding for generation
            input_ids[row, width - len(seq) :] = torch.tensor(seq)
        generated = policy.generate(
            input_ids=input_ids,
            attention_mask=input_ids != tok.pad_token_id,
            do_sample=True,
            temperature=1.0,
            top_k=0,
            max_new_tokens=8,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
        )
        for (question, right), seq in zip(problems, generated[:, width:], strict=True):
            answer = tok.decode(seq, skip_special_tokens=True)
            out.append((question, answer, int(answer.strip() == right)))
    return out


def encode(tok, question: str, answer: str) -> list[int]:
    """The conversation as the reward model reads it (what vLLM renders for `messages`)."""
    text = tok.apply_chat_template(
        [{"role": "user", "content": question}, {"role": "assistant", "content": answer}],
        tokenize=False,
    )
    return tok(text, add_special_tokens=False)["input_ids"]


def make_batch(tok, examples) -> tuple[torch.Tensor, torch.Tensor]:
    seqs = [encode(tok, q, a) for q, a, _ in examples]
    width = max(len(s) for s in seqs)
    input_ids = torch.full((len(seqs), width), tok.pad_token_id, dtype=torch.long)
    for i, ids in enumerate(seqs):  # right padding: the model pools the last non-pad token
        input_ids[i, : len(ids)] = torch.tensor(ids)
    labels = torch.tensor([float(y) for *_, y in examples])
    return input_ids, labels


@torch.no_grad()
def evaluate(model, tok, examples, batch_size: int = 256) -> tuple[float, float]:
    """(accuracy at logit 0, AUC) on held-out examples."""
    model.eval()
    logits: list[float] = []
    for i in range(0, len(examples), batch_size):
        input_ids, _ = make_batch(tok, examples[i : i + batch_size])
        out = model(input_ids=input_ids, attention_mask=input_ids != tok.pad_token_id).logits
        logits.extend(out[:, 0].tolist())
    model.train()
    labels = [y for *_, y in examples]
    acc = sum((s > 0) == bool(y) for s, y in zip(logits, labels, strict=True)) / len(labels)
    return acc, roc_auc(logits, labels)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out",
        default=str(ROOT / "sample_data" / "tiny-reward"),
        help="output directory (default: sample_data/tiny-reward in the repo)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument(
        "--policy",
        default=str(ROOT / "sample_data" / "tiny-math"),
        help="the policy whose sampled answers make half of the examples ('none': only "
        "synthetic mistakes)",
    )
    ap.add_argument("--policy-samples", type=int, default=32768)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=384)
    args = ap.parse_args()

    torch.set_num_threads(2)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    rng = random.Random(args.seed)
    eval_rng = random.Random(args.seed + 10_000)
    held_out = [make_example(eval_rng) for _ in range(2000)]
    tok = build_tokenizer()
    pool: list[tuple[str, str, int]] = []
    if args.policy != "none":
        t0 = time.perf_counter()
        pool = policy_samples(args.policy, tok, random.Random(args.seed + 1), args.policy_samples)
        held_out_policy = pool[-2000:]  # never trained on
        pool = pool[:-2000]
        right = sum(y for *_, y in pool)
        print(
            f"policy samples: {len(pool):,} ({right / len(pool):.1%} right) in "
            f"{time.perf_counter() - t0:.1f}s",
            flush=True,
        )

    from transformers import LlamaForSequenceClassification

    config = tiny_llama_config(
        tok,
        args,
        tie_word_embeddings=False,
        num_labels=1,
        id2label={0: "right"},
        label2id={"right": 0},
    )
    vocab_size = config.vocab_size
    model = LlamaForSequenceClassification(config)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"params: {n_params:,}  vocab: {len(tok)} (padded to {vocab_size})")

    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))
    warmup = max(1, args.steps // 20)
    loss_fn = torch.nn.BCEWithLogitsLoss()

    def lr_at(step: int) -> float:
        if step < warmup:
            return args.lr * (step + 1) / warmup
        frac = (step - warmup) / max(1, args.steps - warmup)
        return args.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))

    model.train()
    t_train = time.perf_counter()
    running = None
    for step in range(args.steps):
        half = args.batch_size // 2 if pool else 0
        examples = [pool[rng.randrange(len(pool))] for _ in range(half)]
        examples += [make_example(rng) for _ in range(args.batch_size - half)]
        input_ids, labels = make_batch(tok, examples)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        logits = model(input_ids=input_ids, attention_mask=input_ids != tok.pad_token_id).logits
        loss = loss_fn(logits[:, 0], labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running = loss.item() if running is None else 0.95 * running + 0.05 * loss.item()
        if step % 250 == 0 or step == args.steps - 1:
            el = time.perf_counter() - t_train
            print(
                f"step {step:5d}  loss {running:.4f}  lr {lr_at(step):.2e}  {el:6.1f}s", flush=True
            )
    train_s = time.perf_counter() - t_train
    accuracy, held_out_auc = evaluate(model, tok, held_out)
    policy_accuracy, policy_auc = (
        evaluate(model, tok, held_out_policy) if pool else (math.nan, math.nan)
    )

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model.eval()
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    make_portable(out)

    total = time.perf_counter() - _T_START
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    info = {
        "params": n_params,
        "steps": args.steps,
        "batch_size": args.batch_size,
        "seed": args.seed,
        "final_loss": round(running or 0.0, 4),
        "held_out_accuracy": round(accuracy, 4),
        "held_out_auc": round(held_out_auc, 4),
        "policy_held_out_accuracy": round(policy_accuracy, 4),
        "policy_held_out_auc": round(policy_auc, 4),
        "train_seconds": round(train_s, 1),
        "wall_seconds": round(total, 1),
        "cpu_seconds": round(time.process_time(), 1),
    }
    print(json.dumps(info))
    print(f"wrote {out} ({size / 1e6:.2f} MB) in {total:.1f}s wall ({train_s:.1f}s training)")


if __name__ == "__main__":
    main()
