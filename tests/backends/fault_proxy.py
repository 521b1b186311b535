"""Test helpers for the OpenAI-compatible backend, all on loopback only:

- `FakeOpenAIServer`: a small OpenAI-compatible server (aiohttp) answering arithmetic
  questions, for fast unit tests; it can reject or ignore n > 1, reject `seed`, and
  require a key.
- `FaultProxy`: an HTTP proxy in front of any such server that injects a configurable
  share of faults (429 with and without Retry-After, 500, 503, dropped connections,
  stalls past the client's timeout, truncated JSON, bodies without choices) and counts
  each one it injects, so a test can compare that count with the client's retries
  (`assert_one_retry_per_fault`).
- `VLLMServer`: the real vLLM OpenAI-compatible server as a subprocess.

Each server runs its own asyncio loop in a daemon thread; start and stop wait a bounded time.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, ClientTimeout, web

LOOPBACK = "127.0.0.1"
FAULT_KINDS = (
    "429_retry_after",
    "429",
    "500",
    "503",
    "drop",
    "stall",
    "truncate",
    "no_choices",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


class _LoopServer:
    """An aiohttp application served on 127.0.0.1 from a background thread."""

    def __init__(self) -> None:
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def app(self) -> web.Application:  # pragma: no cover - overridden
        raise NotImplementedError

    async def on_start(self) -> None:
        """Hook: runs on the server's loop before it starts serving."""

    async def on_stop(self) -> None:
        """Hook: runs on the server's loop after it stops serving."""

    def start(self, timeout: float = 10.0) -> _LoopServer:
        self._thread = threading.Thread(target=self._serve, name=type(self).__name__, daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError(f"{type(self).__name__} did not start within {timeout}s")
        if self._error is not None:
            raise RuntimeError(f"{type(self).__name__} failed to start") from self._error
        return self

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._setup())
        except BaseException as exc:  # reported to start()
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._teardown())
            loop.close()

    async def _setup(self) -> None:
        await self.on_start()
        # Stalled handlers must not hold up shutdown for long.
        self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, LOOPBACK, 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = int(server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    async def _teardown(self) -> None:
        if self._runner is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._runner.cleanup(), timeout=5)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.on_stop(), timeout=5)

    def stop(self, timeout: float = 10.0) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --------------------------------------------------------------------------- fake server

_QUESTION = re.compile(r"What is (-?\d+) ([-+*]) (-?\d+)\?")


def arithmetic_answer(text: str) -> str | None:
    """The right answer to 'What is A op B?' somewhere in `text`."""
    m = _QUESTION.search(text)
    if not m:
        return None
    a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
    return str(a + b if op == "+" else a - b if op == "-" else a * b)


def default_answer(prompt: str, seed: int | None, index: int) -> str:
    """Right with probability 1/2, decided by (seed, index): deterministic per rollout."""
    right = arithmetic_answer(prompt) or "0"
    h = hashlib.blake2b(f"{seed}:{index}:{prompt}".encode(), digest_size=4).digest()
    return right if h[0] % 2 == 0 else str(int(right) + 1)


