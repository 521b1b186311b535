"""`curate plot`: every kind in PNG, SVG and PDF, default paths, and bad formats."""

from __future__ import annotations

from pathlib import Path

import pytest

try:
    import curate.plots as _plots

    PLOTS_READY = hasattr(_plots, "variance_figure")
except ImportError:  # pragma: no cover - the plotting package is being written
    PLOTS_READY = False

pytestmark = pytest.mark.skipif(not PLOTS_READY, reason="curate.plots has no variance_figure yet")

MAGIC = {".png": b"\x89PNG\r\n\x1a\n", ".pdf": b"%PDF-", ".svg": b"<?xml"}


def check_image(path: Path) -> None:
    data = path.read_bytes()
    assert data.startswith(MAGIC[path.suffix]), data[:20]
    if path.suffix == ".svg":
        assert b"<svg" in data and data.rstrip().endswith(b"</svg>")
    if path.suffix == ".pdf":
        assert b"%%EOF" in data[-64:]


@pytest.mark.parametrize("kind", ["variance", "histogram", "gate"])
@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_plot_every_kind_and_format(cli, scores_csv: Path, outdir: Path, kind: str, suffix: str):
    out = outdir / f"{kind}{suffix}"
    result = cli("plot", scores_csv, "--kind", kind, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == f"wrote {out}"
    check_image(out)
    assert [p.name for p in outdir.iterdir()] == [out.name]  # no temporary files left


def test_plot_default_path_for_run_dir(cli, run_dir: Path) -> None:
    result = cli("plot", run_dir)
    assert result.exit_code == 0, result.stderr
    check_image(run_dir / "plots" / "variance.png")


def test_plot_default_path_for_table(cli, scores_csv: Path) -> None:
    result = cli("plot", scores_csv, "--kind", "histogram")
    assert result.exit_code == 0, result.stderr
    check_image(scores_csv.with_name("scores.histogram.png"))


def test_plot_partial_credit_gate(cli, inputs: Path, outdir: Path) -> None:
    table = inputs / "partial.csv"
    table.write_text("sample_id,score\na,0.5\na,0.7\nb,0.1\nb,0.1\nc,1\nc,0\n")
    out = outdir / "gate.svg"
    assert cli("plot", table, "--kind", "gate", "-o", out).exit_code == 0
    check_image(out)


def test_plot_in_a_real_process(run_curate, run_dir: Path, outdir: Path) -> None:
    out = outdir / "v.png"
    proc = run_curate("plot", run_dir, "-o", out)
    assert proc.returncode == 0, proc.stderr
    check_image(out)


@pytest.mark.parametrize("name", ["plot.gif", "plot.jpg", "plot"])
def test_unknown_plot_format(cli, scores_csv: Path, outdir: Path, name: str, snapshot) -> None:
    before = snapshot(outdir, scores_csv.parent)
    result = cli("plot", scores_csv, "-o", outdir / name)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"curate: error: {outdir / name}: ")
    assert "format" in lines[0] and ".png" in lines[0]
    assert snapshot(outdir, scores_csv.parent) == before


def test_plot_into_missing_directory(cli, scores_csv: Path, tmp_path: Path) -> None:
    result = cli("plot", scores_csv, "-o", tmp_path / "nope" / "v.png")
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "nope").exists()
