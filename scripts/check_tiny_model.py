#!/usr/bin/env python
"""Check that the tiny model gives a useful pass-rate spread on the arithmetic set, with real vLLM.

Loads sample_data/tiny-math with the vLLM engine (CPU build), samples N rollouts per problem of
sample_data/arithmetic.jsonl at temperature 1.0 through the chat template, grades each
completion numerically against `answer` and prints the share of problems that are
always-correct (N/N), always-wrong (0/N) and mixed, overall and per difficulty band.

    python scripts/check_tiny_model.py                  # seed 0, llm.chat
    python scripts/check_tiny_model.py --seed 1 --mode generate
    python scripts/check_tiny_model.py --min-share 0.15   # exit 1 if a category is below 15%
    python scripts/check_tiny_model.py --model sample_data/tiny-think --max-tokens 96

A `<think>...</think>` block (sample_data/tiny-think) is left out before grading, and an
unclosed one is wrong; the share of completions cut by max_tokens is printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The engine settings that work for this model on a CPU-only machine. `gpu_memory_utilization`
# is the share of host memory vLLM CPU reserves for the KV cache (0.92 fails on 24 GB).
LLM_KWARGS = dict(
    dtype="float32",
    max_model_len=128,
    gpu_memory_utilization=0.2,
    max_num_seqs=256,
    # Per-request seeds (SamplingParams.seed) use a torch.Generator, and vLLM rewinds it with
    # Generator.set_offset() when a prefill is chunked; CPU generators do not support offsets
    # ("RuntimeError: CPU Generator does not use offset"). A token budget that fits every
    # running sequence at full length means a prefill is never chunked.
    max_num_batched_tokens=256 * 128,
    enforce_eager=True,
)


def parse_number(text: str) -> float | None:
    try:
        return float(text.strip().replace(",", ""))
    except ValueError:
        return None


def is_correct(completion: str, answer: str) -> bool:
    if "<think>" in completion:  # the answer is what follows the thought; unclosed: wrong
        if "</think>" not in completion:
            return False
        completion = completion.rsplit("</think>", 1)[1]
    got, want = parse_number(completion), parse_number(answer)
    return got is not None and want is not None and abs(got - want) < 1e-9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(ROOT / "sample_data" / "tiny-math"))
    ap.add_argument("--data", default=str(ROOT / "sample_data" / "arithmetic.jsonl"))
    ap.add_argument("--n", type=int, default=8, help="rollouts per problem")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument(
        "--mode",
        choices=["chat", "generate"],
        default="chat",
        help="chat: llm.chat(messages); generate: tokenizer.apply_chat_template + llm.generate",
    )
    ap.add_argument(
        "--min-share",
        type=float,
        default=0.0,
        help="exit with status 1 if any category's share is below this",
    )
    ap.add_argument("--show", type=int, default=5, help="print this many example completions")
    args = ap.parse_args()

    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    from vllm import LLM, SamplingParams

    problems = [json.loads(line) for line in Path(args.data).read_text().splitlines() if line]

    t0 = time.perf_counter()
    kwargs: dict[str, object] = dict(LLM_KWARGS)
    if args.max_tokens > 64:  # room for tiny-think's thoughts next to the prompt
        kwargs.update(max_model_len=256, max_num_batched_tokens=256 * 256)
    llm = LLM(model=args.model, seed=args.seed, **kwargs)
    startup = time.perf_counter() - t0

    params = SamplingParams(
        n=args.n,
        temperature=args.temperature,
        top_p=1.0,
        top_k=0,
        max_tokens=args.max_tokens,
        seed=args.seed,
    )
    conversations = [[{"role": "user", "content": p["question"]}] for p in problems]
    t1 = time.perf_counter()
    if args.mode == "chat":
        outputs = llm.chat(conversations, params, use_tqdm=False)
    else:
        tok = llm.get_tokenizer()
        prompts = [
            tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True)
            for c in conversations
        ]
        outputs = llm.generate(prompts, params, use_tqdm=False)
    gen_s = time.perf_counter() - t1

    overall: Counter[str] = Counter()
    by_band: dict[str, Counter[str]] = defaultdict(Counter)
    n_correct = 0
    cut = 0
    for i, (p, out) in enumerate(zip(problems, outputs, strict=True)):
        texts = [o.text for o in out.outputs]
        k = sum(is_correct(t, p["answer"]) for t in texts)
        cut += sum(o.finish_reason == "length" for o in out.outputs)
        n_correct += k
        cat = "always_correct" if k == args.n else "always_wrong" if k == 0 else "mixed"
        overall[cat] += 1
        by_band[str(p.get("difficulty", "?"))][cat] += 1
        if i < args.show:
            print(f"  {p['question']!r} answer={p['answer']} -> {texts} ({k}/{args.n})")

    cats = ["always_correct", "always_wrong", "mixed"]
    total = len(problems)
    print(
        f"\nmodel={args.model}  mode={args.mode}  seed={args.seed}  n={args.n}  "
        f"T={args.temperature}"
    )
    print(
        f"engine start-up: {startup:.1f}s   generation: {gen_s:.2f}s "
        f"({total} prompts x {args.n} samples)"
    )
    print(f"mean pass rate: {n_correct / (total * args.n):.3f}")
    print(f"cut by max_tokens={args.max_tokens}: {cut / (total * args.n):.1%}")
    for band, c in sorted(by_band.items(), key=lambda kv: kv[0]):
        m = sum(c.values())
        print(f"  {band:>10}: " + "  ".join(f"{k} {c[k]:3d} ({c[k] / m:.0%})" for k in cats))
    shares = {k: overall[k] / total for k in cats}
    print("overall: " + "  ".join(f"{k} {overall[k]} ({shares[k]:.1%})" for k in cats))
    print(
        json.dumps(
            {
                "seed": args.seed,
                "mode": args.mode,
                "startup_s": round(startup, 1),
                "generate_s": round(gen_s, 2),
                "mean_pass_rate": round(n_correct / (total * args.n), 4),
                "truncated": round(cut / (total * args.n), 4),
                **{k: round(v, 4) for k, v in shares.items()},
            }
        )
    )
    if min(shares.values()) < args.min_share:
        print(f"FAIL: a category is below {args.min_share:.0%}")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