class FakeOpenAIServer(_LoopServer):
    """An OpenAI-compatible chat/completions server with scripted capabilities."""

    def __init__(
        self,
        *,
        models: Iterable[str] = ("fake-model",),
        api_key: str | None = None,
        reject_n: bool = False,
        ignore_n: bool = False,
        reject_seed: bool = False,
        want_max_completion_tokens: bool = False,
        latency_s: float | Callable[[str], float] = 0.0,
        answer: Callable[[str, int | None, int], str] = default_answer,
        max_prompt_chars: int | None = None,
        reject_all: str | None = None,
        content_filter: str | None = None,
        token_ids: bool = False,
    ) -> None:
        super().__init__()
        # As vLLM's server: every choice has a `token_ids` field, filled (one token per
        # character) when the request has `return_token_ids`.
        self.token_ids = token_ids
        self.models = set(models)
        self.api_key = api_key
        self.reject_n = reject_n
        self.ignore_n = ignore_n
        self.reject_seed = reject_seed
        self.want_max_completion_tokens = want_max_completion_tokens
        self.latency_s = latency_s
        self.answer = answer
        # A prompt longer than this gets vLLM's 400 for a prompt past the context.
        self.max_prompt_chars = max_prompt_chars
        # Every request gets a 400 with this message (say, an unknown parameter).
        self.reject_all = reject_all
        # Prompts containing this are answered as if a content filter stopped them.
        self.content_filter = content_filter
        self.bodies: list[dict[str, Any]] = []
        self.statuses: Counter[int] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.auth_headers: list[str] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/health", self._health)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        return app

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    def _reject(self, status: int, message: str) -> web.Response:
        self.statuses[status] += 1
        body = {"error": {"message": message, "type": "invalid_request_error", "code": status}}
        return web.json_response(body, status=status)

    async def _handle(self, request: web.Request, chat: bool) -> web.Response:
        self.auth_headers.append(request.headers.get("Authorization", ""))
        body = await request.json()
        self.bodies.append(body)
        if self.api_key is not None and request.headers.get("Authorization") != (
            f"Bearer {self.api_key}"
        ):
            return self._reject(401, "Invalid API key")
        if body.get("model") not in self.models:
            return self._reject(404, f"The model `{body.get('model')}` does not exist.")
        n = int(body.get("n") or 1)
        if n > 1 and self.reject_n:
            return self._reject(400, "n must be 1 for this endpoint")
        if "seed" in body and self.reject_seed:
            return self._reject(400, "Unsupported parameter: 'seed'")
        if "max_tokens" in body and self.want_max_completion_tokens:
            return self._reject(
                400,
                "Unsupported parameter: 'max_tokens' is not supported "
                "with this model. Use 'max_completion_tokens' instead.",
            )
        if chat:
            prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
        else:
            prompt = str(body["prompt"])
        if self.reject_all is not None:
            return self._reject(400, self.reject_all)
        if self.max_prompt_chars is not None and len(prompt) > self.max_prompt_chars:
            return self._reject(
                400,
                f"This model's maximum context length is {self.max_prompt_chars} tokens. "
                f"However, your request has {len(prompt)} input tokens. Please reduce the "
                "length of the input messages.",
            )
        filtered = self.content_filter is not None and self.content_filter in prompt
        delay = self.latency_s(prompt) if callable(self.latency_s) else self.latency_s
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if delay:
                await asyncio.sleep(delay)
        finally:
            self.in_flight -= 1
        seed = body.get("seed")
        count = 1 if self.ignore_n else n
        texts = [self.answer(prompt, seed, i) for i in range(count)]
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        choices: list[dict[str, Any]] = []
        used = 0  # one token per character
        for i, text in enumerate(texts):
            finish = "stop"
            if len(text) > max_tokens:
                text, finish = text[:max_tokens], "length"
            if filtered:
                text, finish = "", "content_filter"
            used += len(text)
            extra: dict[str, Any] = {}
            if self.token_ids:
                extra["token_ids"] = (
                    [ord(ch) for ch in text] if body.get("return_token_ids") else None
                )
            if chat:
                choices.append(
                    {
                        "index": i,
                        "message": {"role": "assistant", "content": None if filtered else text},
                        "finish_reason": finish,
                        **extra,
                    }
                )
            else:
                choices.append({"index": i, "text": text, "finish_reason": finish, **extra})
        usage = {
            "prompt_tokens": len(prompt),
            "completion_tokens": used,
            "total_tokens": len(prompt) + used,
        }
        self.statuses[200] += 1
        return web.json_response(
            {
                "id": "cmpl-fake",
                "object": "chat.completion" if chat else "text_completion",
                "model": body["model"],
                "choices": choices,
                "usage": usage,
            }
        )

    async def _chat(self, request: web.Request) -> web.Response:
        return await self._handle(request, chat=True)

    async def _completions(self, request: web.Request) -> web.Response:
        return await self._handle(request, chat=False)


# --------------------------------------------------------------------------- fault proxy


