"""Small file helpers every output goes through.

* :func:`write_text_atomic` - a temp file with a unique name in the target's
  folder, then ``os.replace``: a reader (or a kill) never sees half a file, and
  two processes never share a temp name.
* :func:`read_jsonl` - JSON Lines split on ``"\\n"`` only.  ``str.splitlines``
  also splits on U+2028, U+2029, U+0085 and other separators that JSON strings
  may hold unescaped (we write ``ensure_ascii=False``), so it would cut a record
  holding such an answer in two.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_text_atomic(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding=encoding, newline="") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def jsonl_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) for the non-blank lines of a JSON Lines text, split on "\\n" only."""
    return [(n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()]


def read_jsonl(path: str | os.PathLike) -> list[Any]:
    """Every record of a JSON Lines file (blank lines skipped; see the module docstring)."""
    return [json.loads(line) for _, line in jsonl_lines(Path(path).read_text(encoding="utf-8"))]
