"""Small file helpers every output goes through, and the readers of users' input files.

* :func:`write_text_atomic` and its kin: a temp file with a unique name beside the target, then ``os.replace``:
  a reader (or a kill) never sees half a file.  The file gets the mode the umask gives a new file (``mkstemp``
  alone would make every output 0600, unreadable to colleagues and web servers).
* :class:`JsonlRecords` - JSON Lines split on ``"\\n"`` only: ``str.splitlines`` also splits on U+2028 and other
  separators that JSON strings may hold unescaped (we write ``ensure_ascii=False``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator


@functools.cache
def _umask() -> int:
    mask = None
    with contextlib.suppress(OSError):  # Linux: read it without changing it
        with open("/proc/self/status", encoding="ascii") as fh:
            mask = next((int(line.split()[1], 8) for line in fh if line.startswith("Umask:")), None)
    if mask is None:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


@contextlib.contextmanager
def staged_folder(out: str | os.PathLike) -> Iterator[Path]:
    """The folder to write a dataset into (``world make``), so that a kill or an error never leaves half of one
    under ``out``'s name.  Where ``out`` is missing or empty: a hidden ``.NAME.XXXX.partial`` beside it, renamed
    to ``out`` once the block ends, removed if it raises.  Where ``out`` already holds files: ``out`` itself,
    whose files the caller writes by temp file and rename, its index file last."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        yield out
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    except OSError as exc:
        raise _named(exc, out) from None
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp's 0700 -> the mode mkdir gives under the umask
        yield tmp
        if out.is_dir():
            out.rmdir()  # empty, as it was above (one made meanwhile with files in it: the rename fails)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _named(exc: OSError, path: Path) -> OSError:
    """``exc`` (from making a temp file or folder beside ``path``) as if ``path`` itself had failed."""
    return type(exc)(exc.errno, exc.strerror, str(path)) if exc.errno is not None else exc


