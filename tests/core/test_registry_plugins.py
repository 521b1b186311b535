"""Plugins: a package installed beside curate registers a backend, a grader kind and an
export format through entry points, and the real CLI uses them.

The plugin is a real distribution, built and installed offline (`pip install --target`
with setuptools from this environment, no index), found through PYTHONPATH the way
site-packages would be; nothing in curate names it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from curate.core.registry import Registry
from curate.errors import MissingExtraError

ROOT = Path(__file__).resolve().parents[2]
DIST = "curate-demo-plugin"

PLUGIN = '''
"""A plugin of curate: a backend, a grader kind and an export format."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass

from curate.backends.fake import FakeOptions, open_fake
from curate.exports.base import ExportFormat, file_export
from curate.graders.base import GradeResult

# Set by the test: every import of this module leaves a line here.
if os.environ.get("DEMO_PLUGIN_IMPORTS"):
    with open(os.environ["DEMO_PLUGIN_IMPORTS"], "a") as log:
        log.write("imported\\n")


class SuffixGrader:
    """1 when the completion ends with the reference (after whitespace), else 0."""

    def __init__(self, name: str, strip: str) -> None:
        self.name = name
        self.strip = strip

    def grade_batch(self, completions, references, contexts=None):
        out = []
        for completion, reference in zip(completions, references, strict=True):
            text = completion.strip().rstrip(self.strip)
            hit = text.endswith(str(reference).strip())
            out.append(GradeResult(score=1.0 if hit else 0.0, extracted=text[-12:]))
        return out

    def close(self) -> None:
        pass


def grader(spec, argument, options):
    if argument == "fail":
        raise ValueError("the demo grader refuses 'fail'")
    return SuffixGrader(spec, argument or ".")


def _write(batch, output, stack):
    def fill(path):
        with open(path, "w", encoding="utf-8") as f:
            for sample_id in batch.sample_ids:
                f.write(json.dumps({"demo_id": sample_id}) + "\\n")

    return file_export(output, stack, fill, note="written by the demo plugin")


FORMAT = ExportFormat(
    name="demo-ids", description="sample ids, one a line", output="jsonl", write=_write,
    needs_prompts=False,
)


@dataclass(frozen=True)
class EchoOptions(FakeOptions):
    label = "echo"


@contextlib.contextmanager
def open_echo(model, options=None, *, seed=0):
    with open_fake(model, options, seed=seed) as backend:
        yield backend


open_echo.options = EchoOptions


def broken():
    raise AssertionError("never called")
