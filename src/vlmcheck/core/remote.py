"""Datasets and images at a URL (anything fsspec reads), so the machines of a run need no shared filesystem; the
rules are docs/usage.md's ("Data", "Dataset images stay inside their dataset").  A URL's folder is its images'
confinement, as a local dataset folder is (core/inputs.py).

``http(s)://`` is read by aiohttp here, not through fsspec: a URL is compared as the server will see it
(percent-decoded until it no longer changes, dot segments resolved) and that normalised URL is the one
requested, so what was checked is what is read; redirects are followed by hand, each checked again; the body is
read to its end up to the cap (one ``read()`` of fsspec's HTTP file returned only what had arrived); and an image
is read on the event loop under a per-read and a total deadline, so a slow server holds no thread.
"""

from __future__ import annotations

import asyncio
import functools
import os
import posixpath
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote, unquote, urljoin, urlsplit, urlunsplit

from .files import InputFileError
from .images import BadImageError

_URL = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
_HTTP = ("http", "https")
_DEFAULT_PORTS = {"http": 80, "https": 443}

READ_TIMEOUT_S = 30.0  # no byte for this long (connecting, headers, or between reads of the body): the file fails
TOTAL_TIMEOUT_S = 120.0  # a whole file, redirects included, must arrive within this
MAX_REDIRECTS = 5
#: a path is percent-decoded until it stops changing, at most this many times (then it is refused)
_MAX_DECODES = 4
# characters left as they are when the normalised path is encoded again for the request
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


def is_url(path: Any) -> bool:
    """A URL that fsspec reads (not a local path, not ``file://``; ``hfds:`` has no ``//`` and is not one)."""
    m = _URL.match(str(path))
    return bool(m) and m.group(1).lower() != "file"


def is_http(url: Any) -> bool:
    m = _URL.match(str(url))
    return bool(m) and m.group(1).lower() in _HTTP


def _dots(path: str) -> str:
    """``path`` with its dot segments resolved (RFC 3986 5.2.4: ``..`` never climbs above ``/``), a trailing
    ``/`` kept."""
    trail = path.endswith("/") or path.endswith("/.") or path.endswith("/..")
    norm = posixpath.normpath("/" + path.lstrip("/"))
    norm = "/" + norm.lstrip("/")
    return norm + "/" if trail and norm != "/" else norm


def _decoded(path: str) -> str | None:
    """``path`` percent-decoded until it no longer changes (backslashes read as ``/``, as some servers do);
    None where it still changes after :data:`_MAX_DECODES` rounds."""
    for _ in range(_MAX_DECODES):
        nxt = unquote(path)
        if nxt == path:
            return path.replace("\\", "/")
        path = nxt
    return None


def _split_http(url: str):
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        raise BadImageError(f"{url}: not a valid URL (bad port)") from None
    return parts, scheme, host, port


def normalize(url: str) -> str:
    """``url`` as it is requested: for http(s) the scheme and host lowercased, the default port dropped, the
    path percent-decoded once (what a server does), its dot segments resolved and encoded again, the fragment
    dropped; for other schemes the dot segments of the path resolved."""
    if not is_url(url):
        return url
    if not is_http(url):
        scheme, rest = url.split("://", 1)
        trail = "/" if rest.endswith("/") and rest.strip("/") else ""
        norm = posixpath.normpath(rest) if rest else rest
        return f"{scheme.lower()}://{norm.rstrip('/')}{trail}"
    parts, scheme, host, port = _split_http(url)
    user = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    hostport = f"[{host}]" if ":" in host else host
    if port != _DEFAULT_PORTS[scheme]:
        hostport += f":{port}"
    path = quote(_dots(unquote(parts.path) or "/"), safe=_PATH_SAFE)
    return urlunsplit((scheme, user + hostport, path, parts.query, ""))


def origin(url: str) -> tuple[str, str, int] | str:
    """The origin of an http(s) URL (scheme, host, port); the scheme and bucket of another."""
    if is_http(url):
        _, scheme, host, port = _split_http(url)
        return scheme, host, port
    scheme, rest = url.split("://", 1)
    return f"{scheme.lower()}://{rest.split('/', 1)[0]}"


