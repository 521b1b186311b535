"""The generated command reference (curate/cli/reference.py): every command and every
option of the typer app reaches it, whatever the option looks like, and examples that
pass an option a command lacks are found."""

from __future__ import annotations

import html
from enum import Enum
from typing import Annotated, Any

import pytest
import typer
import typer.main

from curate.cli.app import app
from curate.cli.reference import (
    command_names,
    command_reference,
    long_flags,
    render_html,
    render_markdown_index,
    root_command,
    stale_flags,
)


def _walk(group: Any) -> dict[str, list[tuple[str, ...]]]:
    """Each command's parameters as their spellings, read from click's own attributes
    (not through the module under test)."""
    out = {}
    for name, command in group.commands.items():
        if command.hidden:
            continue
        spellings = []
        for param in command.params:
            if param.param_type_name == "argument":
                spellings.append((param.human_readable_name,))
            else:
                spellings.append(tuple(param.opts) + tuple(param.secondary_opts))
        out[name] = spellings
    return out


def test_every_command_and_option_of_curate_is_in_the_reference() -> None:
    group = typer.main.get_command(app)
    walked = _walk(group)
    assert set(command_names(root_command())) == set(walked)
    assert len(walked) >= 10  # eval, report, plot, filter, allocate, compare, ...
    for name, params in walked.items():
        page = render_html(command_reference(root_command(), name))
        assert f"curate {name}" in page
        for spellings in params:
            for spelling in spellings:
                assert html.escape(spelling) in page, (name, spelling)
        # Every option row is one parameter: nothing listed twice, nothing invented.
        rows = command_reference(root_command(), name).rows()
        assert len(rows) == len(params), name


def test_the_commands_index_links_every_command() -> None:
    table = render_markdown_index(root_command(), link="commands/{name}.md")
    for name in command_names(root_command()):
        assert f"[`curate {name}`](commands/{name}.md)" in table


class Colour(str, Enum):
    red = "red"
    blue = "blue"


def _toy_app() -> typer.Typer:
    """Options of every shape the reference must carry: a panel, a flag pair, a hidden
    option, a choice, a repeatable option, help with Markdown and HTML characters, a
    default written into the help, and two arguments."""
    toy = typer.Typer()

    @toy.command("paint")
    def paint(
        wall: Annotated[str, typer.Argument(help="The wall.")],
        more: Annotated[list[str] | None, typer.Argument(help="More walls.")] = None,
        colour: Annotated[
            Colour, typer.Option("--colour", "-c", help="a|b <c> *d* _e_ `f`")
        ] = Colour.red,
        coats: Annotated[int, typer.Option(min=1, help="Coats.", rich_help_panel="Finish")] = 2,
        gloss: Annotated[bool, typer.Option("--gloss/--matt", help="Sheen.")] = True,
        secret: Annotated[int, typer.Option(hidden=True, help="Old spelling.")] = 0,
        tag: Annotated[list[str] | None, typer.Option(help="Repeatable.")] = None,
        out: Annotated[str | None, typer.Option(help="Where. \\[default: next to WALL]")] = None,
    ) -> None:
        """Paint a wall."""

    @toy.command("wash")
    def wash() -> None:
        """Wash it."""

    @toy.command("internal", hidden=True)
    def internal() -> None:
        """Not for users."""

    return toy


def test_a_toy_app_of_every_option_shape() -> None:
    group = root_command(_toy_app())
    assert command_names(group) == ["paint", "wash"]  # the hidden command has no page
    ref = command_reference(group, "paint")
    assert ref.usage.startswith("curate paint [OPTIONS]")
    assert ref.summary == "Paint a wall."
    assert [panel for panel, _ in ref.panels] == ["Arguments", "Options", "Finish"]
    rows = {row.names[0]: row for row in ref.rows()}
    assert rows["--colour"].names == ("--colour", "-c")
    assert rows["--colour"].extra == "default: red"
    assert rows["--coats"].extra == "default: 2; x>=1"
    assert rows["--gloss"].names == ("--gloss", "--matt")
    assert rows["--secret"].hidden and rows["--secret"].help == "Old spelling."
    assert rows["--out"].help == "Where." and rows["--out"].extra == "default: next to WALL"
    page = render_html(ref)
    # Help text is escaped, never read as markup; `code` stays code.
    assert "a|b &lt;c&gt; *d* _e_ <code>f</code>" in page
    assert "<c>" not in page
    for flag in ("--colour", "-c", "--coats", "--gloss", "--matt", "--secret", "--tag", "--out"):
        assert flag in page
    assert "hidden from --help" in page
    assert "### Finish" in page
    assert ">wall<" in page and ">more...<" in page


def test_long_flags_include_hidden_and_negative_spellings() -> None:
    group = root_command(_toy_app())
    assert {"--colour", "--gloss", "--matt", "--secret", "--help"} <= long_flags(group, "paint")


@pytest.mark.parametrize(
    ("markdown", "stale"),
    [
        ("```bash\ncurate paint w --colour red --bogus\n```", [("paint", "--bogus")]),
        # A continued line (backslash) and a deeper-indented one belong to the command.
        ("```\ncurate paint w \\\n  --nope\n```", [("paint", "--nope")]),
        ("```\ncurate paint w [--coats N]\n           [--wrong]\n```", [("paint", "--wrong")]),
        ("```console\n$ curate wash --soap\n```", [("wash", "--soap")]),
        # Code spans in prose count; plain prose does not.
        ("Use `curate paint --gloss --shiny`, not curate paint --other.", [("paint", "--shiny")]),
        # Another program's flags after a pipe or && are not the command's.
        ("```\ncurate wash && grep --count x | sort --reverse\n```", []),
        ("```\npython -m other --colour x --anything\n```", []),
        ("```\ncurate paint w --matt --secret 3 -c blue\n```", []),
    ],
)
def test_stale_flags(markdown: str, stale: list[tuple[str, str]]) -> None:
    assert stale_flags(markdown, root_command(_toy_app())) == stale
