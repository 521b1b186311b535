"""K replicas of a curate backend on a Ray cluster, fed through Ray Data.

`open_ray_pool("vllm", model, options, RayPoolOptions(...))` yields a streaming
backend: each `stream()` call turns the requests into a Ray Dataset, and
`map_batches` sends batches of them to a pool of `replicas` actors (`concurrency=K`),
each holding one curate backend (for vLLM: `curate.backends.vllm_local`, the same
code as the single-process path, so seeds, sampling and finish reasons are the
same). Finished batches stream back to the driver in completion order; the runner
grades and stores them exactly as it does a local stream (resume, the settings
check, adaptive rounds and the reports are unchanged).

A replica that dies (a crash, a lost node) is restarted by Ray and its batch is
retried there: Ray Data creates its actors with `max_restarts=-1` and
`max_task_retries=-1`. Retried requests carry the same seeds, and a batch reaches the
driver only once it is finished, so nothing is lost or doubled; if Ray gives up, the
stream fails, what reached the driver is stored, and the same command resumes.

Ray is imported only when a pool is opened: `curate --help` never loads it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

# Requests per batch, at most: a batch is one engine call in one replica and the unit
# of retry, so a killed replica redoes at most this many.
MAX_BATCH_REQUESTS = 256
# Batches per replica a stream is cut into, at least (when there are enough requests):
# a replica that finishes early takes the next batch, so the replicas end together.
BATCHES_PER_REPLICA = 4
# CPUs a replica reserves on a cluster without GPUs. A fraction: on a small machine,
# actors holding a whole CPU each leave none for Ray Data's own tasks and the
# pipeline waits forever. (What an engine really uses is up to the engine.)
CPU_REPLICA_CPUS = 0.5
# How long the stream waits for a batch before yielding a heartbeat (None), so the
# runner can flush what it holds.
HEARTBEAT_S = 1.0
# Test-only fault hook: the path of an "armed" file holding a number k. The replica
# whose k-th batch call finds the file armed takes it (an atomic rename, so exactly
# one replica does) and exits at once, as a crash would.
EXIT_HOOK_ENV = "CURATE_TEST_REPLICA_EXIT"
# How long a finished stream waits for its replicas to stop their engines.
REPLICA_EXIT_S = 60.0


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
    """Rows of a Ray Dataset: one per request, the prompt as JSON (text or messages)."""
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
    """Ray Data's callable class: opens one curate backend when the actor starts and
    answers batches of encoded requests with their encoded generations."""

    def __init__(
        self,
        backend: str,
        model: str,
        options: BackendOptions,
        seed: int,
        sampling: dict[str, Any],
        mode: Mode,
    ) -> None:

        self._sampling = SamplingConfig(**{**sampling, "stop": tuple(sampling["stop"])})
        self._mode: Mode = mode
        self._calls = 0
        self._where = f"{_node_id()}:{os.getpid()}"
        self._stack = contextlib.ExitStack()
        self._backend = self._stack.enter_context(open_backend(backend, model, options, seed=seed))

    def __call__(self, batch: pa.Table) -> pa.Table:
        import pyarrow as pa

        self._calls += 1
        _maybe_exit(self._calls)
        indices, requests = decode_requests(batch.to_pydict())
        started = time.time()
        generations = self._backend.generate(requests, self._sampling, self._mode)
        columns = encode_generations(indices, generations)
        # Who answered (the driver waits for these processes to stop their engines),
        # and when the engine worked on the batch (the pool's generation rate).
        columns["replica"] = [self._where] * len(indices)
        columns["busy"] = [[started, time.time()]] * len(indices)
        return pa.table(columns)

    def __del__(self) -> None:
        # Ray Data drops its actors when a stream ends: stop the engine cleanly.
        with contextlib.suppress(Exception):
            self._stack.close()


def _node_id() -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id())


def _wait_pids(pids: list[int], timeout: float) -> list[int]:
    """Wait until these processes of this node have exited; those still running."""
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive:
        alive = [pid for pid in alive if _running(pid)]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return alive


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_for_replicas(replicas: set[str], timeout: float = REPLICA_EXIT_S) -> list[str]:
    """Wait for replica processes ("node:pid") to exit, each on its own node; the
    ones still running after `timeout`. Ray Data lets a finished pool's actors go
    gracefully (each stops its engine in `Replica.__del__`), but ending the job or
    the cluster before they are done kills them, and a killed replica can leave its
    engine's processes behind, busy."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    by_node: dict[str, list[int]] = {}
    for where in replicas:
        node, _, pid = where.rpartition(":")
        by_node.setdefault(node, []).append(int(pid))
    wait = ray.remote(num_cpus=0)(_wait_pids)
    refs = {
        node: wait.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
        ).remote(pids, timeout)
        for node, pids in by_node.items()
    }
    left: list[str] = []
    for node, ref in refs.items():
        try:
            left += [f"{node}:{pid}" for pid in ray.get(ref, timeout=timeout + 30)]
        except Exception:  # a lost node: nothing to wait for there
            continue
    return left


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
    """A StreamingBackend over K replicas; build it with `open_ray_pool`."""

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

    def stream(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig, mode: Mode
    ) -> Iterator[tuple[int, list[Generation]] | None]:
        """Each request's generations as its batch finishes, in completion order;
        None every HEARTBEAT_S while nothing arrives."""
        if not requests:
            return
        import ray.data

        size = batch_size_for(len(requests), self.pool.replicas, self.pool.batch_requests)
        rows = encode_requests(requests)
        dataset = ray.data.from_items(rows, override_num_blocks=-(-len(rows) // size))
        remote_args: dict[str, Any] = {"num_cpus": self.cpus}
        if self.gpus:
            remote_args["num_gpus"] = self.gpus
        results = dataset.map_batches(
            Replica,
            fn_constructor_kwargs={
                "backend": self.backend,
                "model": self.model,
                "options": self.options,
                "seed": self.seed,
                "sampling": sampling.as_dict(),
                "mode": mode,
            },
            batch_size=size,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=self.pool.replicas),
            **remote_args,
        )
        seen: set[int] = set()
        replicas: set[str] = set()
        batches = results.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=0)
        try:
            for batch in _background(batches):
                if batch is None:
                    yield None
                    continue
                columns = batch.to_pydict()
                replicas.update(columns.pop("replica"))
                busy = columns.pop("busy")
                if busy:
                    done = sum(len(texts) for texts in columns["text"])
                    self.batches.append(BatchTiming(busy[0][0], busy[0][1], done))
                for index, gens in decode_generations(columns):
                    if index in seen:  # never expected: a retried batch that also returned
                        continue
                    seen.add(index)
                    yield index, gens
        finally:
            del batches, results, dataset
        # Only a pool that ran to the end lets its replicas go gracefully; after an
        # error or Ctrl-C the pipeline may still hold them, and waiting would hang.
        # Heartbeats meanwhile, so the runner writes the last batches without waiting.
        left: list[str] = []
        if replicas:
            waiting = threading.Thread(target=lambda: left.extend(wait_for_replicas(replicas)))
            waiting.start()
            while waiting.is_alive():
                waiting.join(HEARTBEAT_S)
                yield None
        if left:
            log.warning("Ray replicas still running after %.0f s: %s", REPLICA_EXIT_S, left)
        if len(seen) != len(requests):
            raise RunError(
                f"the Ray pool returned {len(seen)} of {len(requests)} requests; "
                "run the same command again to fill in the rest"
            )


