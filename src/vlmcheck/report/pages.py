"""The sample rows of a large run as files the page loads on demand, so the report opens at any size
(docs/usage.md, "Reports").  The files are scripts that hand their rows to the page (``vlmcheckRows(run, k,
rows)``), not JSON for ``fetch``, which a page opened from a plain folder (``file://``) is refused.  Rows are
written as they are made: the report of a million samples never holds a million rows.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..core.files import write_text_atomic

INLINE_MAX = 2000  # a run with this many rows or fewer keeps them all in the page
CHUNK = 1000  # rows per file of a larger run
FIRST = 50  # rows of a larger run in the page: its first page, shown before any file loads


def script_json(obj: Any) -> str:
    """JSON safe inside a <script> element or a script file: no '</', no '<!--', no U+2028/9."""
    text = json.dumps(obj, ensure_ascii=False, default=str)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def rows_json(rows: Iterable[dict[str, Any]], run: int, files_dir: Path, files_rel: str,
              written: set[str] | None = None) -> str:
    """What the page embeds for one run's rows: all of them (small runs), or the first page and where the
    rest are (written here as they come, their names added to ``written``)."""
    written = set() if written is None else written
    it: Iterator[dict[str, Any]] = iter(rows)
    head: list[dict[str, Any]] = []
    for row in it:
        head.append(row)
        if len(head) > INLINE_MAX:
            break
    else:
        return script_json(head)
    files_dir.mkdir(parents=True, exist_ok=True)
    index: list[list[Any]] = []
    rest, n_chunks = itertools.chain(head, it), 0  # at most INLINE_MAX + 1 rows held at once
    while chunk := list(itertools.islice(rest, CHUNK)):
        for row in chunk:  # flags: 1 failed or wrong (the "only failures" filter), 2 the runs disagree on it
            failed = row.get("status") != "done" or row.get("correct") is False
            index.append([row["id"], (1 if failed else 0) | (2 if row.get("disagree") else 0)])
        name = f"rows-{run}-{n_chunks}.js"
        write_text_atomic(files_dir / name, f"vlmcheckRows({run},{n_chunks},{script_json(chunk)});\n",
                          errors="backslashreplace")
        written.add(name)
        n_chunks += 1
    write_text_atomic(files_dir / f"rows-{run}-index.js", f"vlmcheckIndex({run},{script_json(index)});\n",
                      errors="backslashreplace")
    written.add(f"rows-{run}-index.js")
    return script_json({"paged": True, "total": len(index), "chunk": CHUNK, "chunks": n_chunks,
                        "base": f"{files_rel}/rows-{run}-", "first": head[:FIRST]})


def prune_rows(files_dir: Path, keep: set[str]) -> None:
    """Remove the rows files of an earlier build of the same report that this build did not write (fewer
    runs or chunks now, or a run that now fits in the page); thumbnails stay, for reuse."""
    for path in files_dir.glob("rows-*.js"):
        if path.name not in keep:
            path.unlink(missing_ok=True)
