"""Keeping API keys out of everything vlmcheck writes.

Keys are looked up at adapter construction time (flag, spec parameter or
environment variable) and registered here.  Every string that reaches the run
store, a log record, ``results.json``, ``samples.jsonl`` or a report passes
through :func:`redact`, which replaces each registered key (and common key
shapes) with ``[REDACTED]``.  SDK error messages are the usual leak - some
echo a prefix of the key - so prefixes of registered keys are masked too.
"""

from __future__ import annotations

import logging
import os
import re
import threading

_lock = threading.Lock()
_secrets: set[str] = set()
REDACTED = "[REDACTED]"
_MIN_LEN = 6
# Shapes of well-known key formats, masked even if never registered.
_PATTERNS = [
    re.compile(r"sk-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"AIza[0-9A-Za-z_\-]{30,}"),
    re.compile(r"((?i:bearer)\s+)[A-Za-z0-9._\-]{12,}"),
]
# One pass that tells whether any shape occurs, so the common clean string costs one search.
_ANY_PATTERN = re.compile("|".join(p.pattern for p in _PATTERNS))

SECRET_PARAM_NAMES = frozenset({"api_key", "key", "token", "api-key", "apikey", "secret"})


# Registered keys, longest first, as an immutable snapshot that redact() reads without locking.
_by_length: tuple[str, ...] = ()


def register_secret(value: str | None) -> None:
    global _by_length
    if value and len(value) >= _MIN_LEN:
        with _lock:
            _secrets.add(value)
            _by_length = tuple(sorted(_secrets, key=len, reverse=True))


def secret_from_env(name: str | None) -> str | None:
    value = os.environ.get(name) if name else None
    register_secret(value)
    return value


def redact(text: str) -> str:
    if not text or len(text) < _MIN_LEN:  # shorter than any key or key shape
        return text
    for s in _by_length:
        if s in text:
            text = text.replace(s, REDACTED)
        # Masked prefixes such as "sk-abc123...": mask any 12+ char prefix.
        if len(s) >= 16 and s[:12] in text:
            text = text.replace(s[:12], REDACTED)
    if _ANY_PATTERN.search(text):
        for pat in _PATTERNS:
            text = pat.sub(lambda m: (m.group(1) if m.lastindex else "") + REDACTED, text)
    return text


def redact_obj(obj):
    """Redact every string inside a JSON-like structure."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_obj(v) for v in obj]
    return obj


class RedactingFilter(logging.Filter):
    """Logging filter that redacts secrets from every record's final message."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:
            return True
        record.msg = redact(msg)
        record.args = None
        return True


def install_log_redaction(logger: logging.Logger | None = None) -> None:
    target = logger or logging.getLogger()
    if not any(isinstance(f, RedactingFilter) for f in target.filters):
        target.addFilter(RedactingFilter())
    for handler in target.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
