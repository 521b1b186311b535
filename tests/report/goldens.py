"""Golden-file helpers shared by the report and CLI tests.

Set CURATE_UPDATE_GOLDEN=1 to (re)write the golden files from the current output
instead of comparing against them; review the diff before committing it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
DATA = HERE / "data"
GOLDEN = HERE / "golden"


def update_golden() -> bool:
    return os.environ.get("CURATE_UPDATE_GOLDEN", "") not in ("", "0")


def assert_json_close(got: Any, want: Any, where: str = "$") -> None:
    """Same structure and keys; floats equal to 1e-9 (summation order may change the last bits)."""
    if isinstance(want, float) or isinstance(got, float):
        assert isinstance(got, int | float) and isinstance(want, int | float), where
        assert not isinstance(got, bool) and not isinstance(want, bool), where
        assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12), f"{where}: {got} != {want}"
    elif isinstance(want, dict):
        assert isinstance(got, dict), where
        assert list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for key in want:
            assert_json_close(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_json_close(g, w, f"{where}[{i}]")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"
