"""The requests of an OpenAI-compatible run sent with aiohttp itself, not through the ``openai`` SDK.

Written by hand for one measured reason (``bench/api_throughput.py`` measures it): a chat request costs several
times the client CPU through ``chat.completions.create()`` (and about twice through the SDK's low-level ``post()``
with the body already JSON) that it costs with aiohttp directly, and importing the SDK costs more than the rest of
a short run's start-up.  At high concurrency against a fast server that CPU, not the server, sets the pace of a run, and
the run spends it again on every request.  The SDK stays one parameter away (``?http=sdk``) and keeps what is
not per request: the Batch API and image generation.

What the SDK would do for these requests and still happens here: Bearer auth with the key, ``OpenAI-Organization``
and ``OpenAI-Project`` from the environment, the spec's URL credentials (:meth:`ModelSpec.request_auth`),
``OPENAI_BASE_URL`` when no base URL is given, proxies from ``HTTP(S)_PROXY`` / ``NO_PROXY``, certificates from
``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` or else certifi's bundle (as httpx does), redirects, a total timeout, and the
same mapping of HTTP statuses to errors (:func:`status_error`) as for the SDK's exceptions.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from ..core.errors import ModelCallError, read_capped
from ..core.secrets import redact, register_secret
from ..core.spec import ModelSpec
from ._http_errors import REFUSED, body_message, connection_reason, status_error
from ..run.loop_clients import PerLoopClients

DEFAULT_BASE_URL = "https://api.openai.com/v1"


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
    """One aiohttp session bound to the running loop (see :class:`PerLoopClients`)."""

    def __init__(self, https: bool) -> None:
        import aiohttp

        self.http = aiohttp.ClientSession(
            # the scheduler bounds the requests in flight; this is the SDK's own connection ceiling
            connector=aiohttp.TCPConnector(limit=1000, ssl=_ssl_context() if https else True))

    async def close(self) -> None:
        await self.http.close()

    def is_closed(self) -> bool:
        return self.http.closed


class OpenAIHTTP:
    """Requests to one OpenAI-compatible server, with the key and headers the SDK would send."""

    def __init__(self, spec: ModelSpec, key: str, timeout: float, n_sessions: int = 1,
                 max_bytes: int = 8_000_000) -> None:
        self.max_bytes = max_bytes
        self.base_url = (spec.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.timeout = timeout
        self.headers = {"Accept": "application/json", "Content-Type": "application/json",
                        "User-Agent": "vlmcheck (OpenAI-compatible client)", "Authorization": f"Bearer {key}"}
        for header, env in (("OpenAI-Organization", "OPENAI_ORG_ID"), ("OpenAI-Project", "OPENAI_PROJECT_ID")):
            if os.environ.get(env):
                self.headers[header] = os.environ[env]
        auth = spec.request_auth()
        self.headers.update(auth.get("default_headers", {}))
        self.query = auth.get("default_query") or None
        self.proxy, self.proxy_headers = env_proxy(self.base_url)
        https = self.base_url.startswith("https:")
        self.sessions = PerLoopClients(lambda: Session(https), n_sessions)
        self._timeout: Any = None  # the aiohttp.ClientTimeout of self.timeout, made on the first request

    async def request(self, method: str, path: str, body: Any = None, *,
                      timeout: float | None = None) -> bytes:
        """The body of a 2xx answer to ``method path``; a :class:`ModelCallError` for anything else."""
        import aiohttp

        session = self.sessions.get().http
        if timeout is None or timeout == self.timeout:
            if self._timeout is None:
                self._timeout = aiohttp.ClientTimeout(total=self.timeout)
            client_timeout = self._timeout  # one object for every request, not one each
        else:
            client_timeout = aiohttp.ClientTimeout(total=timeout)
        try:
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
                if resp.status >= 400:
                    raise _status_error(resp.status, resp.headers, data)
                return data
        except ModelCallError:
            raise
        except asyncio.TimeoutError:
            raise ModelCallError("timeout", f"no answer within {timeout or self.timeout:g} s") from None
        except (aiohttp.ClientError, OSError) as exc:
            reason = connection_reason(exc)
            raise ModelCallError("connection", REFUSED if reason == "connection refused" else redact(reason)) from exc

    async def post_json(self, path: str, body: Any) -> dict[str, Any]:
        """POST a JSON body; the answer as a JSON object."""
        return json_object(await self.request("POST", path, body))


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
    """An error answer as the SDK's translated exception would read: the server's ``error.message`` when it
    gives one, else the status and the body.  The whole body stays on the error (``.body``, for checks such as
    "does the server refuse logprobs"), never in its message beyond 500 characters."""
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
