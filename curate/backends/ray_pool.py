"""K replicas of a curate backend on a Ray cluster, started once and kept for the run.

`open_ray_pool("vllm", model, options, RayPoolOptions(...))` yields a streaming
backend over `replicas` Ray actors, each holding one curate backend (for vLLM:
`curate.backends.vllm_local`, the same code as the single-process path, so seeds,
sampling and finish reasons are the same). The actors start with the first `stream()`
call and live until the pool closes, so the rounds of an adaptive run (one `stream()`
each) share one start of the engines. Each call cuts its requests into batches and
keeps every replica fed (a replica that finishes early takes the next batch);
finished batches reach the driver in completion order, where the runner grades and
stores them exactly as it does a local stream (resume, the settings check, adaptive
rounds and the reports are unchanged).

A replica that dies (a crash, a lost node) is restarted by Ray and the batches it held
are retried there: the actors are created with `max_restarts=-1` and
`max_task_retries=-1`. Retried requests carry the same seeds, and a batch reaches the
driver only once it is finished, so nothing is lost or doubled; if Ray gives up, the
stream fails, what reached the driver is stored, and the same command resumes.

Ray's own lines on the driver (a worker that died, a task that will be retried: the
"(raylet)" lines) go where the engines' output goes (`RUN/engine.log` under
`engine_output_to`), never to curate's own streams; see `ray_lines_to_engine_output`.

Ray is imported only when a pool is opened: `curate --help` never loads it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from curate.backends.base import (
    BackendInfo,
    Generation,
    GenerationRequest,
    Mode,
    SamplingConfig,
)
from curate.backends.options import BackendOptions
from curate.backends.registry import open_backend
from curate.errors import MissingExtraError, RunError, UsageError, one_line

log = logging.getLogger(__name__)

# Requests per batch, at most: a batch is one engine call in one replica and the unit
# of retry, so a killed replica redoes at most this many.
MAX_BATCH_REQUESTS = 256
# Batches per replica a stream is cut into, at least (when there are enough requests):
# a replica that finishes early takes the next batch, so the replicas end together.
BATCHES_PER_REPLICA = 4
# CPUs a replica reserves on a cluster without GPUs. A fraction: on a small machine
# (2 cores here), replicas holding a whole CPU each leave none for the driver's small
# Ray tasks (reading the model's info on the cluster), which then wait forever. (What
# an engine really uses is up to the engine.)
CPU_REPLICA_CPUS = 0.5
# Batches a replica holds at once: one on its engine, the next queued behind it.
QUEUED_BATCHES = 2
# How long the stream waits for a batch before yielding a heartbeat (None), so the
# runner can flush what it holds.
HEARTBEAT_S = 1.0
# Test-only fault hook: the path of an "armed" file holding a number k. The replica
# whose k-th batch call finds the file armed takes it (an atomic rename, so exactly
# one replica does) and exits at once, as a crash would.
EXIT_HOOK_ENV = "CURATE_TEST_REPLICA_EXIT"
# How long a closing pool waits for its replicas to stop their engines: after a
# finished run, and after an error or Ctrl-C (when a replica may be mid-batch).
REPLICA_EXIT_S = 60.0
REPLICA_EXIT_AFTER_ERROR_S = 10.0


@dataclass(frozen=True)
class RayPoolOptions:
    """Where the pool runs and how big it is."""

    address: str = "auto"  # auto: RAY_ADDRESS, a running local cluster, else a new one
    replicas: int = 1
    gpus_per_replica: float | None = None  # None: tensor_parallel_size if the cluster has GPUs
    cpus_per_replica: float | None = None  # None: 1 with GPUs, CPU_REPLICA_CPUS without
    batch_requests: int | None = None  # None: see batch_size_for

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise UsageError(f"--replicas must be at least 1, not {self.replicas}")
        if self.gpus_per_replica is not None and self.gpus_per_replica < 0:
            raise UsageError("--gpus-per-replica must be at least 0")
        if self.cpus_per_replica is not None and self.cpus_per_replica <= 0:
            raise UsageError("--cpus-per-replica must be above 0")


@dataclass(frozen=True)
class BatchTiming:
    """When a replica's engine worked on one batch (its clock), and its rollouts."""

    started: float
    finished: float
    rollouts: int


