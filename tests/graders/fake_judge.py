"""A fake OpenAI-compatible judge on loopback (stdlib only), for unit tests and the
judge benchmark: it reads the rubric-filled message and answers with a verdict.

Its default verdict: 10/10 when the text after "Answer to grade:" holds the text after
"Reference answer:", else 2/10. `mode` changes the answer's form (see `verdict`);
`latency_s` delays every answer; `status` makes every request fail with that status.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _section(message: str, head: str) -> str:
    """The text after `head` up to the next blank line."""
    _, _, rest = message.partition(head)
    return rest.strip().split("\n\n")[0].strip()


@dataclass
class FakeJudge:
    mode: str = "score"  # score | json | garbage | mixed
    latency_s: float = 0.0
    status: int | None = None
    requests: int = 0
    messages: list[str] = field(default_factory=list)
    auth: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def verdict(self, message: str) -> str:
        reference = _section(message, "Reference answer:")
        answer = _section(message, "Answer to grade:")
        good = bool(reference) and reference in answer
        points = 10 if good else 2
        if self.mode == "json":
            return f'Looks {"right" if good else "wrong"}.\n{{"score": {points / 2:g}, "max": 5}}'
        if self.mode == "garbage":
            return "I cannot decide: the answer seems plausible."
        if self.mode == "mixed" and not good:
            return "No verdict for this one."
        return f"The answer is {'correct' if good else 'wrong'}.\nSCORE: {points}/10"


def _handler(judge: FakeJudge) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: without TCP_NODELAY the body waits
        # for the client's delayed ACK (~40 ms), which would swamp the set latency.
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            message = body["messages"][-1]["content"]
            with judge.lock:
                judge.requests += 1
                judge.messages.append(message)
                judge.auth.append(self.headers.get("authorization") or "")
            if judge.latency_s:
                time.sleep(judge.latency_s)
            if judge.status is not None:
                payload = json.dumps({"error": {"message": "refused by the fake"}}).encode()
                self.send_response(judge.status)
            else:
                text = judge.verdict(message)
                payload = json.dumps(
                    {
                        "id": "fake",
                        "object": "chat.completion",
                        "model": body.get("model"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": text},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": len(message) // 4,
                            "completion_tokens": len(text) // 4,
                            "total_tokens": len(message) // 4 + len(text) // 4,
                        },
                    }
                ).encode()
                self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@contextmanager
def serve_judge(judge: FakeJudge | None = None) -> Iterator[FakeJudge]:
    """Run `judge` on 127.0.0.1 (a free port) while the block runs; `judge.url` is its
    base URL (…/v1)."""
    judge = judge or FakeJudge()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(judge))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    judge.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield judge
    finally:
        server.shutdown()
        server.server_close()