_END = object()


def _background(batches: Iterable[Any]) -> Iterator[Any]:
    """Iterate `batches` on a thread; yield None every HEARTBEAT_S while none arrives.
    An exception in the iteration is raised here."""
    box: queue.Queue[Any] = queue.Queue(maxsize=8)
    stop = threading.Event()

    def pump() -> None:
        try:
            for batch in batches:
                while not stop.is_set():
                    try:
                        box.put(batch, timeout=HEARTBEAT_S)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            box.put(_END)
        except BaseException as exc:
            box.put(exc)

    thread = threading.Thread(target=pump, name="curate-ray-pool", daemon=True)
    thread.start()
    try:
        while True:
            try:
                item = box.get(timeout=HEARTBEAT_S)
            except queue.Empty:
                yield None
                continue
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise RunError(f"the Ray pool failed: {one_line(item)}") from item
            yield item
    finally:
        stop.set()


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise MissingExtraError(
            "--ray needs Ray Data: pip install 'curate[ray]' (or `make setup`)"
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
            # The replicas' own output stays in Ray's worker logs: printed through the
            # driver it would land on curate's terminal.
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    except Exception as exc:
        raise RunError(f"could not join the Ray cluster at {address!r}: {one_line(exc)}") from exc
    return True


def quiet_ray_data() -> None:
    """No progress bars or INFO lines from Ray Data on curate's terminal."""

    import ray.data

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    with contextlib.suppress(AttributeError):
        context.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)


@contextlib.contextmanager
def open_ray_pool(
    backend: str,
    model: str,
    options: BackendOptions,
    pool: RayPoolOptions,
    *,
    seed: int = 0,
) -> Iterator[RayPoolBackend]:
    """Join (or start) the cluster, read the backend's info on it, yield the pool."""
    ray = _import_ray()
    joined = connect(pool.address)
    try:
        quiet_ray_data()
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
        yield RayPoolBackend(backend, model, options, pool, seed, info, resources)
    finally:
        if joined:
            ray.shutdown()
