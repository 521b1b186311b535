"""The manifest: RUN/manifest.json, what produced the run (docs/reference/run-directory.md).

`RunManifest` is the one description of the file, for writing and reading: built from
the JSON object (`from_json`), it checks the JSON type of every field curate reads back
(and that `truncation` names a policy) once, and a bad field is refused with the file
and the field named (InputError, exit 2); its typed fields are what curate reads.
`to_json` gives the object back as it was read or written, every key in place, so a
manifest written by an earlier version reads, and is rewritten, unchanged: an absent
field reads as that version meant it (no `truncation`: `grade`; no `adaptive`: a
fixed-N run). As a read-only mapping it shows that JSON object, for the keys curate
does not model (the rules in `curate.core` over manifests take a mapping).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Any, Literal

from curate.core.reasoning import (
    TRUNCATION_KEY,
    TRUNCATION_POLICIES,
    Truncation,
    truncation_of,
)
from curate.errors import InputError
from curate.store.schema import FORMAT_VERSION


@dataclass(frozen=True, eq=False)
class RunManifest(Mapping[str, Any]):
    """RUN/manifest.json, checked: the fields curate reads back, typed.

    Built from the JSON object (`RunManifest(data)`, or `from_json(data, path)` to name
    the file in the error), which it checks and keeps whole; every typed field is read
    from it then, so the two never disagree. A field absent from the file is None (or
    the default an older run meant), and keys this class does not model survive a
    rewrite.
    """

    data: Mapping[str, Any] = field(default_factory=dict, repr=False)
    path: InitVar[Path | None] = None
    model: str | None = field(init=False)
    backend: str | None = field(init=False)
    # Rollouts per sample asked for (-n): the nominal N of a deepened run.
    runs: int | None = field(init=False)
    # "chat" or "completion" as the run resolved it (None: an older or partial manifest).
    mode: str | None = field(init=False)
    seed: int | None = field(init=False)
    grader: str | None = field(init=False)
    system: str | None = field(init=False)
    limit: int | None = field(init=False)
    dataset_path: str | None = field(init=False)
    dataset_split: str | None = field(init=False)
    # The fields the samples were read with (`curate.data.samples.FieldMap`).
    prompt_field: str | None = field(init=False)
    messages_field: str | None = field(init=False)
    answer_field: str | None = field(init=False)
    id_field: str | None = field(init=False)
    template: str | None = field(init=False)
    layout: str | None = field(init=False)
    # sampling.max_tokens: where a rollout was cut short.
    max_tokens: int | None = field(init=False)
    # A run that chose its rollout counts per sample (`curate eval --adaptive`).
    adaptive: bool = field(init=False)
    adaptive_policy: Mapping[str, Any] | None = field(init=False)
    # An array job's shards: {"count", "hash", "runs": {"I": N, ...}}.
    shards: Mapping[str, Any] | None = field(init=False)
    truncation: Truncation = field(init=False)

    def __post_init__(self, path: Path | None) -> None:
        data = self.data
        problem = manifest_type_problem(data)
        if problem:
            raise InputError(f"manifest {problem}", path=path)
        typed = {
            name: data.get(name)
            for name in [
                "model",
                "backend",
                "runs",
                "mode",
                "seed",
                "grader",
                "system",
                "limit",
                "dataset_path",
                "dataset_split",
                "prompt_field",
                "messages_field",
                "answer_field",
                "id_field",
                "template",
                "layout",
                "adaptive_policy",
                "shards",
            ]
        }
        typed.update(
            max_tokens=(data.get("sampling") or {}).get("max_tokens"),
            adaptive=bool(data.get("adaptive", False)),
            truncation=truncation_of(data),
        )
        for name, value in typed.items():
            object.__setattr__(self, name, value)  # frozen: set once, here

    @classmethod
    def from_json(cls, data: Mapping[str, Any], path: Path | None = None) -> RunManifest:
        """The manifest `data` describes, checked; InputError naming `path` and the first
        mistyped field."""
        return cls(dict(data), path)

    def to_json(self) -> dict[str, Any]:
        """The JSON object to write: every key as read or given, `format_version` filled
        in when it has none."""
        return {"format_version": FORMAT_VERSION, **self.data}

    @property
    def prompt_mode(self) -> Literal["chat", "completion"]:
        """How the prompts were built: "completion" when the run says so, else "chat"
        (the default of a run made before the mode was recorded)."""
        return "completion" if self.mode == "completion" else "chat"

    @property
    def excludes_truncated(self) -> bool:
        """Whether the run leaves its cut-short rollouts out of the statistics (they stay
        stored): `--truncated exclude`."""
        return self.truncation is Truncation.EXCLUDE

    # The JSON object, read-only.
    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


def as_manifest(manifest: Mapping[str, Any]) -> RunManifest:
    """`manifest` as a RunManifest: itself, or the JSON object it is, checked."""
    return manifest if isinstance(manifest, RunManifest) else RunManifest.from_json(manifest)


def read_manifest_file(path: Path) -> RunManifest:
    """Manifest `path`, checked once; InputError naming the file (and the field)
    otherwise."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("no manifest.json in run directory", path=path.parent) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"manifest is not valid JSON: {exc}", path=path) from exc
    except OSError as exc:
        raise InputError(f"cannot read manifest: {exc.strerror}", path=path) from exc
    if not isinstance(data, dict):
        raise InputError("manifest is not a JSON object", path=path)
    return RunManifest.from_json(data, path)


