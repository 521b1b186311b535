"""Golden-file fixture for the report tests (helpers in goldens.py)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from .goldens import GOLDEN, assert_json_close, update_golden


@pytest.fixture
def golden() -> Callable[[str, str], None]:
    """`golden(name, text)`: compare `text` with golden/NAME (or write it when updating).

    .json files are compared as data (floats to 1e-9); everything else byte for byte.
    """

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if update_golden():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return
        assert path.is_file(), f"missing golden file {path}; run with CURATE_UPDATE_GOLDEN=1"
        want = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            assert_json_close(json.loads(text), json.loads(want))
        else:
            assert text == want, f"{name} differs from the golden file (CURATE_UPDATE_GOLDEN=1)"

    return check
