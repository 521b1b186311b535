"""mkdocs hooks (mkdocs.yml `hooks:`): the command pages' option tables are generated
from the typer app while the site builds, so they cannot go stale.

A command page `docs/commands/NAME.md` holds the marker `<!-- curate-options: NAME -->`
where the generated usage and tables go, and `<!-- curate-commands -->` anywhere becomes
the table of commands. A command without a page, a page for no command, a marker that
names no command, or an example (`curate CMD --flag` in a code block or span) with a flag
the command does not take is a warning, which `mkdocs build --strict` (`make docs`) turns into a
failure."""

from __future__ import annotations

import re
import sys
from functools import cache
from pathlib import Path
from typing import Any

from mkdocs.plugins import get_plugin_logger

# The checkout's own curate, not whichever one the environment has installed.
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from curate.cli.reference import (  # noqa: E402
    command_names,
    command_reference,
    render_html,
    render_markdown_index,
    stale_flags,
)
from curate.cli.reference import root_command as _root_command  # noqa: E402

log = get_plugin_logger("curate")


@cache
def root_command() -> Any:
    """The typer app's click group, built once per build."""
    return _root_command()


# Markers stand on a line of their own (one quoted in a code span is left alone).
OPTIONS_MARKER = re.compile(r"^<!--\s*curate-options:\s*([\w-]+)\s*-->[ \t]*$", re.MULTILINE)
COMMANDS_MARKER = re.compile(r"^<!--\s*curate-commands\s*-->[ \t]*$", re.MULTILINE)
COMMAND_PAGES = "commands/"


def on_files(files: Any, config: Any) -> Any:
    """Every command has its page; every page under commands/ is a command's."""
    names = set(command_names(root_command()))
    pages = {
        f.src_uri[len(COMMAND_PAGES) : -len(".md")]
        for f in files
        if f.src_uri.startswith(COMMAND_PAGES) and f.src_uri.endswith(".md")
    }
    for name in sorted(names - pages):
        log.warning("command 'curate %s' has no page docs/%s%s.md", name, COMMAND_PAGES, name)
    for name in sorted(pages - names - {"index"}):
        log.warning("docs/%s%s.md: there is no command 'curate %s'", COMMAND_PAGES, name, name)
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    group = root_command()
    names = set(command_names(group))
    src = page.file.src_uri

    def options(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in names:
            log.warning("%s: the marker names no command: %r", src, name)
            return match.group(0)
        return render_html(command_reference(group, name))

    if src.startswith(COMMAND_PAGES) and src != f"{COMMAND_PAGES}index.md":
        own = src[len(COMMAND_PAGES) : -len(".md")]
        if own not in {m.group(1) for m in OPTIONS_MARKER.finditer(markdown)}:
            log.warning("%s: no <!-- curate-options: %s --> marker for the options", src, own)
    for command, flag in stale_flags(markdown, group):
        log.warning(
            "%s: an example passes %s to 'curate %s', which has no such option", src, flag, command
        )
    markdown = OPTIONS_MARKER.sub(options, markdown)
    if COMMANDS_MARKER.search(markdown):
        # Links relative to the page: only pages at the top or under commands/ use it.
        prefix = "" if src.startswith(COMMAND_PAGES) else COMMAND_PAGES
        table = render_markdown_index(group, link=prefix + "{name}.md")
        markdown = COMMANDS_MARKER.sub(lambda _: table, markdown)
    return markdown