def manifest_text(manifest: RunManifest) -> str:
    """The file's text: sorted keys, two-space indents."""
    return json.dumps(manifest.to_json(), indent=2, sort_keys=True) + "\n"


# JSON type names, as a user editing the file knows them.
_JSON_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    dict: "an object",
    list: "an array",
    type(None): "null",
}
_STR, _INT, _NUM, _BOOL, _OBJ = (str,), (int,), (int, float), (bool,), (dict,)
_OPT_STR, _OPT_INT, _OPT_OBJ = (str, type(None)), (int, type(None)), (dict, type(None))
# The fields curate reads back, and the JSON types each may hold. Others pass unchecked.
MANIFEST_TYPES: dict[str, tuple[type, ...]] = {
    "format_version": _INT,
    "model": _STR,
    "backend": _STR,
    "runs": _INT,
    "mode": _STR,
    "sampling": _OBJ,
    "seed": _INT,
    "grader": _STR,
    "dataset_path": _STR,
    "dataset_sha256": _STR,
    "dataset_split": _STR,
    "prompt_field": _OPT_STR,
    "messages_field": _OPT_STR,
    "answer_field": _OPT_STR,
    "id_field": _OPT_STR,
    "template": _OPT_STR,
    "system": _OPT_STR,
    "chat_template_sha256": _OPT_STR,
    "limit": _OPT_INT,
    "layout": _OPT_STR,
    "engine_options": _OBJ,
    "backend_info": _OBJ,
    "adaptive": _BOOL,
    "adaptive_policy": _OPT_OBJ,
    "adaptive_summary": _OPT_OBJ,
    "shards": _OPT_OBJ,
    "curate_version": _STR,
    "created_at": _STR,
    "updated_at": _STR,
    TRUNCATION_KEY: _STR,
    "deepen": (list,),
}
SAMPLING_TYPES: dict[str, tuple[type, ...]] = {
    "temperature": _NUM,
    "top_p": _NUM,
    "max_tokens": _INT,
    "stop": (list,),
}


def manifest_type_problem(data: Mapping[str, Any]) -> str | None:
    """ "field 'runs' is a string, expected an integer" for the first field of `data`
    whose JSON type is wrong (or whose value no policy has); None when every known
    field is well typed."""
    problem = _field_problems(data, MANIFEST_TYPES, "")
    truncation = data.get(TRUNCATION_KEY)
    if problem is None and isinstance(truncation, str) and truncation not in TRUNCATION_POLICIES:
        problem = (
            f"field '{TRUNCATION_KEY}' is {truncation!r}, expected one of "
            f"{', '.join(TRUNCATION_POLICIES)}"
        )
    if problem is None and isinstance(data.get("sampling"), dict):
        sampling = data["sampling"]
        problem = _field_problems(sampling, SAMPLING_TYPES, "sampling.")
        stop = sampling.get("stop")
        if problem is None and isinstance(stop, list) and not all(isinstance(s, str) for s in stop):
            problem = "field 'sampling.stop' holds a non-string, expected an array of strings"
    return problem


def _field_problems(
    data: Mapping[str, Any], types: dict[str, tuple[type, ...]], prefix: str
) -> str | None:
    for key, allowed in types.items():
        if key not in data:
            continue
        value = data[key]
        # JSON true/false load as bool, a subclass of int: not an integer here.
        ok = isinstance(value, allowed) and not (isinstance(value, bool) and bool not in allowed)
        if not ok:
            expected = " or ".join(_JSON_NAMES[t] for t in allowed)
            got = _JSON_NAMES.get(type(value), type(value).__name__)
            return f"field '{prefix}{key}' is {got}, expected {expected}"
    return None
