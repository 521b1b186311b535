#!/usr/bin/env python
"""Train a tiny arithmetic chat model from scratch on CPU (for tests and demos of `curate`).

The model is a LlamaForCausalLM with a character-level tokenizer and a minimal chat template,
saved in Hugging Face format (safetensors) so both `transformers` and vLLM (CPU build) load it.

    python scripts/train_tiny_model.py                   # writes sample_data/tiny-math/
    python scripts/train_tiny_model.py --out /tmp/m --seed 1 --steps 600

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


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL + ROLE_TOKENS + CHARS)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.FixedLength(length=1)  # one token per character
    tk.decoder = decoders.Fuse()  # concatenate characters back without separators
    # Special tokens are matched before pre-tokenization, so "<|user|>" stays one token.
    tk.add_special_tokens(SPECIAL + ROLE_TOKENS)
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


def make_batch(tok, rng: random.Random, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    kinds = [(op, da, db) for op, da, db, _ in TRAIN_MIX]
    weights = [w for *_, w in TRAIN_MIX]
    seqs = []
    for _ in range(batch_size):
        op, da, db = rng.choices(kinds, weights=weights)[0]
        seqs.append(encode_example(tok, *make_problem(rng, op, da, db)))
    width = max(len(ids) for ids, _ in seqs)
    input_ids = torch.full((batch_size, width), tok.pad_token_id, dtype=torch.long)
    labels = torch.full((batch_size, width), -100, dtype=torch.long)
    for i, (ids, plen) in enumerate(seqs):  # right padding for training
        input_ids[i, : len(ids)] = torch.tensor(ids)
        labels[i, plen : len(ids)] = torch.tensor(ids[plen:])
    return input_ids, labels


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out",
        default=str(ROOT / "sample_data" / "tiny-math"),
        help="output directory (default: sample_data/tiny-math in the repo)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=384)
    args = ap.parse_args()

    torch.set_num_threads(2)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    rng = random.Random(args.seed)

    from transformers import LlamaConfig, LlamaForCausalLM

    tok = build_tokenizer()
    vocab_size = 8 * math.ceil(len(tok) / 8)
    if args.hidden // args.heads < 64:
        raise SystemExit("head dimension must be >= 64 (vLLM CPU attention does not do 16/32)")
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.heads,
        head_dim=args.hidden // args.heads,
        max_position_embeddings=MAX_POSITIONS,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"params: {n_params:,}  vocab: {len(tok)} (padded to {vocab_size})")

    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))
    warmup = max(1, args.steps // 20)

    def lr_at(step: int) -> float:
        if step < warmup:
            return args.lr * (step + 1) / warmup
        frac = (step - warmup) / max(1, args.steps - warmup)
        return args.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))

    model.train()
    t_train = time.perf_counter()
    running = None
    for step in range(args.steps):
        input_ids, labels = make_batch(tok, rng, args.batch_size)
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
        if step % 100 == 0 or step == args.steps - 1:
            el = time.perf_counter() - t_train
            print(
                f"step {step:5d}  loss {running:.4f}  lr {lr_at(step):.2e}  {el:6.1f}s", flush=True
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
        "final_loss": round(running or 0.0, 4),
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
