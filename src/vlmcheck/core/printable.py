"""Text from outside (a dataset's questions, a server's messages, file names) made inert for a terminal or a log:
control characters (ESC, and so every ANSI/OSC sequence; C1 controls; carriage return) and the bidirectional
overrides that reorder what is shown are written as visible escapes (``\\x1b``, ``\\u202e``); newline and tab are
kept.  Written by hand: ``repr`` escapes every non-ASCII letter, and rich strips only a few controls, leaving ESC."""

from __future__ import annotations

import re
from typing import Any

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
#: what JSON's encoder leaves as it is (it escapes the C0 controls itself)
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def inert(text: str) -> str:
    """``text`` with every control and bidi character written as a visible escape."""
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def inert_obj(obj: Any) -> Any:
    """:func:`inert` on every string of a JSON-like object (keys included)."""
    if isinstance(obj, str):
        return inert(obj)
    if isinstance(obj, dict):
        return {inert_obj(k): inert_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [inert_obj(v) for v in obj]
    return obj


def json_inert(text: str) -> str:
    """JSON text whose C1 controls and bidi characters are JSON ``\\uXXXX`` escapes: the same value, inert on a
    terminal (they can stand only inside strings, where the escape means the same character)."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
