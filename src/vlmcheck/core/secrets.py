"""Keeping API keys out of everything vlmcheck writes: keys are registered here when an adapter is made, and every
string that reaches the store, a log, a results file or a report passes through :func:`redact`, which masks each
registered key, common key shapes, and any run of eight or more characters of a key (SDK errors echo a prefix,
a suffix or a middle of one).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from typing import Any, Callable

from .printable import inert, map_strings

_lock = threading.Lock()
_secrets: set[str] = set()
REDACTED = "[REDACTED]"
_MIN_LEN = 6
# Shapes of well-known key formats, masked even if never registered.
_PATTERNS = [
    re.compile(r"sk-[A-Za-z0-9_\-]{16,}"),  # sk-ant- keys too
    re.compile(r"AIza[0-9A-Za-z_\-]{30,}"),
    re.compile(r"((?i:bearer)\s+)[A-Za-z0-9._\-]{12,}"),
]
# One pass that tells whether any shape occurs, so the common clean string costs one search.
_ANY_PATTERN = re.compile("|".join(p.pattern for p in _PATTERNS))

#: Spec and URL query parameters that carry a credential: never written, used only for the request.
SECRET_PARAM_NAMES = frozenset({
    "api_key", "api-key", "apikey", "x-api-key", "key", "token", "access_token", "id_token", "refresh_token",
    "secret", "client_secret", "password", "passwd", "pwd", "sig", "signature", "auth", "authorization",
    "credential", "credentials", "sas", "x-amz-signature", "x-goog-signature", "x-amz-security-token",
})
_SECRET_SUFFIXES = ("_token", "-token", "_secret", "-secret", "_password", "_key", "-key", "_signature")


def is_secret_param(name: str) -> bool:
    """Whether a query parameter's name says it carries a credential (``key_env`` names a variable: it does not)."""
    n = name.strip().lower()
    return n in SECRET_PARAM_NAMES or n.endswith(_SECRET_SUFFIXES)


# Registered keys, longest first, as an immutable snapshot that redact() reads without locking.
_by_length: tuple[str, ...] = ()
# Any run of _PART or more characters of a key of _PART_MIN_KEY or more is masked; shorter runs are no usable leak,
# and masking them would eat ordinary words.
_PART = 8
_PART_MIN_KEY = 12
# (aligned chunks, part -> [(key, offset)]), replaced whole on registration.  Any _PART-long run of a key holds
# one of its chunks of _PART // 2 characters at multiples of _PART // 2, so a text holding none of them holds no
# part: a clean string costs a few substring searches, not a regex alternation of every part.
_parts: tuple[tuple[str, ...], dict[str, tuple[tuple[str, int], ...]]] = ((), {})


# Whether every registered key appears in JSON text as in its string (see redacted_json), and what may need
# redaction as it shows in JSON text, lower-cased: a key shape's start, or the word that starts a Bearer token.
_verbatim = True
_JSON_TRIGGERS = ("sk-", "aiza", "bearer")


def register_secret(value: str | None) -> None:
    global _by_length, _parts, _verbatim
    if value and len(value) >= _MIN_LEN:
        with _lock:
            if value in _secrets:
                return
            _secrets.add(value)
            _verbatim = _verbatim and value.isascii() and value.isprintable() and not ('"' in value or "\\" in value)
            _by_length = tuple(sorted(_secrets, key=len, reverse=True))
            parts: dict[str, list[tuple[str, int]]] = {}
            chunks: set[str] = set()
            half = _PART // 2
            for s in _by_length:
                if len(s) >= _PART_MIN_KEY:
                    for i in range(len(s) - _PART + 1):
                        parts.setdefault(s[i:i + _PART], []).append((s, i))
                    chunks.update(s[i:i + half] for i in range(0, len(s) - half + 1, half))
            _parts = (tuple(sorted(chunks)), {k: tuple(v) for k, v in parts.items()})


def _mask_parts(text: str, parts_of: dict[str, tuple[tuple[str, int], ...]]) -> str:
    """Replace every maximal run of text that is a run of a registered key (at least _PART long)."""
    out, pos, i = [], 0, 0
    while i <= len(text) - _PART:
        hits = parts_of.get(text[i:i + _PART])
        if hits is None:
            i += 1
            continue
        end = i + _PART
        for key, offset in hits:  # extend the match as far as the key goes on matching
            j, k = end, offset + _PART
            while j < len(text) and k < len(key) and text[j] == key[k]:
                j, k = j + 1, k + 1
            end = max(end, j)
        out.append(text[pos:i])
        out.append(REDACTED)
        pos = i = end
    out.append(text[pos:])
    return "".join(out)


def secret_from_env(name: str | None) -> str | None:
    value = os.environ.get(name) if name else None
    register_secret(value)
    return value


def redact(text: str) -> str:
    if not text or len(text) < _MIN_LEN:  # shorter than any key or key shape
        return text
    for s in _by_length:
        text = text.replace(s, REDACTED)
    chunks, parts_of = _parts
    if any(c in text for c in chunks):
        text = _mask_parts(text, parts_of)
    if _ANY_PATTERN.search(text):
        for pat in _PATTERNS:
            text = pat.sub(lambda m: (m.group(1) if m.lastindex else "") + REDACTED, text)
    return text


def redact_obj(obj: Any) -> Any:
    return map_strings(obj, redact)


def redacted_json(obj: Any, dumps: Callable[[Any], str]) -> str:
    """``dumps(redact_obj(obj))``, without walking ``obj`` (a Python call per string, dearer than the encoding)
    when its JSON text shows nothing to redact.  Exact because a registered key of printable ASCII without '"' or
    '\\' (else the walk is always taken), every run of it and a key shape's start appear in the JSON text as in
    the string that held them; a Bearer token's whitespace may be escaped, so "bearer" alone sends the object the
    long way."""
    text = dumps(obj)
    low = text.lower()  # a plain copy: faster than a case-insensitive regex over the text
    if (not _verbatim or any(s in text for s in _by_length) or any(c in text for c in _parts[0])
            or any(t in low for t in _JSON_TRIGGERS)):
        return dumps(redact_obj(obj))
    return text


class RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:
            return True
        record.msg = inert(redact(msg))  # a log line holds servers' and datasets' text: no escape sequence of theirs
        record.args = None
        return True


def install_log_redaction(logger: logging.Logger | None = None) -> None:
    target = logger or logging.getLogger()
    for filtered in (target, *target.handlers):
        if not any(isinstance(f, RedactingFilter) for f in filtered.filters):
            filtered.addFilter(RedactingFilter())