def batch_size_for(requests: int, replicas: int, cap: int | None = None) -> int:
    """Requests per batch: about BATCHES_PER_REPLICA batches per replica, at most
    MAX_BATCH_REQUESTS (or `cap`), at least 1."""
    share = -(-requests // max(1, replicas * BATCHES_PER_REPLICA))
    return max(1, min(cap or MAX_BATCH_REQUESTS, share))


# -- what crosses the wire ---------------------------------------------------------


def encode_requests(requests: Sequence[GenerationRequest]) -> list[dict[str, Any]]:
    """Rows of a batch: one per request, the prompt as JSON (text or messages)."""
    return [
        {
            "index": i,
            "sample_id": r.sample_id,
            "prompt": json.dumps(r.prompt),
            "n": r.n,
            "first_run": r.first_run,
            "seed": -1 if r.seed is None else r.seed,
        }
        for i, r in enumerate(requests)
    ]


def decode_requests(batch: dict[str, list[Any]]) -> tuple[list[int], list[GenerationRequest]]:
    """(indices, requests) from a batch of `encode_requests` rows (column -> values)."""
    requests = [
        GenerationRequest(
            sample_id=str(sid),
            prompt=json.loads(prompt),
            n=int(n),
            first_run=int(first),
            seed=None if int(seed) < 0 else int(seed),
        )
        for sid, prompt, n, first, seed in zip(
            batch["sample_id"],
            batch["prompt"],
            batch["n"],
            batch["first_run"],
            batch["seed"],
            strict=True,
        )
    ]
    return [int(i) for i in batch["index"]], requests


# One list column per Generation field: a row holds one request's generations.
GENERATION_FIELDS = tuple(f.name for f in dataclasses.fields(Generation))


def encode_generations(
    indices: Sequence[int], generations: Sequence[Sequence[Generation]]
) -> dict[str, list[Any]]:
    """Columns for the driver: `index`, then one list per Generation field."""
    columns: dict[str, list[Any]] = {"index": list(indices)}
    for name in GENERATION_FIELDS:
        columns[name] = [[getattr(g, name) for g in gens] for gens in generations]
    return columns


def decode_generations(columns: dict[str, list[Any]]) -> Iterator[tuple[int, list[Generation]]]:
    """(request index, its generations) for each row of an `encode_generations` batch."""
    fields = [columns[name] for name in GENERATION_FIELDS]
    for row, index in enumerate(columns["index"]):
        values = [f[row] for f in fields]
        yield int(index), [Generation(*g) for g in zip(*values, strict=True)]


# -- the replica: one backend in one Ray actor ---------------------------------------


class Replica:
    """One curate backend in one Ray actor (`ray.remote(Replica)`): opened when the
    actor starts (again after a restart), answering batches of encoded requests with
    their encoded generations until `stop()`."""

    def __init__(self, backend: str, model: str, options: BackendOptions, seed: int) -> None:
        self._calls = 0
        self._stack = contextlib.ExitStack()
        self._backend = self._stack.enter_context(open_backend(backend, model, options, seed=seed))

    def generate(
        self, rows: list[dict[str, Any]], sampling: dict[str, Any], mode: Mode
    ) -> dict[str, list[Any]]:
        self._calls += 1
        _maybe_exit(self._calls)
        columns = {key: [row[key] for row in rows] for key in rows[0]}
        indices, requests = decode_requests(columns)
        config = SamplingConfig(**{**sampling, "stop": tuple(sampling["stop"])})
        started = time.time()
        generations = self._backend.generate(requests, config, mode)
        answer = encode_generations(indices, generations)
        # Which engine process answered (a restart is a new one) and when it worked
        # on the batch (the pool's generation rate).
        answer["replica"] = [_replica_id()] * len(indices)
        answer["busy"] = [[started, time.time()]] * len(indices)
        return answer

    def stop(self) -> None:
        """Stop the engine cleanly (before the actor is killed)."""
        self._stack.close()


def _replica_id() -> str:
    """ "actor:pid": the actor id stays across restarts, the process does not."""
    import ray

    return f"{ray.get_runtime_context().get_actor_id()}:{os.getpid()}"


def _maybe_exit(calls: int) -> None:
    """The test-only fault hook (EXIT_HOOK_ENV)."""
    armed = os.environ.get(EXIT_HOOK_ENV)
    if not armed or not os.path.exists(armed):
        return
    try:
        with open(armed, encoding="utf-8") as f:
            at = int(f.read().strip() or 1)
    except (OSError, ValueError):
        return
    if calls < at:
        return
    try:
        os.rename(armed, armed + ".fired")
    except OSError:
        return  # another replica took it
    os._exit(17)


def _describe(backend: str, model: str, options: BackendOptions, seed: int) -> BackendInfo:
    """A backend's info without starting it where that is possible (vLLM: the
    tokenizer only), run on the cluster where the backend is installed."""
    if backend == "vllm":
        from curate.backends.vllm_local import describe

        return describe(model, options)  # type: ignore[arg-type]

    with open_backend(backend, model, options, seed=seed) as opened:
        return opened.info()


# -- the driver side -------------------------------------------------------------


class RayPoolBackend:
    """A StreamingBackend over K replicas; build it with `open_ray_pool`, which stops
    the replicas when it closes."""

    def __init__(
        self,
        backend: str,
        model: str,
        options: BackendOptions,
        pool: RayPoolOptions,
        seed: int,
        info: BackendInfo,
        resources: dict[str, float],
    ) -> None:
        self.backend = backend
        self.model = model
        self.options = options
        self.pool = pool
        self.seed = seed
        self._info = info
        gpus = pool.gpus_per_replica
        if gpus is None:
            gpus = float(getattr(options, "tensor_parallel_size", 1)) if resources.get("GPU") else 0
        cpus = pool.cpus_per_replica
        if cpus is None:
            cpus = 1.0 if gpus else CPU_REPLICA_CPUS
        self.gpus, self.cpus = gpus, cpus
        self._actors: list[Any] = []
        # How often this pool created its replicas (1 once it has run: the rounds of an
        # adaptive run share them), and every engine process that answered ("actor:pid";
        # a restarted replica adds one).
        self.pool_starts = 0
        self.replica_processes: set[str] = set()
        # Every batch the replicas answered, for the figures (bench_ray.py).
        self.batches: list[BatchTiming] = []

    def info(self) -> BackendInfo:
        return self._info

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig, mode: Mode
    ) -> list[list[Generation]]:
        out: list[list[Generation] | None] = [None] * len(requests)
        for item in self.stream(requests, sampling, mode):
            if item is not None:
                out[item[0]] = item[1]
        return [g if g is not None else [] for g in out]

    def _replicas(self) -> list[Any]:
        """The pool's actors, created on first use."""
        if not self._actors:
            import ray

            resources: dict[str, Any] = {"num_cpus": self.cpus}
            if self.gpus:
                resources["num_gpus"] = self.gpus
            actor = ray.remote(Replica).options(  # type: ignore[attr-defined]
                max_restarts=-1, max_task_retries=-1, **resources
            )
            self._actors = [
                actor.remote(self.backend, self.model, self.options, self.seed)
                for _ in range(self.pool.replicas)
            ]
            self.pool_starts += 1
        return self._actors

    def stream(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig, mode: Mode
    ) -> Iterator[tuple[int, list[Generation]] | None]:
        """Each request's generations as its batch finishes, in completion order;
        None every HEARTBEAT_S while nothing arrives."""
        if not requests:
            return
        import ray

        actors = self._replicas()
        size = batch_size_for(len(requests), len(actors), self.pool.batch_requests)
        rows = encode_requests(requests)
        waiting = [rows[i : i + size] for i in range(0, len(rows), size)]
        waiting.reverse()  # popped from the end: the first batch first
        settings = sampling.as_dict()
        busy = [0] * len(actors)
        running: dict[Any, int] = {}  # batch result -> its replica

        def feed() -> None:
            # Every replica holds up to QUEUED_BATCHES: one on its engine, the next
            # ready, so no replica waits for the driver between batches.
            while waiting:
                i = min(range(len(actors)), key=busy.__getitem__)
                if busy[i] >= QUEUED_BATCHES:
                    return
                ref = actors[i].generate.remote(waiting.pop(), settings, mode)
                running[ref] = i
                busy[i] += 1

        seen: set[int] = set()
        try:
            feed()
            while running:
                done, _ = ray.wait(list(running), num_returns=1, timeout=HEARTBEAT_S)
                if not done:
                    yield None
                    continue
                busy[running.pop(done[0])] -= 1
                feed()
                try:
                    columns = ray.get(done[0])
                except Exception as exc:
                    cause = getattr(exc, "cause", None) or exc
                    raise RunError(f"the Ray pool failed: {one_line(cause)}") from exc
                self.replica_processes.update(columns.pop("replica"))
                spans = columns.pop("busy")
                if spans:
                    rollouts = sum(len(texts) for texts in columns["text"])
                    self.batches.append(BatchTiming(spans[0][0], spans[0][1], rollouts))
                for index, gens in decode_generations(columns):
                    if index in seen:  # never expected: a retried batch that also returned
                        continue
                    seen.add(index)
                    yield index, gens
        finally:
            # Stopped early (an error, Ctrl-C): drop the batches not started yet, so
            # the replicas are free for the next call or for stopping.
            for ref in running:
                with contextlib.suppress(Exception):
                    ray.cancel(ref)
        if len(seen) != len(requests):
            raise RunError(
                f"the Ray pool returned {len(seen)} of {len(requests)} requests; "
                "run the same command again to fill in the rest"
            )

    def close(self, timeout: float = REPLICA_EXIT_S) -> None:
        """Stop the replicas' engines (waiting up to `timeout`), then end the actors.
        A replica killed while its engine runs can leave the engine's processes
        behind, busy: hence the clean stop first."""
        if not self._actors:
            return
        import ray

        actors, self._actors = self._actors, []
        stops = [actor.stop.remote() for actor in actors]
        _, late = ray.wait(stops, num_returns=len(stops), timeout=timeout)
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        if late:
            log.warning(
                "%d Ray replica(s) had not stopped their engines after %.0f s; killed",
                len(late),
                timeout,
            )


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise MissingExtraError(
            "--ray needs Ray: pip install 'curate[ray]' (or `make setup`)"
        ) from exc
    return ray


