"""Keeping credentials out of everything a remote caller prints, logs or raises."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

# Bearer tokens and OpenAI-style keys (servers sometimes echo part of a bad key).
_KEYLIKE = re.compile(r"(?i)(bearer\s+)\S+|\bsk-[A-Za-z0-9_*\-.]{4,}")
# A message is one line of at most this many characters.
MAX_CHARS = 300


class Secret:
    """Wraps a key so that no repr, traceback local or f-string shows it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


def scrub(text: str, secret: Secret | str | None = None) -> str:
    """`text` on one line, at most 300 characters, without the key or anything key-like."""
    value = secret.reveal() if isinstance(secret, Secret) else secret
    if value and len(value) >= 4:  # a shorter "key" would blank out ordinary words
        text = text.replace(value, "***")
    text = _KEYLIKE.sub(lambda m: (m.group(1) or "") + "***", text)
    return " ".join(text.split())[:MAX_CHARS]


def redact_url(url: str) -> str:
    """The URL without user info or query (either could carry a credential)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))
