"""--help, --version, and the light import path of `curate --help`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from curate import __version__
from curate.cli.app import app

COMMANDS = ["report", "plot", "filter"]
# Data, plotting and model libraries: none may load for --help.
HEAVY = ("polars", "matplotlib", "vllm", "torch", "transformers", "openai", "ray")


def registered_commands() -> list[str]:
    return [c.name for c in app.registered_commands if c.name]


def test_foundation_commands_are_registered() -> None:
    assert set(COMMANDS) <= set(registered_commands())


def test_help(cli) -> None:
    result = cli("--help")
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.stdout
    assert "-h" in result.stdout


def test_short_help(cli) -> None:
    assert cli("-h").stdout == cli("--help").stdout


@pytest.mark.parametrize("command", registered_commands())
def test_command_help(cli, command: str) -> None:
    result = cli(command, "--help")
    assert result.exit_code == 0, result.stderr
    assert "Usage" in result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize(
    ("command", "options"),
    [
        (
            "report",
            ["--format", "--threshold", "--group-size", "--fail-under-signal", "--max-error-rate"],
        ),
        ("plot", ["--output", "--kind", "--threshold", "--group-size"]),
        ("filter", ["--output", "--keep", "--pass-rate", "--data", "--threshold"]),
    ],
)
def test_command_help_lists_options(cli, command: str, options: list[str]) -> None:
    text = cli(command, "--help").stdout
    for option in options:
        assert option in text, option


def test_version(cli) -> None:
    result = cli("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"curate {__version__}"


def test_version_subprocess(run_curate) -> None:
    proc = run_curate("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"curate {__version__}"


def test_console_script() -> None:
    script = Path(sys.executable).with_name("curate")
    if not script.exists():
        pytest.skip("curate console script not installed next to this interpreter")
    proc = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"curate {__version__}"


def test_help_subprocess_imports_nothing_heavy() -> None:
    """`curate --help` must not import polars, matplotlib or a model library."""
    code = (
        "import sys\n"
        "from curate.cli.app import app\n"
        "try:\n"
        "    app(['--help'])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
        f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))\n"
        "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY=\n" in proc.stderr, proc.stderr
    # Same check on the real entry point, through -X importtime.
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "curate", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    imported = {
        line.split("|")[-1].strip().split(".")[0]
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert imported, proc.stderr[:500]
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))
    assert "Usage" in proc.stdout


def test_command_help_subprocess_is_light() -> None:
    code = (
        "import sys\n"
        "from curate.cli.app import app\n"
        f"for command in {COMMANDS!r}:\n"
        "    try:\n"
        "        app([command, '--help'])\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code in (0, None), (command, exc.code)\n"
        "loaded = {m.split('.')[0] for m in sys.modules}\n"
        f"print(sorted(loaded & set({HEAVY!r})), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "[]", proc.stderr


def test_no_arguments_shows_help(cli) -> None:
    result = cli()
    assert "Usage" in result.stdout + result.stderr
    assert result.exit_code in (0, 2)
