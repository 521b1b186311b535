"""Run directories for the viewer tests, written through the real store as `curate eval`
writes them: chat prompts with a system turn, references in GSM8K's layout, two data
sources, reasoning, errors (one sample with nothing but errors), truncated rollouts, and one
sample whose every text field (prompt, reference, completion, reasoning, extracted answer,
error, even its id) is a hostile payload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from curate.store.run_dir import RolloutStore

# Every way text has been seen to turn into markup or script: each must show as text.
HOSTILE: tuple[str, ...] = (
    "<script>document.title='pwned-script';window.__pwned='script'</script>",
    "<img src=x onerror=\"window.__pwned='img';document.title='pwned-img'\">",
    "<a href=\"javascript:window.__pwned='link'\">click me</a>",
    "</script><script>window.__pwned='breakout'</script>",
    "<!-- <script>window.__pwned='comment'</script> -->",
    "<svg onload=\"window.__pwned='svg'\"><circle r=5></circle></svg>",
    "<iframe srcdoc=\"<script>parent.__pwned='iframe'</script>\"></iframe>",
    "<style>body{display:none}</style>",
    "line\u2028separator\u2029paragraph and a NUL-free \u0007 bell",
    "]]><![CDATA[ &amp; &lt;b&gt; {{constructor.constructor('window.__pwned=1')()}}",
)
PAYLOAD = "\n".join(HOSTILE)
HOSTILE_ID = "evil<img src=x onerror=window.__pwned='id'>"
SYSTEM = "Answer with a number."
SOURCES = ("gsm8k", "math")


def _rates(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rates = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=n)
    return rates


def write_run(
    path: Path,
    *,
    samples: int = 24,
    runs: int = 4,
    seed: int = 0,
    model: str = "ckpt",
    hostile: bool = True,
) -> Path:
    """A run directory of `samples` x `runs` rollouts (see the module docstring)."""
    rng = np.random.default_rng(seed)
    ids = [f"q{i:03d}" for i in range(samples)]
    questions = [f"Tom has {i} apples and buys {i + 3} more. How many now?" for i in range(samples)]
    answers = [f"He has {i} + {i + 3}.\n#### {2 * i + 3}" for i in range(samples)]
    if hostile:
        ids.append(HOSTILE_ID)
        questions.append(PAYLOAD)
        answers.append(f"#### 7\n{PAYLOAD}")
    sources = [SOURCES[i % 2] for i in range(len(ids))]
    store = RolloutStore(path)
    store.create()
    store.write_manifest(
        {
            "model": model,
            "backend": "fake",
            "runs": runs,
            "mode": "chat",
            "system": SYSTEM,
            "prompt_field": "question",
            "messages_field": None,
            "answer_field": "answer",
            "id_field": "sample_id",
            "grader": "numeric",
            "grader_reason": "auto: every reference is a number",
            "reference_extract": {
                "requested": "auto",
                "mode": "gsm8k",
                "applied": len(ids),
                "total": len(ids),
                "summary": "references: gsm8k (auto): answer from the '#### N' line",
            },
            "truncation": "grade",
            "sampling": {"max_tokens": 64},
        }
    )
    store.write_samples(
        pl.DataFrame(
            {"sample_id": ids, "question": questions, "answer": answers, "data_source": sources}
        )
    )
    rates = _rates(len(ids), seed)
    rows: list[dict[str, Any]] = []
    for s, sid in enumerate(ids):
        right = 2 * s + 3
        for r in range(runs):
            ok = bool(rng.random() < rates[s])
            row: dict[str, Any] = {
                "sample_id": sid,
                "rollout_idx": r,
                "score": 1.0 if ok else 0.0,
                "completion": f"{s} + {s + 3} = {right if ok else right + 1}. The answer is "
                f"{right if ok else right + 1}.",
                "extracted": str(right if ok else right + 1),
                "finish_reason": "stop",
                "truncated": False,
                "prompt_tokens": 30 + s,
                "completion_tokens": 12 + r,
                "latency_s": 0.05 * (r + 1),
                "seed": 1000 * s + r,
                "attempts": 1,
                "reasoning": f"Adding {s} and {s + 3} step by step." if r % 2 == 0 else None,
                "reasoning_closed": True if r % 2 == 0 else None,
            }
            if s == samples - 3 or (s % 7 == 3 and r == runs - 1):  # failed: data, not a score
                row.update(
                    score=None,
                    completion=None,
                    extracted=None,
                    error="backend: HTTP 500 from the endpoint (retried 3 times)",
                    finish_reason=None,
                )
            elif s % 5 == 4 and r == 0:  # cut short at max_tokens
                row.update(score=0.0, finish_reason="length", truncated=True, completion_tokens=64)
            if sid == HOSTILE_ID:
                row.update(
                    completion=PAYLOAD,
                    reasoning=PAYLOAD,
                    extracted=HOSTILE[1],
                    score=1.0 if r == 0 else 0.0,
                    error=None,
                )
                if r == runs - 1:
                    row.update(score=None, completion=None, error=PAYLOAD)
            rows.append(row)
    frame = pl.DataFrame(rows, infer_schema_length=None)
    half = frame.height // 2
    store.append(frame.head(half))
    store.append(frame.tail(frame.height - half))
    return path
