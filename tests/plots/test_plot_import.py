"""`import curate.plots` must not import matplotlib (it would slow down `curate --help`)."""

from __future__ import annotations

import subprocess
import sys


def test_importing_plots_does_not_import_matplotlib() -> None:
    code = (
        "import sys, curate.plots\n"
        "assert curate.plots.PLOT_KINDS\n"
        "heavy = [m for m in ('matplotlib', 'numpy', 'polars') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "matplotlib" not in result.stdout
