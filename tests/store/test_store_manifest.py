"""The typed manifest: one class for writing and reading RUN/manifest.json, checked once.

The class under test is "every manifest curate has ever written, and every mistyping of
a field curate reads back": manifests of the first release and of this one read, their
absent fields mean what those versions meant, and a rewrite keeps every byte; a field of
the wrong JSON type (any known field, any wrong type) is refused naming the file and the
field."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from curate.core.reasoning import TRUNCATION_POLICIES, Truncation
from curate.errors import InputError
from curate.store.manifest import MANIFEST_TYPES, RunManifest, manifest_text
from curate.store.run_dir import RolloutStore
from curate.store.schema import FORMAT_VERSION

# What the first release wrote (its EvalSettings.manifest() plus backend_info): no
# truncation, reference_extract, layout, adaptive_policy, deepen or shards.
FIRST_RELEASE = {
    "adaptive": False,
    "answer_field": "answer",
    "backend": "vllm",
    "backend_info": {"model": "sample_data/tiny-math"},
    "chat_template_sha256": "ab" * 32,
    "created_at": "2026-11-22T10:00:00+00:00",
    "curate_version": "0.1.0",
    "dataset_path": "sample_data/arithmetic.jsonl",
    "dataset_sha256": "cd" * 32,
    "engine_options": {"max_model_len": 2048},
    "format_version": 1,
    "id_field": None,
    "limit": None,
    "messages_field": None,
    "mode": "chat",
    "model": "sample_data/tiny-math",
    "prompt_field": "question",
    "runs": 8,
    "sampling": {"max_tokens": 256, "stop": [], "temperature": 1.0, "top_p": 1.0},
    "seed": 0,
    "system": None,
    "template": None,
    "updated_at": "2026-11-22T10:01:00+00:00",
}

# What this version writes on top of it (an adaptive, sharded, deepened run).
CURRENT = {
    **FIRST_RELEASE,
    "adaptive": True,
    "adaptive_policy": {"max_runs": 16, "balanced": 2},
    "adaptive_summary": {"rounds": 3},
    "dataset_split": "train",
    "deepen": [{"k": 4, "to": 16, "stratum": "both", "nominal_runs": 8, "seed": 0}],
    "grader": "math",
    "grader_notes": None,
    "grader_reason": "as given",
    "grader_timeout_s": 10.0,
    "judge_usage": {"calls": 3},
    "layout": "gsm8k",
    "reference_check": {"checked": 20, "unchecked": 0},
    "reference_extract": {"mode": "gsm8k", "requested": "auto"},
    "score_range": None,
    "shards": {"count": 2, "hash": "sha256", "runs": {"0": 8, "1": 8}},
    "truncation": "exclude",
    "some_other_tool": {"kept": ["as", "it", "was"]},
}


def stored_text(data: dict[str, Any]) -> str:
    """The bytes every version wrote: sorted keys, two-space indents, a final newline."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


@pytest.mark.parametrize("data", [FIRST_RELEASE, CURRENT], ids=["first-release", "current"])
def test_every_version_reads_and_rewrites_byte_for_byte(tmp_path: Path, data: dict) -> None:
    store = RolloutStore(tmp_path / "run")
    store.create()
    store.manifest_path.write_text(stored_text(data))
    manifest = store.load_manifest()
    assert manifest == data and store.read_manifest() == data
    store.write_manifest(manifest)
    assert store.manifest_path.read_text() == stored_text(data)
    store.write_manifest(store.read_manifest())  # the dict a writer edits, unedited
    assert store.manifest_path.read_text() == stored_text(data)


def test_absent_fields_mean_what_their_version_meant() -> None:
    old = RunManifest.from_json(FIRST_RELEASE)
    assert old.truncation is Truncation.GRADE and not old.excludes_truncated
    assert old.adaptive is False and old.adaptive_policy is None and old.shards is None
    assert old.layout is None and old.max_tokens == 256 and old.runs == 8
    assert old.prompt_mode == "chat" and old.prompt_field == "question"
    bare = RunManifest.from_json({})  # a manifest naming nothing: a score table's view
    assert bare.truncation is Truncation.GRADE and bare.runs is None and bare.model is None
    assert bare.prompt_mode == "chat" and bare.max_tokens is None
    assert RunManifest.from_json({"mode": "completion"}).prompt_mode == "completion"


