"""A neutral JSON-over-HTTP client: the base every HTTP dialect (OpenAI, Anthropic, Gemini, a new one) builds on.

A dialect subclasses :class:`JSONHTTP` and declares only what is its own: where its key goes (``key_header`` and
``key_scheme``, or no key at all), its default base URL, the environment variable its provider documents for another
base URL (``base_url_env``; none by default), and any fixed headers (``dialect_headers``).  Everything else is the
same for all: vlmcheck's User-Agent, the spec's URL credentials (:meth:`ModelSpec.request_auth`), proxies from
``HTTP(S)_PROXY`` / ``NO_PROXY``, certificates from ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` or else certifi's bundle
(as httpx does), redirects, a total timeout per call, a cap on the reply's decompressed size, and one mapping of HTTP
statuses to :class:`ModelCallError` (:func:`status_error`) with the server's words redacted.  No retries happen here:
the scheduler retries with backoff, honours Retry-After and counts attempts.

Requests go out with aiohttp, for one measured reason (``bench/api_throughput.py``): a chat request costs several
times the client CPU through the ``openai`` SDK (httpx underneath) that it costs with aiohttp directly, and at high
concurrency against a fast server that CPU sets the pace of a run.

Tests hand a client an httpx transport instead (``transport=``, or :func:`in_process` for every client made inside
it), such as ``httpx.MockTransport(handler)``: the adapter's own code builds the request and reads the answer, and
the handler answers in-process, with no socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import Any, Callable, Iterator

from .._version import __version__
from ..core.errors import ModelCallError, SpecError, read_capped
from ..core.secrets import redact, register_secret
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

    def record(request: Any) -> Any:
        seen.append(request)
        return handler(request)

    before, _IN_PROCESS = _IN_PROCESS, httpx.MockTransport(record)
    try:
        yield seen
    finally:
        _IN_PROCESS = before


def _ssl_context() -> Any:
    import ssl

    if os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context()  # OpenSSL reads both variables
    try:
        import certifi
    except ImportError:
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())


def env_proxy(url: str) -> tuple[str | None, dict[str, str] | None]:
    """The proxy the environment names for ``url`` (``HTTP(S)_PROXY``, ``ALL_PROXY``, ``NO_PROXY``), if any, and
    the ``Proxy-Authorization`` header for credentials in its URL.

    Resolved once per server: with ``trust_env=True`` aiohttp reads the environment and ``~/.netrc`` again on
    every request, in a worker thread, about 7% of a request's CPU."""
    import base64
    import urllib.request
    from urllib.parse import unquote, urlsplit

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


class Session:
    """One HTTP session bound to the running loop (see :class:`PerLoopClients`): aiohttp's, or an httpx client
    over the transport a test gave."""

    def __init__(self, https: bool, transport: Any = None) -> None:
        if transport is not None:
            import httpx

            self.http: Any = httpx.AsyncClient(transport=transport)
            return
        import aiohttp

        self.http = aiohttp.ClientSession(
            # the scheduler bounds the requests in flight; this is the SDK's own connection ceiling
            connector=aiohttp.TCPConnector(limit=1000, ssl=_ssl_context() if https else True))

    async def close(self) -> None:
        await (self.http.close() if hasattr(self.http, "closed") else self.http.aclose())

    def is_closed(self) -> bool:
        return self.http.closed if hasattr(self.http, "closed") else self.http.is_closed


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
                 max_bytes: int = 8_000_000, transport: Any = None) -> None:
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
        self.transport = transport if transport is not None else _IN_PROCESS
        self.proxy, self.proxy_headers = (None, None) if self.transport is not None else env_proxy(self.base_url)
        https = self.base_url.startswith("https:")
        self.sessions = PerLoopClients(lambda: Session(https, self.transport), n_sessions)
        self._timeout: Any = None  # the aiohttp.ClientTimeout of self.timeout, made on the first request

    def dialect_headers(self) -> dict[str, str]:
        """Fixed headers of the dialect (a version header, an organisation read from the environment)."""
        return {}

    async def request(self, method: str, path: str, body: Any = None, *,
                      timeout: float | None = None) -> bytes:
        """The body of a 2xx answer to ``method path``; a :class:`ModelCallError` for anything else.  ``body``:
        bytes, or the pieces of :func:`json_pieces`-style bodies (bytes and ASCII strings)."""
        if isinstance(body, list):
            size = sum(len(p) for p in body)
            body = _joined(body) if size < _PIECES_MIN or self.transport is not None else PiecesPayload(body)
        try:
            if self.transport is not None:
                status, headers, data = await self._send_httpx(method, path, body, timeout)
            else:
                status, headers, data = await self._send_aiohttp(method, path, body, timeout)
        except (ModelCallError, asyncio.CancelledError):
            raise
        except (asyncio.TimeoutError, TimeoutError):
            raise ModelCallError("timeout", f"no answer within {timeout or self.timeout:g} s") from None
        except Exception as exc:  # noqa: BLE001 - aiohttp.ClientError, httpx.TransportError, OSError
            if not _is_transport_error(exc):
                raise
            reason = connection_reason(exc)
            raise ModelCallError("connection", REFUSED if reason == "connection refused" else redact(reason)) from exc
        if status >= 400:
            raise _status_error(status, headers, data)
        return data

    async def _send_aiohttp(self, method: str, path: str, body: Any, timeout: float | None) -> tuple:
        import aiohttp

        session = self.sessions.get().http
        if timeout is None or timeout == self.timeout:
            if self._timeout is None:
                self._timeout = aiohttp.ClientTimeout(total=self.timeout)
            client_timeout = self._timeout  # one object for every request, not one each
        else:
            client_timeout = aiohttp.ClientTimeout(total=timeout)
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

        client = self.sessions.get().http
        request = client.build_request(method, self.base_url + path, content=body, headers=self.headers,
                                       params=self.query, timeout=timeout or self.timeout)
        try:
            resp = await client.send(request, stream=True)
        except httpx.TimeoutException:
            raise asyncio.TimeoutError from None
        try:
            data = await read_capped(resp.aiter_bytes(), self.max_bytes)
        finally:
            await resp.aclose()
        return resp.status_code, resp.headers, data

    async def post_json(self, path: str, body: Any) -> dict[str, Any]:
        """POST a body (a JSON-able dict, bytes, or pieces); the answer as a JSON object."""
        if isinstance(body, dict):
            body = json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
        return json_object(await self.request("POST", path, body))


def _is_transport_error(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return True
    import aiohttp

    if isinstance(exc, aiohttp.ClientError):
        return True
    import httpx

    return isinstance(exc, httpx.TransportError)


def _joined(pieces: list[bytes | str]) -> bytes:
    return b"".join(p.encode("ascii") if isinstance(p, str) else p for p in pieces)


def PiecesPayload(pieces: list[bytes | str]) -> Any:
    """A request body sent piece by piece: bytes as they are, an ASCII string (a data URL) encoded 256 kB at
    a time, with its Content-Length known.  Peak memory per request in flight is then the message's own data
    URL, not that plus its bytes plus the joined body (4.1 MB against 2.6 MB for a 1.1-MB photo)."""
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
