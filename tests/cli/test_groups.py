"""Option groups (curate/cli/groups.py): a command takes typed groups, typer sees plain
options with the fields' help, panels and defaults, and `panels` orders the help."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from curate.cli.groups import grouped


@dataclass(frozen=True)
class Sampling:
    temperature: Annotated[float, typer.Option(min=0.0, rich_help_panel="Sampling")] = 1.0
    stop: Annotated[list[str] | None, typer.Option(rich_help_panel="Sampling")] = None


@dataclass(frozen=True)
class Output:
    quiet: Annotated[bool, typer.Option("--quiet", rich_help_panel="Output")] = False
    label: Annotated[str, typer.Option(rich_help_panel="Sampling")] = "x"


seen: list[tuple[str, Sampling, Output]] = []


@grouped(panels=(None, "Sampling", "Output"))
def command(
    name: Annotated[str, typer.Argument()],
    *,
    out: Output,
    sampling: Sampling,
    verbose: Annotated[bool, typer.Option("--verbose")] = False,
) -> None:
    seen.append((name, sampling, out))


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command()(command)
    return app


def test_the_groups_arrive_built_from_the_parsed_options() -> None:
    seen.clear()
    result = CliRunner().invoke(
        _app(), ["n1", "--temperature", "0.5", "--stop", "a", "--stop", "b", "--quiet"]
    )
    assert result.exit_code == 0, result.output
    assert seen == [("n1", Sampling(0.5, ["a", "b"]), Output(quiet=True, label="x"))]


def test_help_follows_the_panel_order_not_the_group_order() -> None:
    result = CliRunner().invoke(_app(), ["--help"], env={"COLUMNS": "100"})
    text = result.output
    assert result.exit_code == 0
    # Output is declared before Sampling, but `panels` puts Sampling first; within a
    # panel the options keep their declaration order (the Output group's --label first).
    assert text.index("─ Sampling") < text.index("─ Output")
    order = [text.index(flag) for flag in ("--label", "--temperature", "--stop", "--quiet")]
    assert order == sorted(order)
    assert text.index("--verbose") < text.index("─ Sampling")  # the main panel first
    # A range declared on a field is enforced as on a plain option.
    bad = CliRunner().invoke(_app(), ["n", "--temperature", "-1"])
    assert bad.exit_code == 2


@dataclass(frozen=True)
class Again:
    quiet: bool = False


def test_an_option_declared_twice_is_refused_at_definition() -> None:
    with pytest.raises(TypeError, match=r"options declared twice: \['quiet'\]"):

        @grouped()
        def twice(*, a: Output, b: Again) -> None:
            pass
