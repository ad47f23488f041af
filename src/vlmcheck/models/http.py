"""A neutral JSON-over-HTTP client: the base every HTTP dialect (OpenAI, Anthropic, Gemini, a new one) builds on
(docs/usage.md, "Your models: specs").  No retries here: the scheduler retries and counts them.  Requests go out with
aiohttp: through the ``openai`` SDK (httpx underneath) a chat request costs several times the client CPU
(``bench/api_throughput.py``).  Tests send a client's requests to an httpx transport instead (:func:`in_process`), so
the adapter's own code builds the request with no socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
from typing import Any, Callable, Iterator
from urllib.parse import unquote, urlsplit

from .._version import __version__
from ..core.errors import ModelCallError, SpecError, read_capped
from ..core.printable import json_encoder
from ..core.secrets import redact, register_secret, secret_from_env
from ..core.spec import ModelSpec
from ..run.loop_clients import PerLoopClients
from ._http_errors import REFUSED, body_message, connection_reason, status_error

USER_AGENT = f"vlmcheck/{__version__}"
_PIECES_MIN = 1 << 19  # bodies from 512 kB on go piece by piece (PiecesPayload); smaller ones joined
_IN_PROCESS: Any = None  # the transport of in_process(), for clients made inside it


@contextlib.contextmanager
def in_process(handler: Callable[[Any], Any]) -> Iterator[list[Any]]:
    """Every :class:`JSONHTTP` client made inside this block sends its requests to ``handler`` (an
    ``httpx.Request`` -> ``httpx.Response`` function, run by ``httpx.MockTransport``) instead of a socket.
    Yields the list of requests the handler was given, in order."""
    import httpx

    global _IN_PROCESS
    seen: list[Any] = []
    before, _IN_PROCESS = _IN_PROCESS, httpx.MockTransport(lambda request: seen.append(request) or handler(request))
    try:
        yield seen
    finally:
        _IN_PROCESS = before


def _ssl_context() -> Any:
    import ssl

    import certifi  # httpx's dependency

    if os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context()  # OpenSSL reads both variables
    return ssl.create_default_context(cafile=certifi.where())


def env_proxy(url: str) -> tuple[str | None, dict[str, str] | None]:
    """The proxy the environment names for ``url`` (``HTTP(S)_PROXY``, ``ALL_PROXY``, ``NO_PROXY``), if any, and the
    ``Proxy-Authorization`` header for credentials in its URL.  Resolved once per server: with ``trust_env=True``
    aiohttp reads the environment and ``~/.netrc`` again on every request, in a worker thread."""
    import base64
    import urllib.request

    parts = urlsplit(url)
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        return None, None
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy:
        return None, None
    p = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if p.username is None:
        return p.geturl(), None
    token = base64.b64encode(f"{unquote(p.username)}:{unquote(p.password or '')}".encode()).decode()
    register_secret(token)
    register_secret(p.password)
    bare = p._replace(netloc=p.hostname + (f":{p.port}" if p.port else "")).geturl()
    return bare, {"Proxy-Authorization": f"Basic {token}"}


def _session(https: bool, transport: Any) -> Any:
    """One HTTP session bound to the running loop (see :class:`PerLoopClients`): aiohttp's, or an httpx client over
    a test's transport."""
    if transport is not None:
        import httpx

        return httpx.AsyncClient(transport=transport)
    import aiohttp

    # the scheduler bounds the requests in flight; this is the SDK's own connection ceiling
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1000, ssl=_ssl_context() if https else True))