def broken_link(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be written to when it is a symbolic link that leads nowhere; None otherwise."""
    path = Path(path)
    if not path.is_symlink():
        return None
    try:
        path.resolve(strict=True)
    except FileNotFoundError:
        return f"{path} is a symbolic link to {os.readlink(path)}, which does not exist; give a real folder"
    except (RuntimeError, OSError):  # RuntimeError before Python 3.13, OSError(ELOOP) after
        return f"{path} is a symbolic link that loops; give a real folder"
    return None


def _atomic(path: str | os.PathLike, write: Callable[[int, str], None]) -> Path:
    """``write(fd, tmp)`` fills a temp file beside ``path`` (with the umask's mode), which then replaces ``path``;
    on any failure the temp file goes and ``path`` is as it was."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:  # named by the file the user asked for, never by a temp name they never gave
        raise _named(exc, path) from None
    with contextlib.suppress(AttributeError, OSError):  # Windows: no fchmod; mkstemp's mode stands
        os.fchmod(fd, 0o666 & ~_umask())
    try:
        write(fd, tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def _write_atomic(path: str | os.PathLike, data: str | bytes | Iterable[str], mode: str, **kwargs: Any) -> Path:
    def write(fd: int, tmp: str) -> None:
        with os.fdopen(fd, mode, **kwargs) as fh:
            if isinstance(data, (str, bytes)):
                fh.write(data)
            else:
                fh.writelines(data)

    return _atomic(path, write)


def write_text_atomic(path: str | os.PathLike, text: str | Iterable[str], errors: str = "strict") -> Path:
    """``text``, or the strings of an iterable as they come (a million records never sit in memory as one text),
    as UTF-8, whole or not at all."""
    return _write_atomic(path, text, "w", encoding="utf-8", errors=errors, newline="")


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    return _write_atomic(path, data, "wb")


def copy_atomic(src: str | os.PathLike, dest: str | os.PathLike) -> Path:
    def write(fd: int, tmp: str) -> None:
        os.close(fd)
        shutil.copyfile(src, tmp)

    return _atomic(dest, write)


def jsonl_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) for the non-blank lines of a JSON Lines text, split on "\\n" only."""
    return [(n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()]


class JsonlRecords:
    """The records of a JSON Lines file, read a line at a time each time they are iterated: what the report and
    ``compare`` walk over a million samples with."""

    def __init__(self, path: str | os.PathLike, missing_ok: bool = False) -> None:
        self.path, self.missing_ok = Path(path), missing_ok

    def __iter__(self) -> Iterator[Any]:
        if self.missing_ok and not self.path.exists():
            return
        with open(self.path, encoding="utf-8", newline="\n") as fh:
            yield from (json.loads(line) for line in fh if line.strip())


class InputFileError(ValueError):
    """A user's input file that cannot be read as what it should be; the message names file and line."""


def _rebuild(path: Path) -> str:
    return f"rebuild it from the run's store with: vlmcheck resume {path.parent}"


class SampleRecords(JsonlRecords):
    """A run's samples.jsonl, each record checked as it is read (a JSON object with a ``sample_id`` and a
    ``status``, its ``result`` and ``error`` objects where present): a damaged file is one
    :class:`InputFileError` naming the file and the record, never a traceback."""

    def __iter__(self) -> Iterator[Any]:
        n = 0
        try:
            for n, rec in enumerate(super().__iter__(), 1):
                why = _sample_problem(rec)
                if why:
                    raise InputFileError(f"{self.path}: record {n} is damaged ({why}); {_rebuild(self.path)}")
                yield rec
        except UnicodeDecodeError:
            raise InputFileError(f"{self.path}: not UTF-8 text; {_rebuild(self.path)}") from None
        except json.JSONDecodeError as exc:
            raise InputFileError(f"{self.path}: record {n + 1} is not JSON ({exc.msg}); "
                                 f"{_rebuild(self.path)}") from None


def _kind(x: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", type(None): "null"}.get(type(x), f"a {type(x).__name__}")


def _sample_problem(rec: Any) -> str | None:
    if not isinstance(rec, dict):
        return f"{_kind(rec)}, not an object"
    for key in ("sample_id", "status"):
        if not isinstance(rec.get(key), (str, int)) or isinstance(rec.get(key), bool):
            return f"no {key}" if key not in rec else f"its {key} is {_kind(rec[key])}"
    failed_bare = rec["status"] == "error" and rec.get("error") is None
    return _not_object(rec, "result", "error") or ("a failed sample without its error" if failed_bare else None)


def _not_object(rec: dict, *keys: str, prefix: str = "") -> str | None:
    """Which of ``rec[key]`` (where present and not null) is not a JSON object, as a phrase, or None."""
    bad = next((key for key in keys if rec.get(key) is not None and not isinstance(rec[key], dict)), None)
    return None if bad is None else f"its {prefix}{bad} is {_kind(rec[bad])}, not an object"


def _results_problem(info: dict) -> str | None:
    """Why a results.json's content is not a run's results (its shape), or None."""
    if not isinstance(info["task"], str):
        return f"its task is {_kind(info['task'])}, not a name"
    return (_not_object(info, "spec", "metrics", "counts", "usage")
            or _not_object(info.get("spec") or {}, "task_spec", prefix="spec.")
            or _not_object(info.get("metrics") or {}, "headline", prefix="metrics."))


def stat_regular(path: str | os.PathLike, what: str, error: type[Exception] = InputFileError, *,
                 missing: str = "no such file or directory", folder: str = "a folder",
                 st: os.stat_result | None = None) -> os.stat_result:
    """``os.stat(path)`` (or ``st``, the caller's, taken just before) of a regular file, else ``error`` in one
    sentence: a FIFO would block a reader forever and ``/dev/zero`` read until memory runs out.  ``what`` names
    the file with its article ("a manifest")."""
    if st is None:
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            raise error(f"{path}: {missing}") from None
        except OSError as exc:
            raise error(f"{path}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{path}: is {folder}, not {what}")
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{path}: not a regular file (a FIFO, device or socket is never read as {what})")
    return st


def open_regular(path: str | os.PathLike, what: str, error: type[Exception] = InputFileError
                 ) -> tuple[int, os.stat_result]:
    """(fd, fstat) of ``path`` opened for reading, after :func:`stat_regular`: opened with ``O_NONBLOCK`` so
    that a FIFO swapped in after the check never blocks ``open``, and refused unless still a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        return fd, stat_regular(path, what, error, st=os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise


def read_upto(fd: int, size: int, cap: int) -> bytes:
    """At most ``cap + 1`` bytes of a regular file (more than ``cap``: it grew past the cap).  Asks for the size
    stat gave plus one byte, then 64 kB at a time, never for the cap at once: a read(cap + 1) allocates the
    whole cap (256 MB for an image) first."""
    chunks, got = [], 0
    want = min(size, cap) + 1
    while got <= cap:
        ask = min(want - got if got < want else 1 << 16, cap + 1 - got)
        chunk = os.read(fd, ask)
        chunks.append(chunk)
        got += len(chunk)
        if len(chunk) < ask:  # a regular file reads short only at its end: no read for b""
            break
    return b"".join(chunks)


def read_text_input(path: str | os.PathLike, what: str = "file") -> str:
    """The UTF-8 text of a user's input file (a leading byte-order mark accepted), or one sentence saying why not."""
    path = Path(path)
    stat_regular(path, f"a {what}")
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{path}: not UTF-8 text (byte {exc.start}); save the {what} as UTF-8") from None
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read ({exc.strerror or exc})") from None


def iter_jsonl_objects(path: str | os.PathLike, what: str = "JSON Lines file", text: str | None = None,
                       empty_ok: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each record of a user's JSON Lines file, read as iterated (a million-row
    manifest is never in memory at once): each line must be a JSON object, and one at least must be there
    (unless ``empty_ok``), else one sentence naming file and line.  ``text``: the file's text, already read
    (from a URL), named ``path``."""
    if text is None:
        path = Path(path)
    lines: Iterable[str] = _file_lines(path, what) if text is None else _text_lines(text)
    seen = False
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputFileError(f"{path}:{n}: invalid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(row, dict):
            raise InputFileError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
        seen = True
        yield n, row
    if not seen and not empty_ok:
        raise InputFileError(f"{path}: the {what} is empty")


def _file_lines(path: Path, what: str) -> Iterator[str]:
    """A local file's lines split on "\\n" only, read as iterated (never the whole text, nor the 4 bytes a
    character of an ``io.StringIO`` over it)."""
    stat_regular(path, f"a {what}")
    try:
        with open(path, encoding="utf-8-sig", newline="\n") as fh:
            yield from fh
    except UnicodeDecodeError:
        read_text_input(path, what)  # says where, counted from the start of the file
        raise
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _text_lines(text: str) -> Iterator[str]:
    return (m.group() for m in re.finditer(r"[^\n]*\n|[^\n]+\Z", text))


def require_str(row: dict[str, Any], key: str, where: str) -> str:
    """``row[key]`` if it is a non-empty string, else an InputFileError naming ``where``."""
    value = row.get(key)
    if not isinstance(value, str) or not value:
        got = "missing" if value is None else f"a {type(value).__name__}"
        raise InputFileError(f"{where}: {key!r} must be a non-empty string ({got})")
    return value


@functools.lru_cache(maxsize=1)
def _unique_keys_loader() -> Any:
    """yaml.SafeLoader refusing a key given twice in one mapping (else the last one wins silently)."""
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if not isinstance(key, (str, int, float, bool)):
                    continue  # an unhashable key: SafeLoader's own error
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"the key {key!r} is given twice in one mapping", key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeys


def read_yaml_mapping(path: str | os.PathLike, what: str, expected: str) -> dict[str, Any]:
    """A user's YAML file that must hold a mapping (a recipe, a sweep config), or one sentence naming the file,
    the line and column of a syntax error, or what it holds instead (``expected`` describes the mapping)."""
    import yaml

    try:
        data = yaml.load(read_text_input(path, what), Loader=_unique_keys_loader())  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InputFileError(f"{path}: not valid YAML ({getattr(exc, 'problem', None) or exc}{where})") from None
    if not isinstance(data, dict):
        got = "an empty file" if data is None else "a " + type(data).__name__
        raise InputFileError(f"{path}: a {what} is a YAML mapping ({expected}), not {got}")
    return data


def read_results(folder: str | os.PathLike, need_samples: bool = True) -> dict[str, Any]:
    """A finished run folder's results.json (and, with ``need_samples``, the check that samples.jsonl is
    there): one sentence for a folder that is not a finished run or a file that is not vlmcheck's."""
    folder = Path(folder)
    results = folder / "results.json"
    if not folder.exists():  # mistyped: missing, not unfinished
        raise InputFileError(f"{folder}: no such folder")
    if not results.is_file() or (need_samples and not (folder / "samples.jsonl").is_file()):
        what = "results.json and samples.jsonl" if need_samples else "results.json"
        raise InputFileError(f"{folder}: not a finished run folder (no {what})")
    try:
        info = json.loads(read_text_input(results, "results file"))
    except ValueError as exc:
        raise InputFileError(f"{results}: not valid JSON ({exc}); {_rebuild(results)}") from None
    if not isinstance(info, dict) or "task" not in info:
        raise InputFileError(f"{results}: not a vlmcheck results file")
    why = _results_problem(info)
    if why:
        raise InputFileError(f"{results}: damaged ({why}); {_rebuild(results)}")
    return info
