"""Bad input as a new user tries it, through real `curate` processes: files with a
byte-order mark are read, empty files get one plain line, a model that is nowhere
exits 2 whatever HF_HUB_OFFLINE says, a mistyped grader gets "did you mean", and a
resume refused for changed settings offers another --out beside --force-new."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_run_dir_faults import one_error_line
from tests.conftest import ARITHMETIC

BOM = b"\xef\xbb\xbf"
ROWS = [{"question": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(3)]


def _jsonl(rows: list[dict[str, object]], newline: bytes = b"\n") -> bytes:
    return b"".join(json.dumps(r).encode() + newline for r in rows)


def _dry_run(data: Path, *extra: object) -> list[object]:
    return ["eval", data, "-m", "fake", "--backend", "fake", "--dry-run", *extra]


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("bom.jsonl", BOM + _jsonl(ROWS)),
        ("bom-crlf.jsonl", BOM + _jsonl(ROWS, b"\r\n")),
        ("bom.ndjson", BOM + _jsonl(ROWS)),
        ("bom-lines.json", BOM + _jsonl(ROWS)),
        ("bom-array.json", BOM + json.dumps(ROWS).encode()),
    ],
)
def test_a_byte_order_mark_is_dropped_and_the_file_read(
    inputs: Path, run_curate, name: str, body: bytes
) -> None:
    data = inputs / name
    data.write_bytes(body)
    result = run_curate(*_dry_run(data))
    assert result.returncode == 0, result.stderr
    assert "3 samples" in result.stdout
    assert "grader: numeric" in result.stderr  # the answers were read as numbers


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("empty.jsonl", b""),
        ("blank.jsonl", b"\n  \n\t\n"),
        ("bom-only.jsonl", BOM),
        ("bom-blank.jsonl", BOM + b"\n\n"),
        ("empty.json", b""),
        ("empty-array.json", b"[]"),
    ],
)
def test_an_empty_file_gets_one_plain_line(
    inputs: Path, run_curate, name: str, body: bytes
) -> None:
    data = inputs / name
    data.write_bytes(body)
    result = run_curate(*_dry_run(data))
    assert result.returncode == 2
    line = one_error_line(result)
    assert line.startswith(f"{data}: is empty"), line


@pytest.mark.parametrize("model", ["./models/not-here", "no-such-org/no-such-model-xyz"])
@pytest.mark.parametrize("offline", ["1", ""])
def test_a_model_that_is_nowhere_exits_2_online_or_offline(
    outdir: Path, run_curate, model: str, offline: str
) -> None:
    result = run_curate(
        "eval", ARITHMETIC, "-m", model, "--limit", 2, "-o", outdir / "run",
        env={"HF_HUB_OFFLINE": offline},
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert one_error_line(result).startswith(f"{model}: ")
    assert not (outdir / "run").exists()


@pytest.mark.parametrize(
    ("typed", "meant"), [("numric", "numeric"), ("Maths", "math"), ("regx:\\d+", "regex")]
)
def test_a_mistyped_grader_gets_did_you_mean(run_curate, typed: str, meant: str) -> None:
    result = run_curate(*_dry_run(ARITHMETIC, "--grader", typed))
    assert result.returncode == 2
    assert f"(did you mean '{meant}'?)" in one_error_line(result)


def test_an_unlike_grader_name_gets_the_list_alone(run_curate) -> None:
    result = run_curate(*_dry_run(ARITHMETIC, "--grader", "zzzz"))
    assert result.returncode == 2
    line = one_error_line(result)
    assert "did you mean" not in line and "expected one of: exact, numeric" in line


def test_a_refused_resume_offers_another_out_and_says_what_force_new_discards(
    outdir: Path, run_curate
) -> None:
    run = outdir / "run"
    base = ["eval", ARITHMETIC, "-m", "fake", "--backend", "fake", "-q", "--limit", 4, "-n", 2]
    assert run_curate(*base, "-o", run).returncode == 0
    refused = run_curate(*base, "-o", run, "--temperature", "0.5")
    assert refused.returncode == 2
    line = one_error_line(refused)
    assert "use another --out" in line
    assert "--force-new to discard this run's rollouts" in line