def is_generation(request: web.Request) -> bool:
    """A chat or text completion request (what a rollout costs)."""
    return request.method == "POST" and request.path.rstrip("/").endswith("completions")


class FaultProxy(_LoopServer):
    """Forwards /v1/* to `upstream`, replacing a share of requests with faults.

    `shares` maps a kind from FAULT_KINDS to the probability that a request gets it.
    A request body (identical across its retries) gets at most `max_faults_per_body`
    faults, so every rollout goes through while the client's retries last. Bodies
    containing one of `fail_forever`'s strings always get a 503 (counted apart, in
    `persistent`); `recover()` ends that. `injected` counts every other fault by kind.
    """

    def __init__(
        self,
        upstream: str,
        *,
        shares: dict[str, float] | None = None,
        seed: int = 0,
        max_faults_per_body: int = 2,
        stall_s: float = 5.0,
        retry_after: str = "1",
        fail_forever: Iterable[str] = (),
        reject_n: bool = False,
        delay_s: float = 0.0,
    ) -> None:
        super().__init__()
        unknown = set(shares or {}) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds: {sorted(unknown)}")
        self.upstream = upstream.rstrip("/")
        self.shares = dict(shares or {})
        self.rng = random.Random(seed)
        self.max_faults_per_body = max_faults_per_body
        self.stall_s = stall_s
        self.retry_after = retry_after
        self.fail_forever = list(fail_forever)
        self.reject_n = reject_n
        self.delay_s = delay_s  # added to every forwarded request (to slow a run down)
        # (monotonic time, rollouts) of every completion handed back to the client.
        self.completed: list[tuple[float, int]] = []
        self.injected: Counter[str] = Counter()
        self.persistent = 0
        self.rejected_n = 0
        # Generation requests (POST .../completions) only: the context check's probes of
        # /v1/models and /tokenize are not what the tests count.
        self.forwarded = 0
        self.requests = 0
        self._per_body: Counter[str] = Counter()
        self._session: ClientSession | None = None

    @property
    def total_injected(self) -> int:
        return sum(self.injected.values())

    def recover(self) -> None:
        """Stop failing the `fail_forever` requests (and inject nothing from now on)."""
        self.fail_forever = []
        self.shares = {}

    def app(self) -> web.Application:
        app = web.Application(client_max_size=16 * 1024**2)
        app.router.add_route("*", "/{tail:.*}", self._proxy)
        return app

    async def on_start(self) -> None:
        self._session = ClientSession(timeout=ClientTimeout(total=120))

    async def on_stop(self) -> None:
        if self._session is not None:
            await self._session.close()

    def _pick(self, key: str) -> str | None:
        if self._per_body[key] >= self.max_faults_per_body:
            return None
        roll = self.rng.random()
        for kind in FAULT_KINDS:
            share = self.shares.get(kind, 0.0)
            if roll < share:
                self._per_body[key] += 1
                return kind
            roll -= share
        return None

    async def _proxy(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        if is_generation(request):
            self.requests += 1
        text = raw.decode("utf-8", "replace")
        if request.method == "POST" and any(s in text for s in self.fail_forever):
            self.persistent += 1
            return web.json_response({"error": {"message": "injected outage"}}, status=503)
        if self.reject_n and request.method == "POST":
            with contextlib.suppress(ValueError):
                if int(json.loads(raw).get("n") or 1) > 1:
                    self.rejected_n += 1
                    return web.json_response(
                        {"error": {"message": "n must be 1", "type": "invalid_request_error"}},
                        status=400,
                    )
        kind = self._pick(hashlib.sha1(raw).hexdigest()) if request.method == "POST" else None
        if kind is not None:
            self.injected[kind] += 1
        if kind == "429_retry_after":
            return web.json_response(
                {"error": {"message": "rate limited"}},
                status=429,
                headers={"Retry-After": self.retry_after},
            )
        if kind == "429":
            return web.json_response({"error": {"message": "rate limited"}}, status=429)
        if kind in ("500", "503"):
            return web.Response(status=int(kind), text="injected server error")
        if kind == "drop":
            return self._drop(request)
        if kind == "stall":
            await asyncio.sleep(self.stall_s)
            return self._drop(request)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        status, headers, body = await self._forward(request, raw)
        if kind is None and status == 200:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                self.completed.append((time.monotonic(), len(json.loads(body)["choices"])))
        if kind == "truncate" and status == 200:
            body = body[: max(1, len(body) // 2)]
        elif kind == "no_choices" and status == 200:
            data = json.loads(body)
            data["choices"] = []
            body = json.dumps(data).encode()
        return web.Response(status=status, body=body, headers=headers)

    def _drop(self, request: web.Request) -> web.Response:
        # Close the socket without a response: the client sees a reset connection.
        if request.transport is not None:
            request.transport.close()
        return web.Response(status=499)

    async def _forward(self, request: web.Request, raw: bytes) -> tuple[int, dict[str, str], bytes]:
        assert self._session is not None
        if is_generation(request):
            self.forwarded += 1
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() in ("authorization", "content-type", "accept")
        }
        async with self._session.request(
            request.method, f"{self.upstream}{request.rel_url}", data=raw, headers=headers
        ) as resp:
            body = await resp.read()
            keep = {
                k: v
                for k, v in resp.headers.items()
                if k.lower() in ("content-type", "retry-after")
            }
            return resp.status, keep, body


def assert_one_retry_per_fault(stats: Any, proxy: FaultProxy) -> None:
    """The client retried each fault `proxy` injected once, counted in its
    `BackendStats.retries` under the cause the fault stands for."""
    inj = proxy.injected
    assert stats.total_retries == proxy.total_injected, (stats.retries, inj)
    want = {
        "rate_limit": inj["429"] + inj["429_retry_after"],
        "server_error": inj["500"] + inj["503"],
        "timeout": inj["stall"],
        "connection": inj["drop"],
        "malformed": inj["truncate"] + inj["no_choices"],
    }
    got = {cause: stats.retries[cause] for cause in want}
    assert got == want, (got, inj)


# --------------------------------------------------------------------------- vLLM server


class VLLMServer:
    """`python -m vllm.entrypoints.openai.api_server` on the bundled tiny model."""

    def __init__(
        self,
        model: str | Path,
        *,
        api_key: str | None = None,
        max_model_len: int = 256,
        log_path: Path | None = None,
    ) -> None:
        self.model = str(model)
        self.api_key = api_key
        self.port = free_port()
        # The tiny model's positions may be fewer than 256: never ask for more.
        with contextlib.suppress(OSError, ValueError, KeyError):
            config = json.loads((Path(model) / "config.json").read_text())
            max_model_len = min(max_model_len, int(config["max_position_embeddings"]))
        self.max_model_len = max_model_len
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            self.model,
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
            "--gpu-memory-utilization",
            "0.05",
            # On CPU that share of RAM is computed minus the server's own footprint, which
            # can leave nothing for the KV cache; a fixed size (ample for this model) cannot.
            "--kv-cache-memory-bytes",
            str(256 * 1024**2),
            "--max-model-len",
            str(self.max_model_len),
            "--dtype",
            "float32",
            "--max-num-seqs",
            "128",
            # Per-request seeds use a torch.Generator that vLLM rewinds when a prefill is
            # chunked, which CPU generators cannot do: a token budget that fits every
            # running sequence at full length means prefills are never chunked.
            "--max-num-batched-tokens",
            str(128 * self.max_model_len),
            "--enforce-eager",
        ]
        if self.api_key is not None:
            cmd += ["--api-key", self.api_key]
        return cmd

    def start(self, timeout: float = 240.0) -> VLLMServer:
        env = {**os.environ, "VLLM_LOGGING_LEVEL": "WARNING", "TOKENIZERS_PARALLELISM": "false"}
        out = open(self.log_path, "wb") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            self.command(),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: teardown kills engine workers too
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"vLLM server exited with {self.proc.returncode} during start-up"
                    + (f" (log: {self.log_path})" if self.log_path else "")
                )
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp,
            ):
                if resp.status == 200:
                    return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"vLLM server not healthy within {timeout:.0f}s")

    def stop(self, timeout: float = 20.0) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