def connect(address: str) -> bool:
    """Join the Ray cluster at `address` ("auto": RAY_ADDRESS, a running local cluster,
    else a new local one). True when this call started or joined it (and so should
    leave it), False when the process was already connected."""
    ray = _import_ray()
    if ray.is_initialized():
        return False
    try:
        ray.init(
            address=None if address == "auto" else address,
            include_dashboard=False,
            # The replicas' own output comes to the driver, printed through Ray's
            # printer, which ray_lines_to_engine_output sends to the engine log.
            log_to_driver=True,
            logging_level=logging.WARNING,
        )
    except Exception as exc:
        raise RunError(f"could not join the Ray cluster at {address!r}: {one_line(exc)}") from exc
    return True


@contextlib.contextmanager
def ray_lines_to_engine_output() -> Iterator[None]:
    """What Ray prints on the driver goes to file descriptor 2 until the block ends.

    Ray prints two kinds of lines on the driver, both through one function of its
    own (`print_to_stdstream` in `ray._private.worker`) and to whatever `sys.stdout`
    or `sys.stderr` is at that moment, which is curate's terminal: its system lines
    ("(raylet) A worker died or was killed ...", "(raylet) Task ... will be retried"),
    from a thread every `ray.init` starts whatever `log_to_driver` says, and, with
    `log_to_driver`, the workers' own output (the replicas' engines). Under
    `engine_output_to(RUN/engine.log)` descriptor 2 is the engine log, where the
    driver's other Ray output (its C++ core worker's lines, Ray's logger, set up while
    the pool starts) goes too; outside it (no engine log) the lines reach the terminal
    as they would without curate. The function is a module global that the system
    thread looks up at each call and that `ray.init` binds for the workers' output:
    replaced here before `ray.init`, restored after `ray.shutdown`. A failure that
    matters still reaches the user as curate's own one line (a RunError)."""
    import ray._private.worker as ray_worker

    original = getattr(ray_worker, "print_to_stdstream", None)
    if original is None:  # another Ray: nothing to reroute (tests/cli would notice)
        yield
        return

    events = getattr(ray_worker, "filter_autoscaler_events", None)

    def to_fd2(data: dict[str, Any], ignore_prefix: bool = False) -> None:
        source = data.get("pid")
        lines = data.get("lines", ())
        if source == "autoscaler":
            # Its events only, as Ray prints them (the rest is a status dump a second);
            # none when Ray cannot tell (no cluster to ask).
            try:
                lines = list(events(lines)) if events is not None else []
            except Exception:
                lines = []
        if source in ("raylet", "autoscaler"):
            prefix = f"({source}) "
        else:
            name = data.get("actor_name") or data.get("task_name") or "worker"
            prefix = f"({name} pid={source}) "
        text = "".join(f"{prefix}{line}\n" for line in lines)
        with contextlib.suppress(OSError):
            os.write(2, text.encode("utf-8", errors="replace"))

    ray_worker.print_to_stdstream = to_fd2
    try:
        yield
    finally:
        ray_worker.print_to_stdstream = original


