"""docs/reference/json.md lists every key that `curate report`, `curate status` and
`curate agree` print with `--format json` (`curate compare`'s: tests/cli/test_cli_compare.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.conftest import ARITHMETIC, ROOT

JSON_DOC = ROOT / "docs" / "reference" / "json.md"
FAKE_EVAL = ("eval", ARITHMETIC, "-m", "fake", "--backend", "fake", "-q", "--limit", "12")


def documented(heading: str) -> set[str]:
    """Every `key` named in the section under `## heading`."""
    text = JSON_DOC.read_text()
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`([a-z_0-9]+)`", section))


def keys(value: Any) -> set[str]:
    """Every key of a JSON value, nested ones included (a map keyed by k, as pass@k's
    "1", "2", ..., is not a key of the contract)."""
    if isinstance(value, dict):
        own = {k for k in value if not k.isdigit()}
        return own | {k for v in value.values() for k in keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys(v)}
    return set()


def test_every_report_key_is_documented(cli, tmp_path: Path) -> None:
    run = tmp_path / "run"
    # With --logprobs: the confidence section and its keys are printed too.
    assert cli(*FAKE_EVAL, "-n", "4", "-o", run, "--logprobs", "3").exit_code == 0
    result = cli("report", run, "--format", "json")
    assert result.exit_code == 0, result.stderr
    printed = keys(json.loads(result.stdout))
    missing = printed - documented("`curate report --format json`")
    assert not missing, f"printed by curate report but not in {JSON_DOC.name}: {missing}"


def test_every_status_key_is_documented(cli, tmp_path: Path) -> None:
    run = tmp_path / "run"
    for shard in ("0/2", "1/2"):
        assert cli(*FAKE_EVAL, "-n", "2", "-o", run, "--shard", shard).exit_code == 0
    result = cli("status", run, "--format", "json")
    assert result.exit_code == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["shards"], body  # the per-shard entries are checked too
    missing = keys(body) - documented("`curate status --format json`")
    assert not missing, f"printed by curate status but not in {JSON_DOC.name}: {missing}"


def test_every_agree_key_is_documented(cli, tmp_path: Path) -> None:
    run, regraded = tmp_path / "run", tmp_path / "exact"
    assert cli(*FAKE_EVAL, "-n", "4", "-o", run).exit_code == 0
    assert cli("grade", run, "--grader", "exact", "--out", regraded).exit_code == 0
    result = cli("agree", run, regraded, "--format", "json")
    assert result.exit_code == 0, result.stderr
    body = json.loads(result.stdout)
    # Outcome names are the keys of `outcomes` (a table of counts), not contract keys.
    outcomes = {"always_correct", "always_incorrect", "mixed", "none"}
    missing = keys(body) - documented("`curate agree --format json`") - outcomes
    assert not missing, f"printed by curate agree but not in {JSON_DOC.name}: {missing}"


def test_every_hint_key_is_documented(cli, tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert cli(*FAKE_EVAL, "-n", "4", "-o", run).exit_code == 0
    result = cli("hint", run, "--format", "json", "-q")
    assert result.exit_code == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["levels"] and body["recommended"], body  # nested entries are checked too
    missing = keys(body) - documented("`curate hint --format json`")
    assert not missing, f"printed by curate hint but not in {JSON_DOC.name}: {missing}"
