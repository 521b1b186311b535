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


def test_an_engine_started_quietly_logs_to_the_file_for_good(tmp_path: Path) -> None:
    """A library that binds sys.stdout when it starts (vLLM's log handler) binds the
    log's stream, not curate's terminal, and keeps writing there while the run goes on."""
    log = tmp_path / "engine.log"
    script = textwrap.dedent(
        f"""
        import contextlib, logging, sys
        from pathlib import Path
        from curate.backends.engine_output import engine_output_to, entered_quietly

        @contextlib.contextmanager
        def engine():
            print("engine: import-time notice")
            handler = logging.StreamHandler(sys.stdout)  # bound now, as vLLM does
            logger = logging.getLogger("engine")
            logger.addHandler(handler)
            logger.warning("engine: starting")
            yield logger
            logger.warning("engine: shutting down")

        with engine_output_to(Path({str(log)!r})), entered_quietly(engine()) as logger:
            print("curate: progress")
            logger.warning("engine: a warning during the run")
        print("curate: summary")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["curate: progress", "curate: summary"]
    assert done.stderr == ""
    text = log.read_text()
    for line in ("import-time", "starting", "during the run", "shutting down"):
        assert line in text, line
    assert "curate:" not in text


def test_a_test_runners_streams_stay_as_they_are(tmp_path: Path) -> None:
    """Streams not on fds 1 and 2 (CliRunner's buffers) keep curate's output; the
    engine's fds still go to the log."""
    import io
    import os

    from curate.backends.engine_output import engine_output_to, engine_streams

    fake_out, fake_err = io.StringIO(), io.StringIO()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = fake_out, fake_err
    try:
        with engine_output_to(tmp_path / "engine.log"):
            print("curate line")
            os.write(1, b"engine line\n")
            with engine_streams():
                print("engine print")
    finally:
        sys.stdout, sys.stderr = old
    assert fake_out.getvalue() == "curate line\n" and fake_err.getvalue() == ""
    text = (tmp_path / "engine.log").read_text()
    assert "engine line" in text and "engine print" in text
