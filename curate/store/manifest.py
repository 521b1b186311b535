"""The manifest: RUN/manifest.json, what produced the run.

Its field types are checked once, when it is read: a field curate reads back with the
wrong JSON type is refused with the file and the field named.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from curate.errors import InputError
from curate.store.schema import FORMAT_VERSION


def read_manifest_file(path: Path) -> dict[str, Any]:
    """The JSON object of manifest `path`, with the types of the fields curate reads
    checked; InputError naming the file (and the field) otherwise."""
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
    problem = manifest_type_problem(data)
    if problem:
        raise InputError(f"manifest {problem}", path=path)
    return data


def manifest_text(manifest: dict[str, Any]) -> str:
    """The file's text for `manifest`: sorted keys, two-space indents, `format_version`
    filled in when the body has none."""
    body = {"format_version": FORMAT_VERSION, **manifest}
    return json.dumps(body, indent=2, sort_keys=True) + "\n"


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
    "engine_options": _OBJ,
    "backend_info": _OBJ,
    "adaptive": _BOOL,
    "adaptive_policy": _OPT_OBJ,
    "adaptive_summary": _OPT_OBJ,
    "shards": _OPT_OBJ,
    "curate_version": _STR,
    "created_at": _STR,
    "updated_at": _STR,
}
SAMPLING_TYPES: dict[str, tuple[type, ...]] = {
    "temperature": _NUM,
    "top_p": _NUM,
    "max_tokens": _INT,
    "stop": (list,),
}


def manifest_type_problem(data: dict[str, Any]) -> str | None:
    """ "field 'runs' is a string, expected an integer" for the first field of `data`
    whose JSON type is wrong; None when every known field is well typed."""
    problem = _field_problems(data, MANIFEST_TYPES, "")
    if problem is None and isinstance(data.get("sampling"), dict):
        sampling = data["sampling"]
        problem = _field_problems(sampling, SAMPLING_TYPES, "sampling.")
        stop = sampling.get("stop")
        if problem is None and isinstance(stop, list) and not all(isinstance(s, str) for s in stop):
            problem = "field 'sampling.stop' holds a non-string, expected an array of strings"
    return problem


def _field_problems(
    data: dict[str, Any], types: dict[str, tuple[type, ...]], prefix: str
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