def test_the_current_fields_read_typed() -> None:
    new = RunManifest.from_json(CURRENT)
    assert new.truncation is Truncation.EXCLUDE and new.excludes_truncated
    assert new.adaptive is True and new.adaptive_policy == {"max_runs": 16, "balanced": 2}
    assert new.shards is not None and new.shards["count"] == 2
    assert (new.layout, new.grader, new.dataset_split) == ("gsm8k", "math", "train")
    assert new["some_other_tool"] == {"kept": ["as", "it", "was"]}  # unknown keys stay


@pytest.mark.parametrize("policy", TRUNCATION_POLICIES)
def test_every_policy_reads_as_its_enum(policy: str) -> None:
    assert RunManifest.from_json({"truncation": policy}).truncation is Truncation(policy)


def test_a_policy_no_version_wrote_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"model": "m", "truncation": "drop"}))
    store = RolloutStore(tmp_path)
    with pytest.raises(InputError) as info:
        store.load_manifest()
    assert str(info.value) == (
        f"{path}: manifest field 'truncation' is 'drop', expected one of "
        "grade, wrong, error, exclude"
    )


# One value of each JSON type; a field refuses every one its declared types exclude.
JSON_VALUES: dict[str, Any] = {
    "string": "x",
    "integer": 3,
    "number": 0.5,
    "boolean": True,
    "object": {"a": 1},
    "array": ["a"],
    "null": None,
}


def _accepts(allowed: tuple[type, ...], value: Any) -> bool:
    if isinstance(value, bool):
        return bool in allowed
    return isinstance(value, allowed)


@pytest.mark.parametrize("key", sorted(MANIFEST_TYPES))
def test_every_mistyping_of_every_known_field_is_refused(tmp_path: Path, key: str) -> None:
    store = RolloutStore(tmp_path)
    store.create()
    for kind, value in JSON_VALUES.items():
        if key == "truncation" and isinstance(value, str):
            value = TRUNCATION_POLICIES[0]
        store.manifest_path.write_text(json.dumps({key: value}))
        if _accepts(MANIFEST_TYPES[key], value):
            assert store.load_manifest()[key] == value, (key, kind)
            continue
        with pytest.raises(InputError) as info:
            store.load_manifest()
        message = str(info.value)
        assert message.startswith(f"{store.manifest_path}: manifest field '{key}' is "), message
        assert "\n" not in message


def test_a_writer_cannot_write_what_a_reader_would_refuse(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path)
    store.create()
    with pytest.raises(InputError, match="field 'runs' is a string"):
        store.write_manifest({"model": "m", "runs": "8"})
    assert not store.manifest_path.exists()  # nothing half-written


def test_random_well_typed_manifests_round_trip() -> None:
    """Manifests drawn at random from the declared types (and unknown keys of any type)
    read, and give back exactly the object they were read from."""
    rng = random.Random(11)
    samples = {
        str: ["", "a", "é ✓"],
        int: [0, 7, -1],
        float: [0.25, 1e-9],
        bool: [True, False],
        dict: [{}, {"k": [1, None]}],
        list: [[], ["x"]],
        type(None): [None],
    }
    for _ in range(200):
        data: dict[str, Any] = {}
        for key, allowed in MANIFEST_TYPES.items():
            if rng.random() < 0.5:
                continue
            kind = rng.choice(allowed)
            value = rng.choice(samples[kind])
            if key == "truncation":
                value = rng.choice(TRUNCATION_POLICIES)
            if key == "sampling":
                value = {"temperature": rng.choice([0, 0.7]), "stop": ["\n"]}
            data[key] = value
        data[f"x{rng.randrange(99)}"] = rng.choice([None, 1, "s", [1], {"a": 2}])
        manifest = RunManifest.from_json(data)
        assert manifest == data
        assert manifest_text(manifest) == stored_text({"format_version": FORMAT_VERSION, **data})