'''

PYPROJECT = """
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "curate-demo-plugin"
version = "0.1"

[tool.setuptools]
py-modules = ["curate_demo_plugin"]

[project.entry-points."curate.graders"]
suffix = "curate_demo_plugin:grader"
exact = "curate_demo_plugin:grader"
broken = "curate_demo_plugin_missing:grader"

[project.entry-points."curate.exports"]
demo-ids = "curate_demo_plugin:FORMAT"

[project.entry-points."curate.backends"]
echo = "curate_demo_plugin:open_echo"
"""


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo plugin, built from source and installed into its own directory."""
    src = tmp_path_factory.mktemp("plugin-src")
    (src / "curate_demo_plugin.py").write_text(textwrap.dedent(PLUGIN))
    (src / "pyproject.toml").write_text(PYPROJECT)
    target = tmp_path_factory.mktemp("plugin-site")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-index",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--quiet",
            "--target",
            str(target),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert list(target.glob("curate_demo_plugin-0.1.dist-info/entry_points.txt"))
    return target


@pytest.fixture
def env(plugin_dir: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    paths = [str(ROOT), str(plugin_dir), os.environ.get("PYTHONPATH", "")]
    yield {
        **{k: v for k, v in os.environ.items() if k != "CURATE_DEBUG"},
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        "DEMO_PLUGIN_IMPORTS": str(tmp_path / "imports.log"),
    }


def curate(env: dict[str, str], *args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "curate", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data.jsonl"
    rows = [
        {"id": f"s{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)}
        for i in range(1, 7)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def imports(env: dict[str, str]) -> int:
    log = Path(env["DEMO_PLUGIN_IMPORTS"])
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_plugin_grader_backend_and_format_through_the_cli(
    env: dict[str, str], data: Path, tmp_path: Path
) -> None:
    """The class: every registry kind, registered by a package curate does not know."""
    run = tmp_path / "run"
    res = curate(
        env, "eval", data, "--backend", "echo", "--model", "m", "-n", 4,
        "--grader", "suffix", "--out", run,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["backend"] == "echo"
    assert manifest["grader"] == "suffix"
    scores = pl.read_parquet(run / "rollouts" / "*.parquet")
    # The fake engine answers right at some rate and wrong otherwise: the plugin's
    # grader (the answer is the completion's last word) must tell them apart.
    assert set(scores["score"].drop_nulls().unique().to_list()) <= {0.0, 1.0}
    assert scores["extracted"].null_count() == 0

    out = tmp_path / "ids.jsonl"
    res = curate(
        env, "filter", run, "--format", "demo-ids", "-o", out, "--threshold", 0, "--allow-empty"
    )
    assert res.returncode == 0, res.stderr
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(set(row) == {"demo_id"} for row in written)
    # The plugin wrote the samples curate kept: those whose rollouts disagree.
    mixed = scores.group_by("sample_id").agg(pl.col("score").n_unique().alias("k"))
    kept = set(mixed.filter(pl.col("k") > 1)["sample_id"].to_list())
    assert {row["demo_id"] for row in written} == kept


def test_builtin_names_win_and_broken_plugins_are_one_line(
    env: dict[str, str], data: Path, tmp_path: Path
) -> None:
    # `exact` is also the plugin's name for its grader: the built-in one grades.
    run = tmp_path / "run"
    res = curate(
        env, "eval", data, "--backend", "fake", "--model", "m", "-n", 2,
        "--grader", "exact", "--out", run,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "curate-demo-plugin package's grader 'exact' is ignored" in res.stderr
    # A plugin whose module is not there: one line naming it and its package, exit 2.
    res = curate(
        env, "eval", data, "--backend", "fake", "--model", "m", "-n", 2,
        "--grader", "broken", "--out", tmp_path / "run2",
    )  # fmt: skip
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert "curate-demo-plugin" in res.stderr and "curate_demo_plugin_missing" in res.stderr
    assert not (tmp_path / "run2").exists()
    # A plugin's factory refusing its spec: one line naming the package, exit 2.
    res = curate(
        env, "eval", data, "--backend", "fake", "--model", "m", "-n", 2,
        "--grader", "suffix:fail", "--out", tmp_path / "run3",
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "grader 'suffix:fail' (from the curate-demo-plugin package): ValueError" in res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "run3").exists()
    # An unknown grader's message lists the plugins' kinds beside the built-in ones.
    res = curate(env, "eval", data, "--backend", "fake", "--model", "m", "--grader", "nope")
    assert res.returncode == 2 and "suffix" in res.stderr


def test_help_neither_scans_nor_imports_plugins(env: dict[str, str]) -> None:
    code = (
        "import sys\n"
        "from curate.cli.app import app\n"
        "for args in (['--help'], ['eval', '--help'], ['filter', '--help'], ['grade', '--help']):\n"
        "    try:\n"
        "        app(args)\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code in (0, None), (args, exc.code)\n"
        "print('SCANNED=' + str('importlib.metadata' in sys.modules), file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "SCANNED=False" in proc.stderr
    assert imports(env) == 0


def test_listing_scans_once_and_imports_only_the_chosen(
    plugin_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.syspath_prepend(str(plugin_dir))
    monkeypatch.setenv("DEMO_PLUGIN_IMPORTS", str(tmp_path / "imports.log"))
    reg: Registry[object] = Registry("grader", group="curate.graders")
    reg.add("exact", "json:dumps")
    names = reg.names()
    assert names[0] == "exact" and {"suffix", "broken"} <= set(names)
    assert [e.plugin for e in reg.plugins()] == [DIST, DIST]
    assert not (tmp_path / "imports.log").exists()  # listed, not imported
    factory = reg.get("suffix")
    assert callable(factory) and reg.get("suffix") is factory
    assert (tmp_path / "imports.log").read_text() == "imported\n"
    with pytest.raises(MissingExtraError, match=r"curate_demo_plugin_missing.*curate-demo-plugin"):
        reg.get("broken")
    sys.modules.pop("curate_demo_plugin", None)
