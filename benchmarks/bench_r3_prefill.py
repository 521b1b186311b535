"""Benchmark: what `--grader r3`'s prefill costs per rollout, against generating it.

One offline vLLM engine (start-up excluded) on the bundled reasoning model: generate N
rollouts of each prompt (`VLLMBackend.generate`, as curate eval does), then score the
reference after every rollout's reasoning (`VLLMBackend.reference_logprobs`, one prefill
each, the path `--grader r3` takes; identical reasoning is not merged here, so this is the
worst case). Each side is timed `--repeat` times, alternating, and the medians compared:
the figure is prefill seconds per rollout over generation seconds per rollout.

    python benchmarks/bench_r3_prefill.py [--limit 64] [--rollouts 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "sample_data" / "tiny-think"))
    parser.add_argument("--data", default=str(ROOT / "sample_data" / "arithmetic.jsonl"))
    parser.add_argument("--limit", type=int, default=64)
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from curate.backends.base import GenerationRequest, SamplingConfig
    from curate.backends.prefill import PrefillItem
    from curate.backends.vllm_local import open_vllm
    from curate.core.reasoning import split_reasoning
    from curate.core.seeds import derive_seed
    from curate.data.samples import build_prompts, load_samples, references_by_id
    from curate.evaluation.r3 import reasoning_context

    frame, fields = load_samples(Path(args.data), limit=args.limit)
    ids = frame["sample_id"].to_list()
    prompts = dict(zip(ids, build_prompts(frame, fields, "chat"), strict=True))
    references = references_by_id(frame, fields)
    sampling = SamplingConfig(temperature=1.0, top_p=1.0, max_tokens=args.max_tokens)
    requests = [
        GenerationRequest(sid, prompts[sid], args.rollouts, 0, derive_seed(0, sid, 0))
        for sid in ids
    ]
    rollouts = len(ids) * args.rollouts
    with open_vllm(args.model, kv_cache_memory_gb=0.5) as backend:
        generated = backend.generate(requests, sampling, "chat")
        items = []
        for req, gens in zip(requests, generated, strict=True):
            for gen in gens:
                split = split_reasoning(gen.text or "")
                context = reasoning_context(split.answer, split.reasoning)
                items.append(PrefillItem(req.prompt, context, str(references[req.sample_id])))
        tokens = sum(r.tokens_in for r in backend.reference_logprobs(items, "chat"))

        def generate() -> float:
            start = time.perf_counter()
            backend.generate(requests, sampling, "chat")
            return time.perf_counter() - start

        def prefill() -> float:
            start = time.perf_counter()
            backend.reference_logprobs(items, "chat")
            return time.perf_counter() - start

        gen_t, pre_t = [], []
        for i in range(args.repeat):
            order = (generate, prefill) if i % 2 == 0 else (prefill, generate)
            for fn in order:
                (gen_t if fn is generate else pre_t).append(fn())
    gen_s, pre_s = statistics.median(gen_t), statistics.median(pre_t)
    print(f"workload: {len(ids)} prompts x {args.rollouts} rollouts = {rollouts}, {args.model}")
    print(f"generation: {gen_s:.3f} s ({1e3 * gen_s / rollouts:.2f} ms per rollout)")
    print(
        f"r3 prefill: {pre_s:.3f} s ({1e3 * pre_s / rollouts:.2f} ms per rollout, "
        f"{tokens / rollouts:.0f} tokens each)"
    )
    print(f"ratio prefill / generation: {pre_s / gen_s:.2f}x (median of {args.repeat})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
