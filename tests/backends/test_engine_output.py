"""The engine's own output goes to a log file; curate's keeps the terminal."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def test_engine_output_goes_to_the_log(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    script = textwrap.dedent(
        f"""
        import os, subprocess, sys, warnings
        from pathlib import Path
        from curate.backends.engine_output import engine_output_to

        print("curate: before")
        with engine_output_to(Path({str(log)!r})):
            os.write(1, b"engine stdout notice\\n")
            os.write(2, b"engine stderr notice\\n")
            child = "import sys; print('child says hi', file=sys.stderr)"
            subprocess.run([sys.executable, "-c", child])
            warnings.warn("a FutureWarning from deep inside", FutureWarning)
            print("curate: progress line")
            print("curate: a message", file=sys.stderr)
        print("curate: after")
        os.write(2, b"after the engine\\n")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["curate: before", "curate: progress line", "curate: after"]
    assert done.stderr.splitlines() == ["curate: a message", "after the engine"]
    text = log.read_text()
    for line in ("engine stdout notice", "engine stderr notice", "child says hi", "FutureWarning"):
        assert line in text
    assert "curate:" not in text


def test_no_log_path_captures_nothing(tmp_path: Path, capfd) -> None:  # type: ignore[no-untyped-def]
    from curate.backends.engine_output import engine_output_to

    with engine_output_to(None) as path:
        print("visible")
    assert path is None
    assert "visible" in capfd.readouterr().out
