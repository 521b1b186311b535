"""The local vLLM engine's options (`--backend vllm`), read by `open_vllm`, the
manifest and `curate eval`'s flags. Importing this module does not import vllm."""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curate.backends.options import BackendOptions, flag_name, option
from curate.errors import InputError, UsageError


@dataclass(frozen=True)
class VllmOptions(BackendOptions):
    """How to start `vllm.LLM`; None leaves the choice to the engine (or to curate's
    CPU-build defaults in `curate.backends.vllm_local`)."""

    label = "vLLM"
    panel = "vLLM engine (--backend vllm)"

    tensor_parallel_size: int = option(1, "GPUs per model", min=1)
    max_model_len: int | None = option(None, "Context length", default_help="the model's")
    gpu_memory_utilization: float | None = option(
        None, "Share of GPU memory for the KV cache", default_help="vLLM's"
    )
    kv_cache_memory_gb: float | None = option(
        None, "Fixed KV-cache size in GiB", min=0.01, default_help="1 on the CPU build"
    )
    # "auto" on the CPU build keeps a float32 checkpoint in float32 (see engine_dtype).
    dtype: str = option("auto", "Weight dtype; auto: the model's own")
    trust_remote_code: bool = option(False, "Run code from the model's repository")
    reasoning_parser: str | None = option(
        None,
        "vLLM reasoning parser (deepseek_r1, qwen3, ...) that separates the reasoning; "
        "without it the text is split at </think>",
    )
    # Ray (curate.backends.ray_pool): where the replicas run. Not score settings: a run
    # resumes with another cluster or another replica count.
    ray: str | None = option(
        None,
        "Run the engine as replicas on a Ray cluster: auto (RAY_ADDRESS, a running local "
        "cluster, else a new local one) or the cluster's ADDRESS",
        default_help="one engine in this process",
    )
    replicas: int = option(1, "Engine replicas on the Ray cluster (with --ray)", min=1)
    gpus_per_replica: float | None = option(
        None,
        "GPUs each replica reserves (with --ray)",
        min=0,
        default_help="--tensor-parallel-size on a cluster with GPUs, else 0",
    )
    cpus_per_replica: float | None = option(
        None,
        "CPUs each replica reserves (with --ray)",
        min=0.01,
        default_help="1 with GPUs, else 0.5",
    )

    def validate(self) -> None:
        super().validate()
        if self.ray is None:
            for name in ("replicas", "gpus_per_replica", "cpus_per_replica"):
                if name in self.given and getattr(self, name) != _DEFAULTS[name]:
                    raise UsageError(f"{flag_name(name)} needs --ray (auto or a cluster address)")
        elif not self.ray.strip():
            raise UsageError("--ray needs auto or a cluster address")

    def local(self) -> VllmOptions:
        """The options of one engine in one process (a replica's): without the Ray ones."""
        return dataclasses.replace(
            self, ray=None, replicas=1, gpus_per_replica=None, cpus_per_replica=None
        )


_DEFAULTS: dict[str, Any] = {"replicas": 1, "gpus_per_replica": None, "cpus_per_replica": None}


def local_config(model: str) -> dict[str, Any]:
    """A local model directory's config.json ({} for a hub name or an unreadable file)."""

    try:
        data = json.loads((Path(model) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def engine_dtype(model: str, dtype: str, on_cpu: bool) -> str:
    """The dtype to ask vLLM for. `auto` on the CPU build loads a float32 checkpoint as
    bfloat16 (a warning per weight, and other outcomes than the model's own); a local
    float32 checkpoint keeps float32 there. Everything else is passed through."""
    if dtype != "auto" or not on_cpu:
        return dtype
    config = local_config(model)
    saved = config.get("torch_dtype") or config.get("dtype")
    return "float32" if saved == "float32" else dtype


def check_model_source(model: str) -> None:
    """Fail at once, in one line, on a model the engine could only fail on slowly.

    Left to vLLM, a mistyped local path is taken for a Hugging Face name and costs a
    minute of download retries before an error about the internet connection. So: a
    name that looks like a path must exist. A hub name that is neither cached nor
    reachable fails now (one probe, no retries); when it is cached but the hub cannot
    be reached, the engine is told to stay offline, so it loads from the cache without
    retrying either.
    """
    path = Path(model).expanduser()
    if path.exists():
        return
    if looks_local(model):
        raise InputError(f"no such model directory{_nearby(path)}", path=model)
    problem = _hub_problem(model)
    if problem is not None:
        raise problem


def looks_local(model: str) -> bool:
    """Whether `model` names a path rather than a hub repo ("name" or "org/name"):
    it starts with ., / or ~, has more than one separator or a trailing one, or its
    first part is a local directory (sample_data/tiny-mat, a typo of a local model)."""

    if model.startswith((".", "/", "~")) or (os.altsep and os.altsep in model):
        return True
    parts = model.split("/")
    if len(parts) > 2 or model.endswith("/") or (os.sep != "/" and os.sep in model):
        return True
    if len(parts) == 2 and os.path.isdir(parts[0]):
        return True
    # Hub repo ids use letters, digits, '-', '_' and '.' only.
    return not all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", part) for part in parts)


def _nearby(path: Path) -> str:
    """'; did you mean X?' for a close sibling of a mistyped directory, else ''."""

    parent = path.parent
    try:
        names = [p.name for p in parent.iterdir() if p.is_dir()]
    except OSError:
        return ""
    close = difflib.get_close_matches(path.name, names, n=1)
    return f"; did you mean {parent / close[0]}?" if close else ""


def _hub_problem(model: str) -> Exception | None:
    """Why the engine could not get hub model `model` (None: cached, found, or unsure)."""

    try:
        import huggingface_hub
        from huggingface_hub import constants, errors
    except ImportError:  # vLLM needs it; without it the engine says what is missing
        return None
    cached = isinstance(huggingface_hub.try_to_load_from_cache(model, "config.json"), str)
    if constants.HF_HUB_OFFLINE:
        if cached:
            return None
        return InputError(
            "not in the local Hugging Face cache, and HF_HUB_OFFLINE is set: "
            "download it first or pass a local model directory",
            path=model,
        )
    try:
        found = huggingface_hub.file_exists(model, "config.json")
    except errors.GatedRepoError:
        return None  # the engine says it needs a token
    except errors.HfHubHTTPError:
        return None  # the hub answered something else: let the engine decide
    except Exception as exc:  # no connection (DNS, refused, timeout)
        if cached:
            # Load from the cache without the engine's retries.
            os.environ["HF_HUB_OFFLINE"] = "1"
            constants.HF_HUB_OFFLINE = True
            return None
        # An input error (exit 2) as when offline: whether or not the hub answers, the
        # model named is not on this machine, and the same command fails the same way.
        return InputError(
            f"not a local directory, not in the Hugging Face cache, and the hub cannot "
            f"be reached ({type(exc).__name__}): check the name, or pass a local path",
            path=model,
        )
    if found or cached:
        return None
    return InputError(
        "no such model on the Hugging Face hub (a private one needs HF_TOKEN), "
        "and no such local directory",
        path=model,
    )
