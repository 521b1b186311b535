"""A fake reward-model server for unit tests (loopback only): vLLM's `/classify`,
`/pooling` and `/score` wire formats over an arithmetic "reward model" that gives a
right answer the logit +2 and anything else -2, with injectable faults.

Faults are keyed by the completion text, so a test chooses which rollout fails:
`statuses[completion] = [503, 503]` answers those statuses first (then normally),
`reject` completions always get a 400, `malformed` ones a body that is not JSON. Every
request body and its Authorization header are recorded.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import Any

from aiohttp import web

from tests.backends.fault_proxy import _LoopServer

_QUESTION = re.compile(r"What is (\d+) ([-+*]) (\d+)\?")


def arithmetic_logit(conversation: str, completion: str) -> float:
    """+2 when `completion` answers the last question in `conversation`, else -2."""
    found = _QUESTION.findall(conversation)
    if not found:
        return 0.0
    a, op, b = found[-1]
    value = {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op]
    return 2.0 if completion.strip() == str(value) else -2.0


class FakeRewardServer(_LoopServer):
    """Serves the endpoints in `endpoints` (the others answer 404)."""

    def __init__(
        self,
        endpoints: tuple[str, ...] = ("classify", "pooling", "score"),
        *,
        labels: int = 1,
        api_key: str | None = None,
    ) -> None:
        super().__init__()
        self.endpoints = endpoints
        self.labels = labels
        self.api_key = api_key
        self.bodies: list[tuple[str, dict[str, Any]]] = []
        self.auth: list[str | None] = []
        self.statuses: dict[str, list[int]] = defaultdict(list)
        self.reject: set[str] = set()
        self.malformed: set[str] = set()

    def app(self) -> web.Application:
        app = web.Application()
        for name in ("classify", "pooling", "score"):
            app.router.add_post(f"/{name}", self._handler(name))
        return app

    def _handler(self, endpoint: str) -> Any:
        async def handle(request: web.Request) -> web.Response:
            body = await request.json()
            self.bodies.append((endpoint, body))
            self.auth.append(request.headers.get("Authorization"))
            if endpoint not in self.endpoints:
                return web.json_response({"detail": "Not Found"}, status=404)
            if self.api_key is not None and request.headers.get("Authorization") != (
                f"Bearer {self.api_key}"
            ):
                return web.json_response(
                    {"error": {"message": "invalid key sk-abc...xyz"}}, status=401
                )
            conversation, completion = _split(endpoint, body)
            pending = self.statuses.get(completion)
            if pending:
                status = pending.pop(0)
                headers = {"Retry-After": "0"} if status == 429 else None
                return web.json_response(
                    {"error": {"message": f"injected {status}"}}, status=status, headers=headers
                )
            if completion in self.reject:
                return web.json_response(
                    {"error": {"message": "This model's maximum context length is 256"}},
                    status=400,
                )
            if completion in self.malformed:
                return web.Response(text='{"data": [', content_type="application/json")
            logit = arithmetic_logit(conversation, completion)
            values = [logit] if self.labels == 1 else [-logit / 2, logit / 2, 0.0][: self.labels]
            if endpoint == "classify":
                item: dict[str, Any] = {"index": 0, "label": None, "probs": values}
                item["num_classes"] = len(values)
            elif endpoint == "pooling":
                item = {"index": 0, "object": "pooling", "data": values}
            else:
                item = {"index": 0, "object": "score", "score": values[0]}
            return web.json_response({"object": "list", "data": [item]})

        return handle


def _split(endpoint: str, body: dict[str, Any]) -> tuple[str, str]:
    """(the conversation before the completion, the completion) of a request body."""
    if endpoint == "score":
        return str(body["queries"]), str(body["documents"])
    if "messages" in body:
        messages = body["messages"]
        assert messages[-1]["role"] == "assistant"
        return json.dumps(messages[:-1]), str(messages[-1]["content"])
    text = str(body["input"])
    head, _, tail = text.rpartition("<|assistant|>")
    return head, tail
