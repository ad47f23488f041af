"""Text made safe for where it goes.

* A terminal or a log: text from outside (a dataset's questions, a server's messages, file names) made inert:
  control characters (ESC, and so every ANSI/OSC sequence; C1 controls; carriage return) and the bidirectional
  overrides that reorder what is shown are written as visible escapes (``\\x1b``, ``\\u202e``); newline and tab
  are kept.  Written by hand: ``repr`` escapes every non-ASCII letter, and rich strips only a few controls, leaving ESC.
* A UTF-8 file or database: a file name that is not valid UTF-8 (Python reads its bad bytes as lone surrogates)
  kept as escapes (:func:`printable`, :func:`json_text`); JSON encoders made once (:func:`json_encoder`).
"""

from __future__ import annotations

import functools
import json
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


def printable(name: str) -> str:
    """A file name as text that any UTF-8 file or database holds: its lone surrogates as ``\\xff`` escapes, so
    the id stays unique and names the file."""
    return name if utf8_text(name) else name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def json_encoder(**kwargs: Any) -> Callable[[Any], str]:
    """``functools.partial(json.dumps, **kwargs)``, the same text (tested), its encoder made once per set of
    arguments: json.dumps makes a C encoder for every call (about half the time for a sample's record, of which
    a fast API run encodes five per request)."""
    try:
        hash(tuple(kwargs.items()))
    except TypeError:  # an unhashable argument (a list of separators): json.dumps itself
        return lambda obj: json.dumps(obj, **kwargs)
    return _encoder(**kwargs)


@functools.cache
def _encoder(**kwargs: Any) -> Callable[[Any], str]:
    """``JSONEncoder(**kwargs).encode`` with the C encoder ``iterencode`` makes per call made once, without
    ``check_circular``'s per-call dict (so one encoder serves every call and thread; a circular object, which
    vlmcheck never encodes, fails with RecursionError instead of ValueError)."""
    enc, make = json.JSONEncoder(**kwargs), json.encoder.c_make_encoder
    if make is None or enc.indent is not None:  # no C encoder (another Python), or indented: as json does
        return enc.encode
    quote = json.encoder.encode_basestring_ascii if enc.ensure_ascii else json.encoder.encode_basestring
    encoder = make(None, enc.default, quote, None, enc.key_separator, enc.item_separator, enc.sort_keys,
                   enc.skipkeys, enc.allow_nan)

    def encode(obj: Any) -> str:
        if isinstance(obj, str):  # JSONEncoder.encode's own case for a bare string
            return quote(obj)
        return "".join(encoder(obj, 0))

    return encode


def json_text(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` with non-ASCII text as is, and escaped (``\\udcff``, lossless) where a string holds lone
    surrogates (a file name that is not valid UTF-8), which no UTF-8 file or SQLite text can hold."""
    return json_text_encoder(**kwargs)(obj)


def json_text_encoder(**kwargs: Any) -> Callable[[Any], str]:
    """:func:`json_text` with these arguments, as a function made once (see :func:`json_encoder`)."""
    plain, ascii_only = json_encoder(ensure_ascii=False, **kwargs), json_encoder(ensure_ascii=True, **kwargs)

    def encode(obj: Any) -> str:
        text = plain(obj)
        return text if utf8_text(text) else ascii_only(obj)

    return encode


_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_text(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (it holds no lone surrogate); ASCII, most records, at once."""
    return text.isascii() or not _SURROGATE.search(text)
