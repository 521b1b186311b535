#!/usr/bin/env python
"""Train a tiny arithmetic chat model from scratch on CPU (for tests and demos of `curate`).

The model is a LlamaForCausalLM with a character-level tokenizer and a minimal chat template,
saved in Hugging Face format (safetensors) so both `transformers` and vLLM (CPU build) load it.

    python scripts/train_tiny_model.py                   # writes sample_data/tiny-math/
    python scripts/train_tiny_model.py --out /tmp/m --seed 1 --steps 600
    python scripts/train_tiny_model.py --think           # writes sample_data/tiny-think/
    python scripts/train_tiny_model.py --hint-steps 1000 # + a stage that teaches hints

`--hint-steps K` continues the trained model for K more steps on the original mix replayed
plus hinted problems (`What is 852 * 66?\nHint: the answer starts with 562`, the hint
`curate hint` writes from an answer-only reference: `curate.hinting.templates`), so that a
hint moves the pass rate of a problem the model fails. `--init DIR` starts that stage from
saved weights instead of training the base from scratch (the base is deterministic, so
`--init` of the saved base and a run from scratch give the same stage).

`--think` trains the reasoning variant: the answer is preceded by a worked
`<think>...</think>` block (column arithmetic with carries and borrows, 15-70 characters), and
`<think>`/`</think>` are single, non-special tokens of the vocabulary, as in DeepSeek-R1's
tokenizer, so vLLM's `deepseek_r1` reasoning parser finds them and they survive decoding.

Training data are synthetic arithmetic problems ("What is 37 + 48?" -> "85") generated on the
fly from the seed, rendered through the same chat template the model is evaluated with, with
the loss on the answer tokens and the EOS token only. Deterministic for a given seed, number
of steps and torch build (single process, 2 threads).
"""

from __future__ import annotations

import time

_T_START = time.perf_counter()  # wall time is measured from here, imports included

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import string  # noqa: E402
from pathlib import Path  # noqa: E402

# Let idle OpenMP threads sleep instead of spinning: on a busy 2-core machine spinning threads
# steal CPU from the thread doing the work (same results, often much faster wall time).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
from make_arithmetic_data import make_problem  # noqa: E402  (scripts/ is on sys.path)

ROOT = Path(__file__).resolve().parent.parent

# Printable ASCII plus newline: enough for any arithmetic question (and most short English
# prompts); everything else maps to <unk>.
CHARS = [*string.digits, *string.ascii_letters, *string.punctuation, " ", "\n"]
SPECIAL = ["<pad>", "<unk>", "<s>", "</s>"]
ROLE_TOKENS = ["<|system|>", "<|user|>", "<|assistant|>"]
# The reasoning markers of the --think model. vLLM's reasoning parsers look them up in the
# vocabulary as single tokens; they are added as *non-special* tokens (as DeepSeek-R1 does) so
# that decoding with skip_special_tokens=True, the server's default, keeps them in the text.
THINK_TOKENS = ["<think>", "</think>"]
# The context the saved model declares. Training never goes past ~60 positions (prompt and
# answer), and RoPE needs no learned position table, so this costs nothing; 512 lets
# `curate eval`'s default max_tokens (256) fit next to a prompt when the model is served
# (vLLM's server refuses prompt + max_tokens beyond the context with a 400).
MAX_POSITIONS = 512

# Jinja chat template. A prompt renders as "<s><|user|>What is 3 + 4?\n<|assistant|>" and the
# assistant answer ("7") follows immediately, terminated by "</s>". An optional system message
# renders as "<|system|>...\n" before the first user turn.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}"
    "{{ '<|system|>' + message['content'] + '\\n' }}"
    "{%- elif message['role'] == 'user' -%}"
    "{{ '<|user|>' + message['content'] + '\\n' }}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{ '<|assistant|>' + message['content'] + eos_token + '\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|assistant|>' }}{%- endif -%}"
)

# (operator, digits of a, digits of b, sampling weight). Weighted towards one- and two-digit
# problems so that in a couple of minutes the model masters single-digit sums and differences,
# half-learns two-digit ones and single-digit products, and fails on anything bigger.
TRAIN_MIX = [
    ("+", 1, 1, 5),
    ("-", 1, 1, 4),
    ("+", 2, 1, 3),
    ("-", 2, 1, 2),
    ("+", 2, 2, 3),
    ("-", 2, 2, 2),
    ("*", 1, 1, 2),
    ("+", 3, 3, 1),
    ("*", 2, 1, 1),
]