class JSONHTTP:
    """Requests to one server of a JSON-over-HTTP dialect.  Subclasses declare the dialect's differences as the
    class attributes below; the key is optional (a local server takes none: then no key header is sent)."""

    #: the header that carries the key (``Authorization``, ``x-api-key`` ...); None: the dialect sends no key
    key_header: str | None = None
    #: the key's scheme in that header (``Bearer``), or empty for the bare key
    key_scheme: str = ""
    #: where requests go when the spec names no base URL; empty: the spec must name one
    default_base_url: str = ""
    #: the environment variable the provider itself documents for another base URL, if any
    base_url_env: str | None = None

    def __init__(self, spec: ModelSpec, key: str | None = None, *, timeout: float = 600.0, n_sessions: int = 1,
                 max_bytes: int = 8_000_000) -> None:
        base = spec.base_url or (os.environ.get(self.base_url_env) if self.base_url_env else None) \
            or self.default_base_url
        if not base:
            raise SpecError(f"{spec.canonical()}: this provider has no default server; give its URL (@URL)")
        self.base_url = base.rstrip("/")
        self.timeout, self.max_bytes = timeout, max_bytes
        self.headers = {"Accept": "application/json", "Content-Type": "application/json", "User-Agent": USER_AGENT}
        if key and self.key_header:
            register_secret(key)
            self.headers[self.key_header] = f"{self.key_scheme} {key}" if self.key_scheme else key
        self.headers.update(self.dialect_headers())
        auth = spec.request_auth()
        self.headers.update(auth.get("default_headers", {}))
        self.query = auth.get("default_query") or None
        self.transport = _IN_PROCESS
        self.proxy, self.proxy_headers = (None, None) if self.transport is not None else env_proxy(self.base_url)
        https = self.base_url.startswith("https:")
        self.sessions = PerLoopClients(lambda: _session(https, self.transport), n_sessions)
        self._timeout: Any = None  # the aiohttp.ClientTimeout of self.timeout, made on the first request

    def dialect_headers(self) -> dict[str, str]:
        """Fixed headers of the dialect (a version header, an organisation read from the environment)."""
        return {}

    async def request(self, method: str, path: str, body: Any = None, *,
                      timeout: float | None = None) -> bytes:
        """The body of a 2xx answer to ``method path``; a :class:`ModelCallError` for anything else.  ``body``:
        bytes, or :func:`json_pieces`."""
        if isinstance(body, list):
            size = sum(len(p) for p in body)
            body = _joined(body) if size < _PIECES_MIN or self.transport is not None else PiecesPayload(body)
        import aiohttp

        try:
            send = self._send_aiohttp if self.transport is None else self._send_httpx
            status, headers, data = await send(method, path, body, timeout)
        except asyncio.TimeoutError:
            raise ModelCallError("timeout", f"no answer within {timeout or self.timeout:g} s") from None
        except (aiohttp.ClientError, OSError) as exc:
            reason = connection_reason(exc)
            raise ModelCallError("connection", REFUSED if reason == "connection refused" else redact(reason)) from exc
        if status >= 400:
            raise _status_error(status, headers, data)
        return data

    async def _send_aiohttp(self, method: str, path: str, body: Any, timeout: float | None) -> tuple:
        import aiohttp

        session = self.sessions.get()
        if timeout is not None and timeout != self.timeout:
            client_timeout = aiohttp.ClientTimeout(total=timeout)
        else:  # one object for every request, not one each
            client_timeout = self._timeout = self._timeout or aiohttp.ClientTimeout(total=self.timeout)
        async with session.request(method, self.base_url + path, data=body, headers=self.headers,
                                   params=self.query, proxy=self.proxy,
                                   proxy_headers=self.proxy_headers, timeout=client_timeout) as resp:
            if (resp.content_length is not None and resp.content_length <= self.max_bytes
                    and "Content-Encoding" not in resp.headers):
                # the usual small JSON answer of a stated, uncompressed length within the cap: read whole
                # (aiohttp stops at the stated length), without the chunk iterator's await per chunk
                data = await resp.read()
            else:
                # decompressed chunk by chunk, refused past max_bytes (a 2 MB gzip body can inflate to 2 GB)
                data = await read_capped(resp.content.iter_chunked(1 << 16), self.max_bytes)
            return resp.status, resp.headers, data

    async def _send_httpx(self, method: str, path: str, body: Any, timeout: float | None) -> tuple:
        import httpx

        client = self.sessions.get()
        request = client.build_request(method, self.base_url + path, content=body, headers=self.headers,
                                       params=self.query, timeout=timeout or self.timeout)
        try:
            resp = await client.send(request, stream=True)
        except httpx.TimeoutException:
            raise asyncio.TimeoutError from None
        except httpx.TransportError as exc:
            raise ConnectionError(str(exc)) from exc
        try:
            data = await read_capped(resp.aiter_bytes(), self.max_bytes)
        finally:
            await resp.aclose()
        return resp.status_code, resp.headers, data

    async def post_json(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` as JSON (:func:`json_pieces`: a large one piece by piece, a small one joined, fewer
        socket writes); the answer as a JSON object."""
        return json_object(await self.request("POST", path, json_pieces(body)))


class KeyedChat:
    """The common part of an adapter over one keyed dialect: the model's names, its deadline and concurrency
    bound, the key (``api_key=``, else ``?key_env``, by default ``key_envs[0]``, else the provider's other
    variables in order) and its client (``client(**options)`` makes another; ``http`` is the default one)."""

    dialect: type[JSONHTTP]
    provider: str  # as an error message names it
    key_envs: tuple[str, ...]
    #: the key for a server the spec names by URL when none is set (local servers such as vLLM take any), or None
    local_key: str | None = None

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.model_id, self.model = spec.canonical(), spec.name
        self.timeout = spec.get_float("timeout", 600.0)  # the scheduler's total deadline per call
        self.max_concurrency = spec.get_int("concurrency", 0) or None
        # calls to one server share a limit: the provider's own, or the one at the spec's URL
        self.concurrency_key = f"{spec.provider}@{spec.base_url or urlsplit(self.dialect.default_base_url).netloc}"
        names = (spec.get_str("key_env", self.key_envs[0]), *self.key_envs[1:])
        key = spec.secret("api_key") or next(filter(None, map(secret_from_env, names)), None) \
            or (self.local_key if spec.base_url else None)
        if not key:
            raise SpecError(f"the {self.provider} API needs a key: set {self.key_envs[0]} (or ?key_env=NAME, "
                            "or --api-key)")
        register_secret(key)
        self._key = key
        self.client = functools.partial(self.dialect, spec, key, timeout=self.timeout)

    @functools.cached_property
    def http(self) -> JSONHTTP:
        return self.client()

    def batch_api(self, backend: Any) -> None:
        """``?batch=1``: cache misses go through ``backend``, the provider's batch API, at the batch price
        (run/batch.py).  Without it the backend is still there for a resume to re-attach to batches an earlier
        session journaled."""
        self.batch_backend = backend
        self.batch = backend if self.spec.get_bool("batch", False) else None
        self.batch_window = self.spec.get_float("batch_window", 2.0)
        self.batch_poll = self.spec.get_float("batch_poll", 30.0)


def _joined(pieces: list[bytes | str]) -> bytes:
    return b"".join(p.encode("ascii") if isinstance(p, str) else p for p in pieces)


def json_body(body: dict[str, Any]) -> bytes:
    """``body`` as the JSON the SDKs send, in one piece (see :func:`json_pieces`)."""
    return _joined(json_pieces(body))


_LONG = 1024  # shorter strings are serialised as usual
_UNSAFE = ('"', "\\", "\n", "\r", "\t")
_PLACEHOLDER = re.compile(rb"\\u0000vlmcheck-image-(\d+)\\u0000")
_body_json = json_encoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def json_pieces(body: dict[str, Any]) -> list[bytes | str]:
    """``body`` as the JSON the SDKs send (``json.dumps``, no ASCII escapes, compact), as pieces: the JSON between
    images as bytes, and each image (a long ASCII string under a ``url`` or ``data`` key with nothing to escape) as
    the string the message already holds, spliced in, not re-scanned.  ``json.dumps`` would walk every character of
    a base64 image (at high concurrency a fifth of a request's CPU), and sent piece by piece (:func:`PiecesPayload`)
    the body never copies the image again.  Each image is first swapped for a marker with escaped NULs; a text that
    holds another match of the markers' pattern gets the plain encoding."""
    strings: list[str] = []

    def swap(x: Any, key: str = "") -> Any:
        if isinstance(x, dict):
            return {k: swap(v, k) for k, v in x.items()}
        if isinstance(x, list):
            return [swap(v) for v in x]
        if (key in ("url", "data") and isinstance(x, str) and len(x) >= _LONG and x.isascii()
                and not any(c in x for c in _UNSAFE)):
            strings.append(x)
            return f"\x00vlmcheck-image-{len(strings) - 1}\x00"
        return x

    swapped = swap(body)
    if not strings:
        return [_body_json(body).encode()]
    pieces = _PLACEHOLDER.split(_body_json(swapped).encode())
    if [int(m) for m in pieces[1::2]] != list(range(len(strings))):  # a text that looks like a marker
        return [_body_json(body).encode()]
    out: list[bytes | str] = [pieces[0]]
    for i, tail in enumerate(pieces[2::2]):
        out += [strings[i], tail]
    return out


def PiecesPayload(pieces: list[bytes | str]) -> Any:
    """A request body sent piece by piece, its Content-Length known: bytes as they are, an ASCII string (a data URL)
    encoded 256 kB at a time, so a request in flight holds the message's data URL, not also its bytes and the
    joined body."""
    import aiohttp.payload

    class _Pieces(aiohttp.payload.Payload):
        _autoclose = True

        def __init__(self, value: list[bytes | str]) -> None:
            super().__init__(value, content_type="application/json")
            self._size = sum(len(p) for p in value)  # an ASCII string is as many bytes as characters

        def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
            return "".join(p if isinstance(p, str) else p.decode(encoding, errors) for p in self._value)

        async def write(self, writer: Any) -> None:
            await self.write_with_length(writer, None)

        async def write_with_length(self, writer: Any, content_length: int | None) -> None:
            left = self._size if content_length is None else content_length
            for p in self._value:
                step = 1 << 18
                for i in range(0, len(p), step):
                    if left <= 0:
                        return
                    chunk = p[i:i + min(step, left)]
                    await writer.write(chunk.encode("ascii") if isinstance(chunk, str) else chunk)
                    left -= len(chunk)

    return _Pieces(pieces)


def json_object(content: bytes) -> dict[str, Any]:
    try:
        data = json.loads(content)
    except ValueError as exc:
        raise ModelCallError("malformed", f"response is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelCallError("malformed", f"response is a JSON {type(data).__name__}, not an object")
    return data


def _status_error(status: int, headers: Any, data: bytes) -> ModelCallError:
    """An error answer as the SDKs' translated exceptions read: the server's ``error.message`` when it gives one,
    else the status and the body.  The whole body stays on the error (``.body``, for checks such as "does the
    server refuse logprobs"), never in its message beyond 500 characters."""
    text = data.decode("utf-8", errors="replace")
    try:
        message = body_message(json.loads(text))
    except ValueError:
        message = None
    if message is None:
        message = f"Error code: {status} - {text[:500]}" if text.strip() else f"Error code: {status}"
    error = status_error(status, headers, message)
    error.body = redact(text)  # type: ignore[attr-defined]
    return error
