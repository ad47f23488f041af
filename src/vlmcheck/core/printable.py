"""Text from outside (a dataset's questions, a server's messages, file names) made inert for a terminal or a log:
control characters (ESC, and so every ANSI/OSC sequence; C1 controls; carriage return) and the bidirectional
overrides that reorder what is shown are written as visible escapes (``\\x1b``, ``\\u202e``); newline and tab are
kept.  Written by hand: ``repr`` escapes every non-ASCII letter, and rich strips only a few controls, leaving ESC."""

from __future__ import annotations

import re
from typing import Any, Callable

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
#: what JSON's encoder leaves as it is (it escapes the C0 controls itself)
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def inert(text: str) -> str:
    """``text`` with every control and bidi character written as a visible escape."""
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def map_strings(obj: Any, fn: Callable[[str], str], keys: bool = False) -> Any:
    """``fn`` on every string of a JSON-like object (with ``keys``, its keys' too); tuples come back as lists."""
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, dict):
        return {fn(k) if keys and isinstance(k, str) else k: map_strings(v, fn, keys) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [map_strings(v, fn, keys) for v in obj]
    return obj


def inert_obj(obj: Any) -> Any:
    """:func:`inert` on every string of a JSON-like object (keys included)."""
    return map_strings(obj, inert, keys=True)


def json_inert(text: str) -> str:
    """JSON text whose C1 controls and bidi characters are JSON ``\\uXXXX`` escapes: the same value, inert on a
    terminal (they can stand only inside strings, where the escape means the same character)."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