def _checked_path(url: str) -> str | None:
    """The path the confinement check compares: fully decoded, dot segments resolved (None: undecodable)."""
    if is_http(url):
        decoded = _decoded(urlsplit(url).path)
        return None if decoded is None else _dots(decoded)
    rest = url.split("://", 1)[1]
    return "/" + posixpath.normpath(rest).lstrip("/") if rest else "/"


def join(base: str, ref: str) -> str:
    """``ref`` (a manifest's image) relative to the folder URL ``base``, or ``ref`` if it is a URL itself."""
    if is_url(ref):
        return ref
    if is_http(base):
        return normalize(urljoin(base.rstrip("/") + "/", ref))
    scheme, rest = base.split("://", 1)
    return f"{scheme}://{posixpath.normpath(posixpath.join(rest, ref))}"


def parent(url: str) -> str:
    if is_http(url):
        parts = urlsplit(normalize(url))
        return urlunsplit((parts.scheme, parts.netloc, posixpath.dirname(parts.path.rstrip("/")), "", ""))
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{posixpath.dirname(rest.rstrip('/'))}"


def inside(url: str, root: str) -> bool:
    """``url`` lies under the folder URL ``root``: same origin, and its path, percent-decoded and with its dot
    segments resolved, under the root's."""
    if not (is_url(url) and is_url(root)):
        return False
    try:
        if is_http(url) != is_http(root) or origin(url) != origin(root):
            return False
    except BadImageError:
        return False
    p1, p2 = _checked_path(url), _checked_path(root)
    if p1 is None or p2 is None:
        return False
    p2 = p2.rstrip("/")
    return p1.rstrip("/") == p2 or p1.startswith(p2 + "/")


def _too_large(url: str, max_bytes: int) -> BadImageError:
    return BadImageError(f"{url}: larger than the image file size limit of {max_bytes} bytes")


async def fetch(url: str, max_bytes: int, *, root: str | None = None, allow_outside: bool = False,
                read_timeout: float = READ_TIMEOUT_S, total_timeout: float = TOTAL_TIMEOUT_S) -> bytes:
    """The bytes at the http(s) ``url``, read to the end and at most ``max_bytes``; redirects followed only
    within ``url``'s origin and (unless ``allow_outside``) under the folder URL ``root``; a
    :class:`BadImageError` naming the URL otherwise (see the module docstring)."""
    import aiohttp
    import yarl

    current = normalize(url)
    home = origin(current)
    if root is not None and not allow_outside and not inside(current, root):
        raise BadImageError(f"{url}: outside the dataset folder {root}; pass --allow-outside to read it")
    timeout = aiohttp.ClientTimeout(total=total_timeout, sock_connect=read_timeout, sock_read=read_timeout)
    try:
        # one session per file: a session belongs to its loop, and a file's own connection is what a deadline
        # closes; the handshake is small beside an image
        async with aiohttp.ClientSession(timeout=timeout, trust_env=True) as session:
            for _ in range(MAX_REDIRECTS + 1):
                async with session.get(yarl.URL(current, encoded=True), allow_redirects=False,
                                       headers={"Accept-Encoding": "identity"}) as resp:
                    if resp.status in (301, 302, 303, 307, 308):
                        current = _redirect(url, current, resp.headers.get("Location"), home, root, allow_outside)
                        continue
                    if resp.status in (404, 410):
                        raise BadImageError(f"{url}: file not found")
                    if resp.status >= 400:
                        raise BadImageError(f"{url}: cannot read (HTTP {resp.status} {resp.reason or ''})".rstrip())
                    if resp.content_length is not None and resp.content_length > max_bytes:
                        raise _too_large(url, max_bytes)
                    body = bytearray()
                    while chunk := await resp.content.read(1 << 16):  # to the end: b"" only at the end
                        body += chunk
                        if len(body) > max_bytes:
                            raise _too_large(url, max_bytes)
                    return bytes(body)
            raise BadImageError(f"{url}: more than {MAX_REDIRECTS} redirects; not followed")
    except BadImageError:
        raise
    except (aiohttp.ServerTimeoutError, asyncio.TimeoutError, TimeoutError):
        raise BadImageError(
            f"{url}: not read within the deadlines ({read_timeout:g} s without a byte, {total_timeout:g} s in "
            f"all; --url-timeout)") from None
    except aiohttp.ClientPayloadError:
        raise BadImageError(f"{url}: the reply ended before its end (truncated)") from None
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        raise BadImageError(f"{url}: cannot read ({type(exc).__name__}: {str(exc)[:200]})") from None


