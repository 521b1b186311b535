"""`curate eval`: N graded rollouts per sample, stored in a resumable run directory."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from curate.cli.errors import handle_errors


class ModeChoice(str, Enum):
    chat = "chat"
    completion = "completion"


@handle_errors
def eval_cmd(
    data: Annotated[
        Path, typer.Argument(help="Samples: JSONL, Parquet or CSV.", show_default=False)
    ],
    model: Annotated[
        str, typer.Option("--model", "-m", help="Model path or name.", show_default=False)
    ],
    backend: Annotated[str, typer.Option(help="vllm (local engine) or openai.")] = "vllm",
    runs: Annotated[int, typer.Option("--runs", "-n", min=1, help="Rollouts per sample.")] = 8,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Run directory [default: runs/DATA__MODEL].", show_default=False
        ),
    ] = None,
    grader: Annotated[
        str | None,
        typer.Option(
            help="exact, numeric, math, regex:PATTERN, python:FILE.py:FUNCTION or "
            "python:module:function [default: numeric when every answer is a number, else exact]",
            show_default=False,
        ),
    ] = None,
    temperature: Annotated[float, typer.Option(min=0.0)] = 1.0,
    top_p: Annotated[float, typer.Option(min=0.0, max=1.0)] = 1.0,
    max_tokens: Annotated[int, typer.Option(min=1)] = 256,
    stop: Annotated[
        list[str] | None, typer.Option(help="Stop string (repeatable).", show_default=False)
    ] = None,
    seed: Annotated[int, typer.Option(help="Base seed; each rollout's seed derives from it.")] = 0,
    mode: Annotated[
        ModeChoice | None,
        typer.Option(
            help="chat applies the model's chat template; completion sends raw text "
            "[default: chat when the model has a chat template].",
            show_default=False,
        ),
    ] = None,
    system: Annotated[str | None, typer.Option(help="System prompt.")] = None,
    template: Annotated[
        str | None, typer.Option(help="Prompt template over fields, e.g. 'Q: {question}\\nA:'.")
    ] = None,
    prompt_field: Annotated[str | None, typer.Option(help="Prompt column.")] = None,
    answer_field: Annotated[str | None, typer.Option(help="Reference answer column.")] = None,
    id_field: Annotated[
        str | None, typer.Option(help="Id column [default: id/sample_id, else a content hash].")
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first K samples.")] = None,
    force_new: Annotated[
        bool, typer.Option(help="Discard a run directory made with other settings.")
    ] = False,
    chunk_size: Annotated[
        int, typer.Option(min=1, help="Prompts per engine call (and per shard).")
    ] = 256,
    tensor_parallel_size: Annotated[int, typer.Option(min=1, help="vLLM: GPUs per model.")] = 1,
    max_model_len: Annotated[int | None, typer.Option(help="vLLM: context length.")] = None,
    gpu_memory_utilization: Annotated[
        float | None,
        typer.Option(
            help="vLLM: memory share for the KV cache (on CPU: share of RAM) "
            "[default: 0.9 GPU, 0.2 CPU].",
            show_default=False,
        ),
    ] = None,
    dtype: Annotated[str, typer.Option(help="vLLM: weight dtype.")] = "auto",
    trust_remote_code: Annotated[bool, typer.Option(help="vLLM: allow model code.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
) -> None:
    """Run N rollouts per sample, grade them, and store every rollout (resumable)."""
    from curate.engine.evaluate import EvalOptions, evaluate
    from curate.engine.progress import make_progress

    engine_options: dict[str, object] = {}
    if backend == "vllm":
        engine_options = {
            "tensor_parallel_size": tensor_parallel_size,
            "max_model_len": max_model_len,
            "gpu_memory_utilization": gpu_memory_utilization,
            "dtype": dtype,
            "trust_remote_code": trust_remote_code,
        }
        engine_options = {k: v for k, v in engine_options.items() if v is not None}
    opts = EvalOptions(
        data=data,
        model=model,
        backend=backend,
        runs=runs,
        out=out,
        grader=grader,
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        stop=tuple(stop or ()),
        seed=seed,
        mode=mode.value if mode else None,  # type: ignore[arg-type]
        system=system,
        template=template,
        prompt_field=prompt_field,
        answer_field=answer_field,
        id_field=id_field,
        limit=limit,
        force_new=force_new,
        chunk_size=chunk_size,
        engine_options=engine_options,
    )
    outcome = evaluate(opts, progress=make_progress(quiet))
    r = outcome.result
    print(
        f"{outcome.run_dir}: {r.rollouts} new rollouts in {r.seconds:.1f}s "
        f"({r.skipped} already stored), {r.errors} errors, {r.truncated} truncated"
    )
    print(f"next: curate report {outcome.run_dir}")
