"""Headless Chromium driven over its DevTools protocol: enough to open a page, run
JavaScript in it, wait for a condition and take a screenshot (the view tests, the
screenshots in docs/images/ and benchmarks/bench_view.py use it).

No browser is downloaded: this drives the system's Chromium (Debian's `chromium`; `.ci/run`
installs it). `find_chromium()` is None where there is none, and callers skip saying so.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
NO_BROWSER = (
    "no Chromium on PATH (Debian: apt-get install -y chromium; .ci/run installs it): "
    "the viewer's browser tests need a real browser"
)


def find_chromium() -> str | None:
    """The Chromium executable (CURATE_CHROMIUM, else the first on PATH), or None."""
    given = os.environ.get("CURATE_CHROMIUM")
    if given:
        return given if Path(given).is_file() else None
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class BrowserError(RuntimeError):
    pass


class Page:
    """One tab, over its own WebSocket."""

    def __init__(self, url: str) -> None:
        from websockets.sync.client import connect

        # Entered as a context manager: websockets warns about a bare connection.
        self._ws = connect(url, max_size=None, open_timeout=30).__enter__()
        self._ids = itertools.count(1)
        self.console: list[str] = []
        self.exceptions: list[str] = []
        self.send("Runtime.enable")
        self.send("Page.enable")
        # A background tab gets no animation frames: the page must be the visible one.
        self.send("Page.bringToFront")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._ws.close()

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 60) -> Any:
        """Send a command and return its result (events seen meanwhile are kept)."""
        ident = next(self._ids)
        self._ws.send(json.dumps({"id": ident, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"{method}: no answer in {timeout}s")
            message = json.loads(self._ws.recv(timeout=left))
            if message.get("id") == ident:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._event(message)

    def _event(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        params = message.get("params", {})
        if method == "Runtime.consoleAPICalled":
            self.console.append(" ".join(str(a.get("value", "")) for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text", "")
            self.exceptions.append(str(text))
        elif method == "Log.entryAdded":
            self.console.append(str(params.get("entry", {}).get("text", "")))

    def eval(self, expression: str, timeout: float = 60) -> Any:
        """The value of a JavaScript expression (awaited when it is a promise)."""
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            timeout=timeout,
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise BrowserError(f"{expression[:80]}: {text}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 30, poll: float = 0.05) -> Any:
        """Poll `expression` until it is truthy (an exception counts as not yet: the page
        may still be loading); its value."""
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            try:
                value = self.eval(expression)
            except BrowserError as exc:
                value, last = None, f" (last error: {exc})"
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out after {timeout}s waiting for: {expression}{last}")
            time.sleep(poll)

    def navigate(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})

    def set_size(self, width: int, height: int) -> None:
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    def screenshot(self, path: Path, *, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path


class Browser:
    """A headless Chromium process with a fresh profile; `page()` opens a tab."""

    def __init__(self, executable: str) -> None:
        self._profile = tempfile.mkdtemp(prefix="curate-chromium-")
        args = [
            executable,
            "--headless=new",
            "--no-sandbox",  # root in CI containers
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--remote-debugging-port=0",
            "--remote-allow-origins=*",
            f"--user-data-dir={self._profile}",
            "about:blank",
        ]
        self._proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        self.port = self._wait_port()
        self._pages: list[Page] = []

    def _wait_port(self, timeout: float = 30) -> int:
        marker = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrowserError(f"chromium exited with status {self._proc.returncode}")
            with contextlib.suppress(OSError, ValueError, IndexError):
                return int(marker.read_text().splitlines()[0])
            time.sleep(0.05)
        raise BrowserError("chromium did not open its DevTools port")

    def page(self, url: str = "about:blank") -> Page:
        from urllib.parse import quote
        from urllib.request import Request, urlopen

        request = Request(f"http://127.0.0.1:{self.port}/json/new?{quote(url, safe='')}")
        request.method = "PUT"
        with urlopen(request, timeout=30) as response:
            target = json.loads(response.read())
        page = Page(target["webSocketDebuggerUrl"])
        self._pages.append(page)
        return page

    def close(self) -> None:
        for page in self._pages:
            page.close()
        with contextlib.suppress(ProcessLookupError):
            self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=10)
        shutil.rmtree(self._profile, ignore_errors=True)


@contextlib.contextmanager
def browser(executable: str | None = None) -> Iterator[Browser]:
    path = executable or find_chromium()
    if path is None:
        raise BrowserError(NO_BROWSER)
    b = Browser(path)
    try:
        yield b
    finally:
        b.close()
