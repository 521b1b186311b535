"""The layering drawing in docs/development.md is the import-linter contract in
pyproject.toml, and the code keeps that contract (what `make lint` checks)."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import ROOT

PAGE = ROOT / "docs" / "development.md"
# Third-party modules that cost 0.1 s or more to import (benchmarks/bench_imports.py): the
# only imports docs/development.md lets a library function make for itself.
HEAVY = frozenset(
    {
        "numpy",
        "polars",
        "pyarrow",
        "httpx",
        "matplotlib",
        "ray",
        "scipy",
        "datasets",
        "transformers",
        "torch",
        "vllm",
    }
)
# Modules whose function-level imports follow the rule already; the rest of the library
# joins this list as its imports move to the top.
FOLLOWS_THE_IMPORT_RULE = (
    "curate/filtering",
    "curate/exports",
    "curate/trainers",
    "curate/evaluation/ingest.py",
    "curate/stats/columns.py",
    "curate/stats/apportion.py",
)


def _contracts() -> dict[str, dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["id"]: c for c in config["contracts"]}


def _drawn_layers(text: str) -> list[str]:
    """The lines of the first code block under the "### Layers" heading."""
    section = text.split("\n### Layers\n", 1)[1]
    block = re.search(r"^```\n(.*?)^```$", section, re.DOTALL | re.MULTILINE)
    assert block is not None, "no code block under ### Layers"
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


def _normal(layer: str) -> str:
    return " | ".join(sorted(part.strip() for part in layer.split("|")))


def test_the_drawing_is_the_layers_contract() -> None:
    contract = _contracts()["layers"]
    drawn = _drawn_layers(PAGE.read_text())
    assert [_normal(x) for x in drawn] == [_normal(x) for x in contract["layers"]]  # type: ignore[union-attr]


def test_every_package_of_curate_has_a_layer() -> None:
    """The contract is exhaustive (import-linter checks that); the drawing names every
    package too, so that a reader placing a change finds its folder on it."""
    drawn = {part.strip() for line in _drawn_layers(PAGE.read_text()) for part in line.split("|")}
    packages = {p.name for p in (ROOT / "curate").iterdir() if (p / "__init__.py").exists()}
    modules = {p.stem for p in (ROOT / "curate").glob("*.py") if p.stem != "__init__"}
    assert drawn == packages | modules


def test_ignored_imports_say_they_are_to_be_removed() -> None:
    """An ignored import is a known debt: the comment over it (or over the entries it is
    listed with) says "To be removed" and why."""
    lines = (ROOT / "pyproject.toml").read_text().splitlines()
    for contract in _contracts().values():
        for ignored in contract.get("ignore_imports", []):  # type: ignore[attr-defined]
            row = next(i for i, line in enumerate(lines) if line.strip() == f'"{ignored}",')
            while lines[row - 1].strip().startswith('"'):
                row -= 1
            comment = []
            while lines[row - 1].strip().startswith("#"):
                row -= 1
                comment.append(lines[row])
            assert "To be removed" in "\n".join(comment), ignored


def _function_level_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import made inside a function of `path`."""
    found: dict[int, list[tuple[int, str]]] = {}  # by node, once however deeply nested
    for function in ast.walk(ast.parse(path.read_text())):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.Import):
                    found[id(node)] = [(node.lineno, alias.name) for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    module = "." * node.level + (node.module or "")
                    found[id(node)] = [(node.lineno, module)]
    return sorted(item for items in found.values() for item in items)


def _rule_files() -> list[Path]:
    files: list[Path] = []
    for name in FOLLOWS_THE_IMPORT_RULE:
        path = ROOT / name
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


def test_library_functions_import_only_heavy_third_party_modules() -> None:
    """Outside the CLI, an import inside a function is one of the heavy third-party
    modules; curate's own modules and everything light are imported at the top."""
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in _rule_files()
        for line, module in _function_level_imports(path)
        if module.split(".")[0] not in HEAVY
    ]
    assert wrong == []


def test_the_import_rule_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import json\n\n\ndef f():\n    import polars\n    from curate.errors import X\n"
        "    async def g():\n        from . import sibling\n"
    )
    assert _function_level_imports(module) == [(5, "polars"), (6, "curate.errors"), (8, ".")]


def test_the_code_keeps_the_contracts() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint is None:
        pytest.skip("import-linter is not installed (make setup installs the dev extra)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [lint, "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout
