"""Errors raised by adapters, classified so the runner knows what to retry (docs/usage.md "Retries").

Adapters translate their SDK's exceptions into :class:`ModelCallError` with a ``kind``, and the retry policy
depends only on the kind.  Retried: ``rate_limit`` (HTTP 429, Retry-After honoured), ``server`` (5xx),
``timeout``, ``connection`` (refused, reset), ``malformed`` (invalid JSON, no choices: a glitch, few tries).  Not
retried: ``bad_request`` (400, 404, 413, 422), ``auth`` (401, 403), ``unsupported`` (the model cannot do what was
asked), ``too_large`` (a reply over ``max_response_mb``, an answer over ``max_answer_chars``).
"""

from __future__ import annotations

from typing import Literal

ErrorKind = Literal[
    "rate_limit", "server", "timeout", "connection", "malformed", "bad_request", "auth", "unsupported", "too_large"
]


async def read_capped(chunks, max_bytes: int) -> bytes:
    """The bytes of an async iterator of (decompressed) chunks, refused with a ``too_large`` error as soon as they
    pass ``max_bytes``: memory stays bounded whatever a server sends, a gzip bomb included."""
    parts, size = [], 0
    async for chunk in chunks:
        size += len(chunk)
        if size > max_bytes:
            raise ModelCallError("too_large", f"the reply is larger than {max_bytes / 1e6:g} MB (max_response_mb); "
                                              "raise ?max_response_mb= if the server's replies are that large")
        parts.append(chunk)
    return b"".join(parts)


class SpecError(ValueError):
    """A model spec string that cannot be parsed or resolved."""


class PreflightError(SpecError):
    """A model that cannot serve the run, found before its first sample by the model's optional ``preflight()``
    (:class:`vlmcheck.core.roles.SupportsPreflight`): unreachable, key rejected, or the model not served."""


RETRYABLE: frozenset[str] = frozenset({"rate_limit", "server", "timeout", "connection", "malformed"})


class ModelCallError(RuntimeError):
    def __init__(self, kind: ErrorKind, message: str, *, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind, self.status, self.retry_after = kind, status, retry_after

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE

    def __str__(self) -> str:
        code = f" (HTTP {self.status})" if self.status else ""
        return f"{self.kind}{code}: {self.args[0]}"


def kind_for_status(status: int) -> ErrorKind:
    if status == 429:
        return "rate_limit"
    if status in (401, 403):
        return "auth"
    return "server" if status >= 500 else "timeout" if status in (408, 409) else "bad_request"


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime
    from datetime import datetime, timezone

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def shorten_middle(text: str, limit: int = 400, mark: str = " [...] ") -> str:
    """``text`` cut to about ``limit`` characters by taking words out of its middle, never its end: an error
    message opens with what failed and closes with what to do, and both are kept."""
    if len(text) <= limit:
        return text
    room = max(limit - len(mark), 2)
    n_head = room * 2 // 5
    head, tail = text[:n_head], text[len(text) - (room - n_head):]
    if not text[n_head].isspace() and " " in head:  # whole words on both sides of the cut
        head = head[: head.rfind(" ")]
    if not text[len(text) - len(tail) - 1].isspace() and " " in tail:
        tail = tail[tail.find(" ") + 1:]
    return head.rstrip() + mark + tail.lstrip()
