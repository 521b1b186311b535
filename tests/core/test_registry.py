"""The registry shape shared by backends, graders and export formats."""

from __future__ import annotations

import pytest

from curate.core.registry import Registry
from curate.errors import MissingExtraError, UsageError


def test_lazy_entries_import_on_first_use() -> None:
    reg: Registry[object] = Registry("thing")
    reg.add("json", "json:dumps", help="serialise")
    assert reg.names() == ["json"]
    assert "json" in reg and "yaml" not in reg
    import json

    assert reg.get("json") is json.dumps
    assert reg.entry("json").help == "serialise"


def test_unknown_names_and_missing_extras_are_one_line_errors() -> None:
    reg: Registry[object] = Registry("thing")
    reg.add("gone", "no_such_module_here:thing", install_hint="pip install gone")
    with pytest.raises(UsageError, match=r"unknown thing 'nope' \(choose from gone\)"):
        reg.get("nope")
    with pytest.raises(MissingExtraError, match="pip install gone"):
        reg.get("gone")


def test_registered_objects_and_normalised_names() -> None:
    reg: Registry[int] = Registry("number", normalise=lambda s: s.strip().lower())
    reg.register("one", 1)
    assert reg.get(" ONE ") == 1
