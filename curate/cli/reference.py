"""The command reference, read from the typer app: each command's usage, summary and
options grouped by help panel, rendered as HTML for the docs' command pages (the mkdocs
hook in `scripts/docs_hooks.py` puts it in at build time, so it cannot go stale).

It reads what `curate COMMAND --help` reads (click's help records), so a table and the
terminal help say the same thing; nothing here imports more than the CLI does."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any

import typer
import typer.main
from typer.core import TyperGroup

# typer's titles for parameters without a help panel, as `--help` prints them.
ARGUMENTS_PANEL = "Arguments"
OPTIONS_PANEL = "Options"

# click's closing bracket on a help record: "  [default: 8; x>=1]", "  [required]".
_EXTRA = re.compile(r"^(?P<help>.*?)\s*(?<!\\)\[(?P<extra>[^\[\]]*)\]$", re.DOTALL)
# A default typer wrote into the help text itself ("\[default: runs/DATA__MODEL]").
_ESCAPED_DEFAULT = re.compile(r"\s*\\\[(?P<extra>default:[^\]]*)\]\.?$")
_CODE = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class ParamRow:
    """One argument or option: how it is spelt, what it does, its default or range."""

    names: tuple[str, ...]  # every spelling: "--rollouts", "-n"; an argument's metavar
    usage: str  # as --help shows it: "-n, --rollouts N"
    help: str
    extra: str  # "default: 8; x>=1", "required", or ""
    hidden: bool = False


@dataclass(frozen=True)
class CommandReference:
    name: str
    usage: str
    summary: str
    panels: tuple[tuple[str, tuple[ParamRow, ...]], ...] = field(default_factory=tuple)

    def rows(self) -> list[ParamRow]:
        return [row for _, rows in self.panels for row in rows]


def root_command(app: typer.Typer | None = None) -> TyperGroup:
    """The click group behind the typer app (curate's own by default)."""
    if app is None:
        from curate.cli.app import app as curate_app

        app = curate_app
    group = typer.main.get_command(app)
    if not isinstance(group, TyperGroup):
        raise TypeError("the app has a single command, not a group of commands")
    return group


def _context(command: Any, name: str | None, parent: Any = None) -> Any:
    """A context for reading help (typer carries its own click, so no `import click`)."""
    return command.context_class(command, info_name=name, parent=parent)


def command_names(group: TyperGroup) -> list[str]:
    """The group's commands, in the order --help lists them (hidden ones left out)."""
    ctx = _context(group, group.name)
    return [
        name
        for name in group.list_commands(ctx)
        if not _command(group, ctx, name).hidden  # a hidden command has no page
    ]


def _command(group: TyperGroup, ctx: Any, name: str) -> Any:
    command = group.get_command(ctx, name)
    if command is None:
        raise KeyError(name)
    return command


def command_reference(group: TyperGroup, name: str) -> CommandReference:
    """What `curate NAME --help` says, as data."""
    root_ctx = _context(group, group.name or "curate")
    command = _command(group, root_ctx, name)
    ctx = _context(command, name, root_ctx)
    panels: dict[str, list[ParamRow]] = {}
    order = [ARGUMENTS_PANEL, OPTIONS_PANEL]
    for param in command.get_params(ctx):
        row = _row(param, ctx)
        if row is None:
            continue
        is_argument = param.param_type_name == "argument"
        default_panel = ARGUMENTS_PANEL if is_argument else OPTIONS_PANEL
        panel = getattr(param, "rich_help_panel", None) or default_panel
        if panel not in order:
            order.append(panel)
        panels.setdefault(panel, []).append(row)
    usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    summary = (command.help or command.short_help or "").strip()
    return CommandReference(
        name=name,
        usage=usage,
        summary=_unescape(summary),
        panels=tuple((p, tuple(panels[p])) for p in order if p in panels),
    )


def _row(param: Any, ctx: Any) -> ParamRow | None:
    """The help record of one parameter; None for `--help` itself."""
    names = tuple(param.opts) + tuple(param.secondary_opts)
    if "--help" in names:
        return None
    if param.param_type_name == "argument":
        names = (param.human_readable_name,)
    hidden = bool(getattr(param, "hidden", False))
    record = None
    if not hidden:
        record = param.get_help_record(ctx)
    if record is None:  # hidden: still accepted, so still documented
        spelling = ", ".join(names)
        text = getattr(param, "help", None) or ""
        return ParamRow(names=names, usage=spelling, help=_unescape(text), extra="", hidden=True)
    usage, text = record
    text, extra = _split_extra(text or "")
    return ParamRow(names=names, usage=usage, help=text, extra=extra, hidden=hidden)


def _split_extra(text: str) -> tuple[str, str]:
    """Help text and click's closing "[default: ...]" apart; typer's own escaped
    default inside the text ("\\[default: X]") counts as the closing bracket too."""
    extra = ""
    match = _EXTRA.match(text)
    if match:
        text, extra = match.group("help"), match.group("extra")
    escaped = _ESCAPED_DEFAULT.search(text)
    if escaped:
        text = text[: escaped.start()]
        extra = "; ".join(part for part in (escaped.group("extra"), extra) if part)
    return _unescape(text.strip()), _unescape(extra.strip())


def _unescape(text: str) -> str:
    """rich's markup escapes ("\\[") as the reader should see them."""
    return text.replace("\\[", "[")


def _usage_cell(usage: str) -> str:
    """An option's spelling with each part kept on one line ("--weight-default" does
    not break at its hyphens; the parts may go on separate lines)."""
    parts = re.findall(r"<[^>]*>|\S+", usage)
    return " ".join(f'<span class="curate-flag">{html.escape(part)}</span>' for part in parts)


def _heading(text: str) -> str:
    """A panel title as Markdown heading text: nothing in it read as markup."""
    return re.sub(r"([\\`*_\[\]<>#|])", r"\\\1", text)


def _inline(text: str) -> str:
    """Text for an HTML cell: escaped, with `code` spans kept as code."""
    parts = _CODE.split(text)
    return "".join(
        f"<code>{html.escape(part)}</code>" if i % 2 else html.escape(part)
        for i, part in enumerate(parts)
    )


def render_html(ref: CommandReference) -> str:
    """The generated part of a command page: usage, then a heading and a table per help
    panel. The tables are HTML, so no help text is read as Markdown (a `|` or `*` in it
    stays as written)."""
    out = [
        f"<pre><code>{html.escape(ref.usage)}</code></pre>",
        "",
    ]
    for paragraph in ref.summary.split("\n\n"):
        if not paragraph.strip():
            continue
        if any(line[:1].isspace() for line in paragraph.splitlines()):  # laid out by hand
            out += [f"<pre>{html.escape(paragraph)}</pre>", ""]
        else:
            out += [f"<p>{_inline(' '.join(paragraph.split()))}</p>", ""]
    for panel, rows in ref.panels:
        # A Markdown heading, so the panel is in the page's table of contents.
        out += [f"### {_heading(panel)}", ""]
        out.append("<table>")
        out.append("<thead><tr><th>option</th><th>meaning</th><th>default, range</th></tr></thead>")
        out.append("<tbody>")
        for row in rows:
            meaning = _inline(row.help) + (" <em>(hidden from --help)</em>" if row.hidden else "")
            out.append(
                f"<tr><td><code>{_usage_cell(row.usage)}</code></td>"
                f"<td>{meaning}</td><td>{_inline(row.extra)}</td></tr>"
            )
        out.append("</tbody></table>")
        out.append("")
    return "\n".join(out)


def render_markdown_index(group: TyperGroup, link: str = "{name}.md") -> str:
    """A Markdown table of the commands and their one-line summaries, each linked."""
    lines = ["| command | what it does |", "| --- | --- |"]
    ctx = _context(group, group.name)
    for name in command_names(group):
        command = _command(group, ctx, name)
        summary = _unescape((command.short_help or command.help or "").strip().split("\n")[0])
        target = link.format(name=name)
        lines.append(f"| [`curate {name}`]({target}) | {summary.replace('|', '&#124;')} |")
    return "\n".join(lines)


# `curate CMD ...` in a code block or a code span, up to the end of that shell command.
_INVOCATION = re.compile(r"\bcurate\s+([a-z][a-z-]*)\b([^`'\"&|;>]*)")
_LONG_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
_FENCE = re.compile(r"^(\s*)(```|~~~)")


def long_flags(group: TyperGroup, name: str) -> set[str]:
    """Every long spelling a command accepts, hidden ones included."""
    ctx = _context(group, group.name)
    command = _command(group, ctx, name)
    return {
        opt
        for param in command.params
        for opt in (*param.opts, *param.secondary_opts)
        if opt.startswith("--")
    } | {"--help"}


def stale_flags(markdown: str, group: TyperGroup) -> list[tuple[str, str]]:
    """(command, flag) pairs that a page's examples use and the command does not accept:
    invocations in fenced code blocks (with their continuation lines) and in code spans."""
    commands = set(command_names(group))
    accepted = {name: long_flags(group, name) for name in commands}
    found: list[tuple[str, str]] = []
    for text in _invocation_texts(markdown):
        for match in _INVOCATION.finditer(text):
            name, rest = match.group(1), match.group(2)
            if name not in commands:
                continue
            found += [(name, f) for f in _LONG_FLAG.findall(rest) if f not in accepted[name]]
    return found


def _invocation_texts(markdown: str) -> list[str]:
    """Code spans of the prose, and the code blocks' lines with each command's
    continuation lines (a trailing backslash, or deeper indentation) joined to it."""
    texts: list[str] = []
    block: list[str] | None = None
    for line in markdown.splitlines():
        if _FENCE.match(line):
            if block is None:
                block = []
            else:
                texts += _logical_lines(block)
                block = None
        elif block is not None:
            block.append(line)
        else:
            texts += _CODE.findall(line)
    return texts


def _logical_lines(lines: list[str]) -> list[str]:
    out: list[str] = []
    indent = -1
    joining = False
    for line in lines:
        depth = len(line) - len(line.lstrip())
        starts = line.lstrip().startswith(("curate ", "$ curate "))
        if out and not starts and (joining or (line.strip() and depth > indent >= 0)):
            out[-1] += " " + line.strip().rstrip("\\")
        else:
            out.append(line.strip().rstrip("\\"))
            indent = depth
        joining = line.rstrip().endswith("\\")
    return out
