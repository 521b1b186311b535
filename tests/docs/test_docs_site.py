"""The documentation site (docs/, mkdocs.yml, scripts/docs_hooks.py) and the README that
points into it: a page per command in the nav, links that resolve, examples whose options
exist, and a strict build that fails on what the hook flags."""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from curate.cli.reference import command_names, root_command, stale_flags
from tests.conftest import ROOT

DOCS = ROOT / "docs"
README = ROOT / "README.md"
COMMANDS = command_names(root_command())
# [text](target): relative targets only (no scheme, no bare anchor).
LINK = re.compile(r"\[[^\]]*\]\((?![a-z]+://|#|mailto:)([^)#\s]+)(?:#[^)]*)?\)")


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_a_page_in_the_nav_and_the_readme(name: str) -> None:
    page = DOCS / "commands" / f"{name}.md"
    assert f"<!-- curate-options: {name} -->" in page.read_text()
    assert f"commands/{name}.md" in (ROOT / "mkdocs.yml").read_text()
    assert f"[`curate {name}`](docs/commands/{name}.md)" in README.read_text()


def test_the_readme_keeps_the_ci_test_command_and_stays_short() -> None:
    text = README.read_text()
    assert "make test" in text  # .ci/run calls the README's test command
    assert len(text.splitlines()) <= 200


@pytest.mark.parametrize("path", [README, *_pages()], ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve_and_examples_use_real_options(path: Path) -> None:
    text = path.read_text()
    for target in LINK.findall(text):
        assert (path.parent / target).exists(), f"{path.name}: {target}"
    assert stale_flags(text, root_command()) == []


# -- the mkdocs hook ------------------------------------------------------------------
@pytest.fixture(scope="module")
def hooks() -> ModuleType:
    pytest.importorskip("mkdocs")
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _page(src_uri: str) -> SimpleNamespace:
    return SimpleNamespace(file=SimpleNamespace(src_uri=src_uri))


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_hook_generates_the_options_table(hooks: ModuleType, caplog) -> None:
    out = hooks.on_page_markdown(
        "# eval\n\n<!-- curate-options: eval -->\n", _page("commands/eval.md"), None, None
    )
    assert "<!-- curate-options" not in out
    assert '<span class="curate-flag">--model</span>' in out and "--max-tokens" in out
    assert _warnings(caplog) == []


def test_a_marker_quoted_in_prose_is_left_alone(hooks: ModuleType, caplog) -> None:
    text = "A page holds `<!-- curate-options: NAME -->` on a line of its own.\n"
    assert hooks.on_page_markdown(text, _page("development.md"), None, None) == text
    assert _warnings(caplog) == []


@pytest.mark.parametrize(
    ("src", "markdown", "warning"),
    [
        ("commands/eval.md", "# eval\n", "no <!-- curate-options: eval --> marker"),
        ("guides/x.md", "<!-- curate-options: evaluate -->\n", "the marker names no command"),
        ("guides/x.md", "```\ncurate report RUN --fail-under 0.1\n```", "--fail-under to"),
    ],
)
def test_the_hook_warns(hooks: ModuleType, caplog, src: str, markdown: str, warning: str) -> None:
    hooks.on_page_markdown(markdown, _page(src), None, None)
    assert any(warning in message for message in _warnings(caplog)), _warnings(caplog)


def test_the_hook_warns_about_a_command_without_a_page(hooks: ModuleType, caplog) -> None:
    files = [SimpleNamespace(src_uri=f"commands/{name}.md") for name in COMMANDS[1:]]
    files.append(SimpleNamespace(src_uri="commands/frobnicate.md"))
    hooks.on_files(files, None)
    messages = _warnings(caplog)
    assert any(f"'curate {COMMANDS[0]}' has no page" in m for m in messages), messages
    assert any("no command 'curate frobnicate'" in m for m in messages), messages


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("material")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = (tmp_path / "commands" / "filter.html").read_text()
    assert "--as-frequency" in page and 'id="which-samples"' in page  # a panel's heading