def _redirect(url: str, current: str, location: str | None, home, root: str | None, allow_outside: bool) -> str:
    if not location:
        raise BadImageError(f"{url}: a redirect without a Location; not followed")
    nxt = normalize(urljoin(current, location))
    if not is_http(nxt) or origin(nxt) != home:
        raise BadImageError(f"{url}: redirected to another origin ({_show(nxt)}); not followed")
    if root is not None and not allow_outside and not inside(nxt, root):
        raise BadImageError(f"{url}: redirected outside the dataset folder {root} (to {_show(nxt)}); not followed; "
                            f"pass --allow-outside to read it")
    return nxt


def _show(url: str) -> str:
    """``url`` without its user information (a redirect may carry credentials)."""
    if not is_http(url):
        return url.split("://", 1)[0] + "://..."
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[-1], parts.path, "", ""))


def _run(coro):
    """Run ``coro`` to its end from synchronous code: on this thread where no loop runs here, else on a
    thread of its own (a manifest read from inside a running loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vlmcheck-url") as pool:
        return pool.submit(asyncio.run, coro).result()


def read_bytes(url: str, max_bytes: int, *, root: str | None = None) -> bytes:
    """The bytes at ``url``, at most ``max_bytes``, redirects staying under ``root``; a :class:`BadImageError`
    naming the URL otherwise."""
    if is_http(url):
        return _run(fetch(url, max_bytes, root=root))
    import fsspec

    try:
        with fsspec.open(url, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise BadImageError(f"{url}: file not found") from None
    except (OSError, ValueError, ImportError) as exc:  # a protocol without its package, a refused connection
        raise BadImageError(f"{url}: cannot read ({type(exc).__name__}: {str(exc)[:200]})") from None
    if len(data) > max_bytes:
        raise _too_large(url, max_bytes)
    return data


@functools.cache
def _pool() -> ThreadPoolExecutor:
    """Threads for the fsspec URLs (s3://, gs://...): not the decoding threads of core/inputs.py, so a slow
    bucket never holds the readers that local files and other samples need."""
    return ThreadPoolExecutor(max_workers=16, thread_name_prefix="vlmcheck-url")


if hasattr(os, "register_at_fork"):  # a forked child has none of its parent's threads: a copied pool waits forever
    os.register_at_fork(after_in_child=_pool.cache_clear)


async def read_bytes_async(url: str, max_bytes: int, *, root: str | None = None, allow_outside: bool = False,
                           read_timeout: float = READ_TIMEOUT_S, total_timeout: float = TOTAL_TIMEOUT_S) -> bytes:
    """:func:`read_bytes` for the event loop: http(s) read on the loop itself (no thread held while a server is
    slow), other protocols on threads of their own."""
    if is_http(url):
        return await fetch(url, max_bytes, root=root, allow_outside=allow_outside, read_timeout=read_timeout,
                           total_timeout=total_timeout)
    return await asyncio.get_running_loop().run_in_executor(_pool(), lambda: read_bytes(url, max_bytes))


def read_text(url: str, what: str = "file") -> str:
    """The UTF-8 text at ``url`` (a manifest), or one sentence saying why not.  Redirects stay in its folder."""
    try:
        data = read_bytes(url, 1 << 30, root=parent(url) if is_http(url) else None)
    except BadImageError as exc:
        raise InputFileError(str(exc).replace("image file size", f"{what} size")) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{url}: not UTF-8 text (byte {exc.start}); save the {what} as UTF-8") from None


def image_urls(folder: str, suffixes: set[str]) -> list[str]:
    """Every file below the folder URL with an image suffix, sorted."""
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(folder)
        found = fs.find(path)
    except (OSError, ValueError, ImportError) as exc:
        raise InputFileError(f"{folder}: cannot list ({type(exc).__name__}: {str(exc)[:200]})") from None
    return sorted(fs.unstrip_protocol(p) for p in found if posixpath.splitext(p)[1].lower() in suffixes)