# The --think model's mix: every band of sample_data/arithmetic.jsonl, so that easy problems
# get short thoughts and hard ones long thoughts (which a small max_tokens cuts).
THINK_MIX = [
    ("+", 1, 1, 3),
    ("-", 1, 1, 3),
    ("+", 2, 1, 3),
    ("-", 2, 1, 3),
    ("+", 2, 2, 4),
    ("-", 2, 2, 3),
    ("*", 1, 1, 3),
    ("*", 2, 1, 3),
    ("+", 3, 3, 2),
    ("-", 3, 3, 2),
    ("*", 2, 2, 1),
    ("*", 3, 2, 1),
]


def _digits(n: int, width: int) -> list[int]:
    """The digits of n, least significant first, padded with zeros to `width`."""
    return [(n // 10**i) % 10 for i in range(width)]


def column_steps(a: int, op: str, b: int) -> list[str]:
    """The written-arithmetic steps a pupil would note for `a op b` (a >= b for '-')."""
    if op == "*" and b < 10:
        if a < 10:
            return [f"{a}*{b}={a * b}"]
        steps, carry = [], 0
        for i, d in enumerate(_digits(a, len(str(a)))):
            v = d * b + carry
            last = i == len(str(a)) - 1
            steps.append(f"{d}*{b}{'+' + str(carry) if carry else ''}={v}")
            if not last and v >= 10:
                steps[-1] += f" c{v // 10}"
            carry = v // 10
        return steps
    if op == "*":  # b has two digits: two partial products, then their sum
        lo, hi = b % 10, b // 10
        return [f"{a}*{lo}={a * lo}", f"{a}*{hi}0={a * hi * 10}", f"{a * lo}+{a * hi * 10}={a * b}"]
    width = len(str(a))
    da, db = _digits(a, width), _digits(b, width)
    steps, carry = [], 0
    for i in range(width):
        last = i == width - 1
        if op == "+":
            v = da[i] + db[i] + carry
            steps.append(f"{da[i]}+{db[i]}{'+1' if carry else ''}={v}")
            carry = int(v >= 10)
            if carry and not last:
                steps[-1] += " c1"
        else:
            top = da[i] - carry
            if top < db[i]:
                steps.append(f"1{da[i]}-{db[i]}{'-1' if carry else ''}={top + 10 - db[i]} b1")
                carry = 1
            else:
                steps.append(f"{da[i]}-{db[i]}{'-1' if carry else ''}={top - db[i]}")
                carry = 0
    return steps


def think_answer(question: str, answer: str) -> str:
    """`What is 37 + 48?`, `85` -> `<think>37+48: 7+8=15 c1, 3+4+1=8, so 85</think>85`."""
    a_text, op, b_text = question.removeprefix("What is ").removesuffix("?").split()
    steps = column_steps(int(a_text), op, int(b_text))
    thought = f"{a_text}{op}{b_text}: {', '.join(steps)}, so {answer}"
    return f"{THINK_TOKENS[0]}{thought}{THINK_TOKENS[1]}{answer}"


# The hinted problems of the --hint-steps stage: the bands the model fails or half-solves,
# and the bigger ones of sample_data/arithmetic.jsonl (so that a hint can rescue them).
HINT_MIX = [
    ("+", 2, 2, 1),
    ("-", 2, 2, 1),
    ("*", 1, 1, 1),
    ("*", 2, 1, 2),
    ("+", 3, 3, 2),
    ("-", 3, 3, 2),
    ("*", 2, 2, 2),
    ("*", 3, 2, 2),
]
# The hinted share of a --hint-steps batch: the rest replays the base mix.
HINT_SHARE = 0.375


def answer_prefix(answer: str, level: int) -> str | None:
    """The leading digits a level-`level` hint shows: ceil(level * len / 4) of them, never
    the whole answer (None for a one-digit answer). Must match `curate.hinting.templates`."""
    n = min(len(answer) - 1, -(-level * len(answer) // 4))
    return answer[:n] if n >= 1 else None


def hinted_question(question: str, answer: str, level: int) -> str:
    """The question with its level-`level` hint, as `curate hint` writes it."""
    prefix = answer_prefix(answer, level)
    if prefix is None:
        return question
    return f"{question}\nHint: the answer starts with {prefix}"


def build_tokenizer(think: bool = False):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    extra = THINK_TOKENS if think else []
    vocab = {tok: i for i, tok in enumerate(SPECIAL + ROLE_TOKENS + extra + CHARS)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.FixedLength(length=1)  # one token per character
    tk.decoder = decoders.Fuse()  # concatenate characters back without separators
    # Special tokens are matched before pre-tokenization, so "<|user|>" stays one token.
    tk.add_special_tokens(SPECIAL + ROLE_TOKENS)
    # Added (non-special) tokens are matched before pre-tokenization too: "<think>" is one
    # token, and a decode that skips special tokens still writes it.
    tk.add_tokens([AddedToken(t, special=False, normalized=False) for t in extra])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        additional_special_tokens=ROLE_TOKENS,
        model_max_length=MAX_POSITIONS,
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def encode_example(tok, question: str, answer: str) -> tuple[list[int], int]:
    """Token ids of prompt + answer + EOS, and the prompt length (loss starts after it)."""
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
    )
    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    a_ids = tok(answer, add_special_tokens=False)["input_ids"]
    return p_ids + a_ids + [tok.eos_token_id], len(p_ids)


def make_batch(
    tok, rng: random.Random, batch_size: int, think: bool = False, hinted: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """`batch_size` examples of the base mix, the last `hinted` of them hinted problems."""
    mix = THINK_MIX if think else TRAIN_MIX
    kinds = [(op, da, db) for op, da, db, _ in mix]
    weights = [w for *_, w in mix]
    hint_kinds = [(op, da, db) for op, da, db, _ in HINT_MIX]
    hint_weights = [w for *_, w in HINT_MIX]
    seqs = []
    for i in range(batch_size):
        if i >= batch_size - hinted:
            op, da, db = rng.choices(hint_kinds, weights=hint_weights)[0]
            question, answer = make_problem(rng, op, da, db)
            question = hinted_question(question, answer, rng.randint(1, 3))
            seqs.append(encode_example(tok, question, answer))
            continue
        op, da, db = rng.choices(kinds, weights=weights)[0]
        question, answer = make_problem(rng, op, da, db)
        if think:
            answer = think_answer(question, answer)
        seqs.append(encode_example(tok, question, answer))
    width = max(len(ids) for ids, _ in seqs)
    input_ids = torch.full((batch_size, width), tok.pad_token_id, dtype=torch.long)
    labels = torch.full((batch_size, width), -100, dtype=torch.long)
    for i, (ids, plen) in enumerate(seqs):  # right padding for training
        input_ids[i, : len(ids)] = torch.tensor(ids)
        labels[i, plen : len(ids)] = torch.tensor(ids[plen:])
    return input_ids, labels


def tiny_llama_config(tok, args: argparse.Namespace, **extra: object):
    """The tiny Llama shape both bundled models share (vocabulary padded to a multiple of
    8, head dimension at least 64 for vLLM's CPU attention), plus `extra` settings."""
    from transformers import LlamaConfig

    if args.hidden // args.heads < 64:
        raise SystemExit("head dimension must be >= 64 (vLLM CPU attention does not do 16/32)")
    return LlamaConfig(
        vocab_size=8 * math.ceil(len(tok) / 8),
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.heads,
        head_dim=args.hidden // args.heads,
        max_position_embeddings=MAX_POSITIONS,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        torch_dtype="float32",
        **extra,
    )


def make_portable(out: Path) -> None:
    """Rewrite the saved config files so that transformers 4 and 5 (and so vLLM) all read them.

    transformers 5 writes tokenizer_class "TokenizersBackend", "extra_special_tokens" as a list
    and the chat template in a separate chat_template.jinja, and nests rope_theta under
    "rope_parameters"; older versions know none of these. Only JSON keys change, not weights.
    """
    tc_path = out / "tokenizer_config.json"
    tc = json.loads(tc_path.read_text())
    tc.pop("extra_special_tokens", None)
    tc.pop("backend", None)
    tc.update(
        tokenizer_class="PreTrainedTokenizerFast",
        additional_special_tokens=ROLE_TOKENS,
        add_bos_token=False,  # the chat template writes <s> itself
        add_eos_token=False,
        chat_template=CHAT_TEMPLATE,
    )
    tc_path.write_text(json.dumps(tc, indent=2, sort_keys=True) + "\n")
    (out / "chat_template.jinja").unlink(missing_ok=True)

    cfg_path = out / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["torch_dtype"] = "float32"  # transformers 4 / vLLM key
    cfg["dtype"] = "float32"  # transformers 5 key
    rope = cfg.get("rope_parameters") or {}
    cfg.setdefault("rope_theta", rope.get("rope_theta", 10000.0))
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    for f in out.iterdir():
        f.chmod(0o644)  # safetensors creates its file with mode 0600


def train_stage(
    model,
    tok,
    rng: random.Random,
    args: argparse.Namespace,
    steps: int,
    lr: float,
    *,
    think: bool = False,
    hinted: int = 0,
) -> float:
    """`steps` AdamW steps (warm-up over the first 5%, cosine decay to 5% of `lr`);
    returns the final running loss."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    warmup = max(1, steps // 20)

    def lr_at(step: int) -> float:
        if step < warmup:
            return lr * (step + 1) / warmup
        frac = (step - warmup) / max(1, steps - warmup)
        return lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))

    t0 = time.perf_counter()
    running = None
    for step in range(steps):
        input_ids, labels = make_batch(tok, rng, args.batch_size, think=think, hinted=hinted)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        loss = model(
            input_ids=input_ids, attention_mask=input_ids != tok.pad_token_id, labels=labels
        ).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running = loss.item() if running is None else 0.95 * running + 0.05 * loss.item()
        if step % 100 == 0 or step == steps - 1:
            el = time.perf_counter() - t0
            print(
                f"step {step:5d}  loss {running:.4f}  lr {lr_at(step):.2e}  {el:6.1f}s", flush=True
            )
    return running if running is not None else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out",
        default=None,
        help="output directory (default: sample_data/tiny-math, or tiny-think with --think)",
    )
    ap.add_argument(
        "--think",
        action="store_true",
        help="train the reasoning variant: a <think>...</think> block before each answer",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=384)
    ap.add_argument(
        "--hint-steps",
        type=int,
        default=0,
        help="then continue this many steps on the base mix replayed plus hinted problems",
    )
    ap.add_argument("--hint-lr", type=float, default=3e-4, help="peak lr of the hint stage")
    ap.add_argument(
        "--init",
        default=None,
        help="start the hint stage from these saved weights (skips the base training)",
    )
    args = ap.parse_args()
    if args.think and args.hint_steps:
        raise SystemExit("--hint-steps trains tiny-math, not the --think model")
    if args.init is not None and not args.hint_steps:
        raise SystemExit("--init only applies with --hint-steps")

    torch.set_num_threads(2)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    rng = random.Random(args.seed)

    from transformers import LlamaForCausalLM

    tok = build_tokenizer(think=args.think)
    if args.out is None:
        args.out = str(ROOT / "sample_data" / ("tiny-think" if args.think else "tiny-math"))
    config = tiny_llama_config(tok, args, tie_word_embeddings=True)
    vocab_size = config.vocab_size
    if args.init is not None:
        model = LlamaForCausalLM.from_pretrained(args.init, dtype=torch.float32)
        print(f"base: {args.init} (not trained again)")
    else:
        model = LlamaForCausalLM(config)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"params: {n_params:,}  vocab: {len(tok)} (padded to {vocab_size})")

    model.train()
    t_train = time.perf_counter()
    running = None
    if args.init is None:
        running = train_stage(model, tok, rng, args, args.steps, args.lr, think=args.think)
    hint_running = None
    if args.hint_steps:
        # Its own seeds, so that the stage is the same after --init as after a base run.
        torch.manual_seed(args.seed + 1)
        hint_rng = random.Random(args.seed + 1)
        hinted = round(args.batch_size * HINT_SHARE)
        hint_running = train_stage(
            model, tok, hint_rng, args, args.hint_steps, args.hint_lr, hinted=hinted
        )
    train_s = time.perf_counter() - t_train

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model.eval()
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    make_portable(out)

    total = time.perf_counter() - _T_START
    cpu = time.process_time()
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    info = {
        "params": n_params,
        "layers": args.layers,
        "hidden": args.hidden,
        "heads": args.heads,
        "intermediate": args.intermediate,
        "steps": args.steps,
        "batch_size": args.batch_size,
        "seed": args.seed,
        "think": args.think,
        "hint_steps": args.hint_steps,
        "hint_lr": args.hint_lr if args.hint_steps else None,
        "init": args.init,
        "final_loss": round(running, 4) if running is not None else None,
        "final_hint_stage_loss": round(hint_running, 4) if hint_running is not None else None,
        "train_seconds": round(train_s, 1),
        "wall_seconds": round(total, 1),
        "cpu_seconds": round(cpu, 1),
    }
    print(json.dumps(info))
    print(
        f"wrote {out} ({size / 1e6:.2f} MB) in {total:.1f}s wall "
        f"({train_s:.1f}s training, {cpu:.0f}s CPU)"
    )


if __name__ == "__main__":
    main()
