"""`curate report --show reflective` and `curate plot --kind reflective SAMPLE` on a run
directory holding r3 certainties (written here; the real engine's: tests/cli/test_cli_r3.py):
the three formats, tokens escaped (never markup), JSON keys documented, and bad input as one
line with exit 2."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl

from curate.store.certainty import append_certainties
from tests.docs.test_json_contracts import keys

TOKENS = ["[bold]", "\n", "4", "$x$"]


def make_run(path: Path, grader: str = "r3") -> Path:
    path.mkdir()
    (path / "manifest.json").write_text(json.dumps({"grader": grader}))
    rows = [[math.log(0.99), math.log(0.98), math.log(p), math.log(0.5)] for p in (0.9, 0.1) * 2]
    append_certainties(
        path,
        pl.DataFrame(
            {
                "sample_id": ["a"] * 4,
                "rollout_idx": list(range(4)),
                "tokens": [TOKENS] * 4,
                "logprobs": rows,
                "tokens_in": [20] * 4,
            }
        ),
    )
    return path


def test_the_three_formats(cli, tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    table = cli("report", run, "--show", "reflective")
    assert table.exit_code == 0, table.stderr
    assert "'4'@2 0.400" in table.stdout and "'[bold]'@0" in table.stdout
    assert "'\\n'@1" in table.stdout  # escaped, on one line
    data = json.loads(cli("report", run, "--show", "reflective", "-f", "json").stdout)
    first = data["reflective"][0]
    top = first["tokens"][0]
    assert (top["position"], top["token"], top["spread"]) == (2, "4", 0.4)
    assert top["weight"] > 0.9 and first["rollouts"] == 4
    markdown = cli("report", run, "--show", "reflective", "-f", "markdown").stdout
    assert "| a | 4 | '4'@2 0.400" in markdown


def _reflective_keys() -> set[str]:
    text = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "json.md").read_text()
    part = text.split("--show reflective --format json", 1)[1].split("\n\n", 1)[0]
    import re

    return set(re.findall(r"`([a-z_0-9]+)`", part))


def test_every_reflective_key_is_documented(cli, tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    data = json.loads(cli("report", run, "--show", "reflective", "-f", "json").stdout)
    assert keys(data) <= _reflective_keys()


def test_plot_draws_one_sample(cli, tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    result = cli("plot", run, "--kind", "reflective", "a")
    assert result.exit_code == 0, result.stderr
    png = run / "plots" / "reflective-a.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_input_is_one_line(cli, tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    other = make_run(tmp_path / "numeric", grader="numeric")
    for args, message in [
        (("plot", run, "--kind", "reflective", "zzz"), "no reference certainties for sample 'zzz'"),
        (("plot", run, "a"), "a SAMPLE goes with --kind reflective"),
        (("report", other, "--show", "reflective"), "reflective tokens need a --grader r3 run"),
    ]:
        result = cli(*args)
        assert result.exit_code == 2, (args, result.stdout)
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (run / "plots").exists()
