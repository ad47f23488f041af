"""Datasets and images at a URL (``s3://``, ``gs://``, ``https://``, ``memory://``... anything fsspec reads),
so the machines of a run (Ray nodes, shards) need no shared filesystem: each reads what it needs itself.

A manifest URL (``.jsonl``) names its images relative to its own folder URL, or by absolute URL; a folder URL
is every image file below it.  The folder is the images' confinement: an image URL must stay under it, as a
local path must stay inside its dataset folder (core/inputs.py).  Reads are capped like local ones and fail
their own sample with one sentence.  fsspec brings the protocol (``s3fs``, ``gcsfs`` for the clouds: the
user's own installation, with its own credentials); https needs nothing more.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from .images import BadImageError

_URL = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


def is_url(path: Any) -> bool:
    """A URL that fsspec reads (not a local path, not ``file://``; ``hfds:`` has no ``//`` and is not one)."""
    m = _URL.match(str(path))
    return bool(m) and m.group(1).lower() != "file"


def join(base: str, ref: str) -> str:
    """``ref`` (a manifest's image) relative to the folder URL ``base``, or ``ref`` if it is a URL itself."""
    if is_url(ref):
        return ref
    scheme, rest = base.split("://", 1)
    return f"{scheme}://{posixpath.normpath(posixpath.join(rest, ref))}"


def parent(url: str) -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{posixpath.dirname(rest.rstrip('/'))}"


def inside(url: str, root: str) -> bool:
    """``url`` lies under the folder URL ``root`` (after ``..`` is resolved, on the same scheme)."""
    if not (is_url(url) and is_url(root)):
        return False
    (s1, p1), (s2, p2) = url.split("://", 1), root.split("://", 1)
    p1, p2 = posixpath.normpath(p1), posixpath.normpath(p2).rstrip("/")
    return s1.lower() == s2.lower() and (p1 == p2 or p1.startswith(p2 + "/"))


def _fsspec():
    try:
        import fsspec
    except ImportError:  # pragma: no cover - a core dependency
        raise BadImageError("reading a URL needs fsspec (pip install fsspec)") from None
    return fsspec


def read_bytes(url: str, max_bytes: int) -> bytes:
    """The bytes at ``url``, at most ``max_bytes``; a :class:`BadImageError` naming the URL otherwise."""
    fsspec = _fsspec()
    try:
        with fsspec.open(url, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise BadImageError(f"{url}: file not found") from None
    except (OSError, ValueError, ImportError) as exc:  # a protocol without its package, a refused connection
        raise BadImageError(f"{url}: cannot read ({type(exc).__name__}: {str(exc)[:200]})") from None
    if len(data) > max_bytes:
        raise BadImageError(f"{url}: larger than the image file size limit of {max_bytes} bytes")
    return data


def read_text(url: str, what: str = "file") -> str:
    """The UTF-8 text at ``url`` (a manifest), or one sentence saying why not."""
    from .files import InputFileError

    try:
        data = read_bytes(url, 1 << 30)
    except BadImageError as exc:
        raise InputFileError(str(exc).replace("image file size", f"{what} size")) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{url}: not UTF-8 text (byte {exc.start}); save the {what} as UTF-8") from None


def image_urls(folder: str, suffixes: set[str]) -> list[str]:
    """Every file below the folder URL with an image suffix, sorted."""
    fsspec = _fsspec()
    try:
        fs, path = fsspec.core.url_to_fs(folder)
        found = fs.find(path)
    except (OSError, ValueError, ImportError) as exc:
        from .files import InputFileError

        raise InputFileError(f"{folder}: cannot list ({type(exc).__name__}: {str(exc)[:200]})") from None
    return sorted(fs.unstrip_protocol(p) for p in found if posixpath.splitext(p)[1].lower() in suffixes)
