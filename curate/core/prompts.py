"""What a model is asked: a plain text prompt or a list of chat messages."""

from __future__ import annotations

from typing import Any, Literal

Mode = Literal["chat", "completion"]
Message = dict[str, Any]
Prompt = str | list[Message]