@contextlib.contextmanager
def open_ray_pool(
    backend: str,
    model: str,
    options: BackendOptions,
    pool: RayPoolOptions,
    *,
    seed: int = 0,
) -> Iterator[RayPoolBackend]:
    """Join (or start) the cluster, read the backend's info on it, yield the pool;
    its replicas start with the first batch and stop when the block ends."""
    with contextlib.ExitStack() as stack:
        ray = _import_ray()
        stack.enter_context(ray_lines_to_engine_output())
        if connect(pool.address):
            stack.callback(ray.shutdown)
        resources = {k: float(v) for k, v in ray.cluster_resources().items()}
        describe = ray.remote(num_cpus=0.01)(_describe)
        try:
            info = ray.get(describe.remote(backend, model, options, seed))
        except Exception as exc:
            cause = getattr(exc, "cause", None) or exc
            raise RunError(f"the Ray cluster could not load {model}: {one_line(cause)}") from exc
        info = dataclasses.replace(
            info,
            extra={
                **info.extra,
                "executor": "ray",
                "replicas": pool.replicas,
                "ray_version": ray.__version__,
                "ray_cluster": {k: resources[k] for k in ("CPU", "GPU") if k in resources},
            },
        )
        opened = RayPoolBackend(backend, model, options, pool, seed, info, resources)
        try:
            yield opened
        except BaseException:
            opened.close(REPLICA_EXIT_AFTER_ERROR_S)
            raise
        opened.close()
