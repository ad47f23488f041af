"""A local server that speaks the OpenAI chat-completions and images protocol, the Anthropic Messages and Gemini
generateContent endpoints (for those adapters' tests) and vLLM's ``prompt_logprobs`` extension (PPL scoring).

Why this module is long: one server, several dialects and every injected fault, kept in one place so that a test
names what it asks for in one marker or flag.

For tests and benchmarks only: it binds to 127.0.0.1, answers deterministically, injects a fixed latency, and
injects faults on request. ``/v1/chat/completions`` answers ``"Answer <digest>"``, the digest a hash of the
request's messages; ``/v1/images/generations`` a small PNG whose colour is a hash of the prompt.

Faults are asked for by a marker in the prompt text, ``[fault=SPEC]``:

* ``429xN`` - the first N attempts of this request get HTTP 429 with ``Retry-After: 0.2`` (``500xN``,
  ``503xN`` likewise, without Retry-After); ``400`` - always HTTP 400; ``401echo`` - HTTP 401 whose message
  echoes the Authorization header (to test redaction);
* ``malformedxN`` - invalid JSON body; ``emptyxN`` - a response with no choices; ``resetxN`` - the connection
  is closed without an answer; ``slowxN`` - the answer comes after 3 s (client timeouts); ``tricklexN`` - the
  body is sent one byte every 0.1 s (an idle timeout never fires; a total deadline does);
* ``nologprobs`` - HTTP 400 for every request that asks for logprobs, naming the parameter only in the
  error's ``param`` field, as a server without logprobs does;
* ``gzipbomb`` - a 1 MB gzip body (``Content-Encoding: gzip``) that inflates to 1 GB; ``huge`` - an answer of
  200 MB, streamed; ``long`` - an answer of 2,000,000 characters (to test the reply and answer caps);
* ``think`` - a reasoning model's answer: ``<think>`` block saying "no", then "Yes"; ``reasoning`` - "Yes"
  with a ``reasoning_content`` field saying "no".

Batches: the OpenAI Batch API and Anthropic Message Batches (:mod:`.fake_batches`); a batch ends
``--batch-delay`` seconds after it was created.

``--dialect transformers`` and ``--dialect litellm`` (a LiteLLM proxy without a database in front of it): what
those servers do that an OpenAI server does not, as measured by tests/test_real_server.py and listed in
docs/usage.md "Server dialects" (``--models``' first is the model transformers serve is pinned to).

``--no-usage``: answers without a ``usage`` object. ``--sampling``: the answer depends on the seed when the
temperature is above 0 (by default, like transformers serve with a greedy generation config, both are ignored).
``--capacity K``: at most K requests served at once (each for ``--latency`` seconds), the rest queue, as on a
GPU server with K batch slots.

Every request is appended to ``--log`` (JSONL: digest, attempt, fault, path, query string, Authorization
header) so tests can count what the server saw. Run: ``python -m vlmcheck.testing.fake_openai --port 0
--latency 0.05 --log FILE``; the chosen port is printed on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import functools
import hashlib
import io
import json
import re
import sys
import time
import zlib

from .fake_batches import FakeBatches

_FAULT = re.compile(r"\[fault=([a-z0-9]+?)(?:x(\d+))?\]")


class FakeOpenAI:
    def __init__(self, latency: float = 0.0, log: str | None = None, models: list[str] | None = None,
                 require_key: str | None = None, batch_delay: float = 1.0, capacity: int | None = None,
                 dialect: str | None = None, no_usage: bool = False, sampling: bool = False) -> None:
        self.dialect, self.usage, self.sampling, self.latency = dialect, not no_usage, sampling, latency
        # at most `capacity` requests served at once (a GPU server's batch slots); more wait in a queue
        self.capacity = asyncio.Semaphore(capacity) if capacity else None
        self.in_flight = 0
        self.models = models  # served by GET /v1/models when given (else 404, as some servers do)
        self.require_key = require_key  # every request without "Bearer KEY" gets HTTP 401
        self.attempts: dict[str, int] = {}
        self.log = open(log, "a", buffering=1) if log else None
        self.batches = FakeBatches(batch_delay, _completion, _anthropic_message, _prompt_text, self.log)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                method, path, _ = line.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                if headers.get("transfer-encoding", "").lower() == "chunked":
                    body = b""
                    while True:
                        size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
                        chunk = await reader.readexactly(size + 2)
                        if size == 0:
                            break
                        body += chunk[:-2]
                else:
                    body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                keep = await self.respond(method, path, headers, body, writer)
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            try:
                writer.close()
            except Exception:  # noqa: BLE001
                pass

    @staticmethod
    async def _reply(writer, status: int, payload: bytes, extra: dict[str, str] | None = None) -> bool:
        writer.write(_head(status, len(payload), extra) + payload)
        await writer.drain()
        return True

    @staticmethod
    async def _stream(writer, body: list[bytes], extra: dict[str, str] | None = None, pause: float = 0.0) -> bool:
        """A body written a chunk at a time, ``pause`` seconds apart; then the connection is closed."""
        writer.write(_head(200, sum(len(b) for b in body), extra, keep=False))
        try:
            for chunk in body:
                writer.write(chunk)
                await writer.drain()
                await asyncio.sleep(pause)
        except (ConnectionError, OSError):  # the client gave up reading: as it should
            pass
        return False

    async def respond(self, method: str, path: str, headers: dict[str, str], body: bytes, writer) -> bool:
        path, _, query = path.partition("?")
        if self.dialect == "litellm" and self.require_key:
            given = headers.get("authorization", "").removeprefix("Bearer").strip()
            if not given:
                return await self._reply(writer, 500, b"Internal Server Error")
            if given != self.require_key:
                return await self._reply(writer, 400, _litellm_error("No connected db.", "no_db_connection", 400))
        if self.require_key and headers.get("authorization") != f"Bearer {self.require_key}":
            return await self._reply(writer, 401, _error("Incorrect API key provided"))
        if method == "GET" and path == "/v1/models" and self.models is not None:
            return await self._reply(writer, 200, json.dumps(
                {"object": "list", "data": [{"id": m, "object": "model", "created": 0, "owned_by": "fake"}
                                            for m in self.models]}).encode())
        batch = self.batches.handle(method, path, headers, body)
        if batch is not None:
            return await self._reply(writer, *batch)
        gemini = path.startswith(("/v1/models/", "/v1beta/models/")) and path.endswith(":generateContent")
        if method != "POST" or (path not in ("/v1/chat/completions", "/v1/images/generations", "/v1/messages")
                                and not gemini):
            return await self._reply(writer, 404, b'{"error": {"message": "not found"}}')
        req = json.loads(body or b"{}")
        if self.dialect in ("transformers", "litellm") and path == "/v1/chat/completions":
            refused = self._transformers_refusal(req)
            if refused is not None:
                return await self._reply(writer, *(refused if self.dialect == "transformers" else
                                                   self._litellm_wrap(req, refused[0])))
        text = _prompt_text(req)
        digest = hashlib.sha256(json.dumps(req.get("messages", req.get("prompt", req.get("contents"))),
                                           sort_keys=True).encode()).hexdigest()[:12]
        attempt = self.attempts[digest] = self.attempts.get(digest, 0) + 1
        fault = _FAULT.search(text)
        kind, times = (fault.group(1), int(fault.group(2) or 1)) if fault else (None, 0)
        active = (bool(req.get("logprobs")) if kind == "nologprobs"
                  else kind is not None and (kind in ("400", "401echo", "think", "reasoning") or attempt <= times))
        self.in_flight += 1  # requests being served now, this one included (the log records it)
        if self.log:
            self.log.write(json.dumps({"digest": digest, "attempt": attempt, "fault": kind if active else None,
                                       "path": path, "query": query, "t": time.time(), "in_flight": self.in_flight,
                                       "authorization": headers.get("authorization"),
                                       "continue_final_message": req.get("continue_final_message"),
                                       "last_role": (req.get("messages") or [{}])[-1].get("role")}) + "\n")
        try:
            async with self.capacity or contextlib.nullcontext():
                await asyncio.sleep(self.latency)
        finally:
            self.in_flight -= 1
        if active:
            if kind == "reset":
                writer.transport.abort()
                return False
            if kind == "slow":
                await asyncio.sleep(3.0)
            elif kind == "trickle":
                payload = json.dumps(_completion(req, digest)).encode()
                return await self._stream(writer, [payload[i:i + 1] for i in range(len(payload))], pause=0.1)
            elif kind == "gzipbomb":  # bodies far larger than any answer (this server holds little of them)
                return await self._stream(writer, [_gzip_bomb()], {"Content-Encoding": "gzip"})
            elif kind == "huge":
                head = [b'{"id": "x", "object": "chat.completion", "choices": [{"message": {"content": "']
                return await self._stream(writer, head + [b"a" * (1 << 20)] * 200 + [b'"}}]}'])
            elif (response := _fault_response(kind, req, digest, headers)) is not None:
                return await self._reply(writer, *response)
        if gemini:
            payload = _gemini_response(req, digest, headers)
        elif path.endswith("generations"):
            payload = _image_response(req, digest)
        elif path.endswith("messages"):
            payload = _anthropic_message(req, digest, headers)
        else:
            if self.sampling and float(req.get("temperature") or 0) > 0:
                digest = hashlib.sha256(f"{digest}|{req.get('seed')}".encode()).hexdigest()[:12]
            payload = _completion(req, digest)
            if self.dialect in ("transformers", "litellm"):  # accepts logprobs, returns none
                for choice in payload["choices"]:
                    choice.pop("logprobs", None)
            if not self.usage:
                payload.pop("usage", None)
        return await self._reply(writer, 200, json.dumps(payload).encode())

    def _transformers_refusal(self, req: dict) -> tuple[int, bytes, None] | None:
        """transformers serve's answers to a request it will not serve (measured against 5.24)."""
        unknown = sorted(set(req) - _TRANSFORMERS_FIELDS)
        if unknown:
            return 422, json.dumps({"detail": f"Unexpected fields in the request: {set(unknown)}"}).encode(), None
        if self.models and req.get("model") != self.models[0]:
            return 400, json.dumps({"detail": f"Server is pinned to '{self.models[0]}'; requested "
                                              f"'{req.get('model')}'."}).encode(), None
        return None

    def _litellm_wrap(self, req: dict, status: int) -> tuple[int, bytes, None]:
        """The proxy's answer for a request its backend refused: a model it does not route, or the backend's
        error in the proxy's words (the backend's message is not passed on)."""
        if self.models and req.get("model") not in self.models:
            return 400, _litellm_error(f"/chat/completions: Invalid model name passed in model={req.get('model')}. "
                                       "Call `/v1/models` to view available models for your key.",
                                       "invalid_request_error", 400), None
        return status, _litellm_error(f"litellm.BadRequestError: OpenAIException - Error code: {status}\n\nLiteLLM: "
                                      f"model group '{req.get('model')}' failed with the error above. No fallback "
                                      "was attempted.", "invalid_request_error", status), None


def _litellm_error(message: str, kind: str, status: int) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": str(status)}}).encode()


#: the request fields transformers serve's chat completions accept (OpenAI's, and its own generation_config,
#: chat_template_kwargs); any other gets HTTP 422
_TRANSFORMERS_FIELDS = frozenset({
    "model", "messages", "audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
    "max_completion_tokens", "max_tokens", "metadata", "modalities", "n", "parallel_tool_calls", "prediction",
    "presence_penalty", "reasoning_effort", "response_format", "seed", "service_tier", "stop", "store", "stream",
    "stream_options", "temperature", "tool_choice", "tools", "top_logprobs", "top_p", "user", "web_search_options",
    "generation_config", "chat_template_kwargs"})

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 429: "Too Many Requests",
            500: "Internal Server Error", 503: "Service Unavailable"}


def _head(status: int, length: int, extra: dict[str, str] | None = None, keep: bool = True) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}", "Content-Type: application/json",
             f"Content-Length: {length}", f"Connection: {'keep-alive' if keep else 'close'}",
             *(f"{k}: {v}" for k, v in (extra or {}).items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@functools.lru_cache(maxsize=1)
def _gzip_bomb() -> bytes:
    """1 GB of a JSON answer's letters, gzip-compressed to about 1 MB (made once)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: a gzip wrapper
    parts = [z.compress(b'{"choices": [{"message": {"content": "')]
    block = b"a" * (1 << 20)
    parts += [z.compress(block) for _ in range(1024)]
    parts.append(z.flush())
    return b"".join(parts)


def _error(message: str) -> bytes:
    return json.dumps({"error": {"message": message}}).encode()


def _fault_response(kind: str, req: dict, digest: str, headers: dict[str, str]
                    ) -> tuple[int, bytes, dict[str, str] | None] | None:
    """(status, body, extra headers) of an injected fault that still answers; None for unknown faults."""
    if kind in ("429", "500", "503"):
        return int(kind), _error(f"injected {kind}"), ({"Retry-After": "0.2"} if kind == "429" else None)
    if kind == "400":
        return 400, _error("injected bad request"), None
    if kind == "nologprobs":
        return 400, json.dumps({"error": {"message": "unsupported parameter", "param": "logprobs"}}).encode(), None
    if kind == "401echo":
        return 401, _error(f"Incorrect API key provided: {headers.get('authorization', '')}"), None
    if kind == "malformed":
        return 200, b'{"id": "x", "choices": [ {"message": ', None
    if kind == "empty":
        return 200, json.dumps(_completion(req, digest, choices=False)).encode(), None
    changed = {"long": {"content": "a" * 2_000_000},
               "think": {"content": "<think>\nThe picture shows no cat, so the answer is no.\n</think>\n\nYes"},
               "reasoning": {"content": "Yes", "reasoning_content": "The picture shows no cat: no."}}.get(kind)
    if changed is None:
        return None
    body = _completion(req, digest)
    body["choices"][0]["message"].update(changed)
    return 200, json.dumps(body).encode(), None


def _prompt_text(req: dict) -> str:
    if "prompt" in req:
        return str(req["prompt"])
    parts = []
    for c in req.get("contents", []):  # Gemini
        parts.extend(p.get("text", "") for p in c.get("parts", []) if isinstance(p, dict))
    for m in req.get("messages", []):
        c = m.get("content")
        if isinstance(c, str):
            parts.append(c)
        elif isinstance(c, list):
            parts.extend(p.get("text", "") for p in c if isinstance(p, dict))
    return " ".join(parts)


def word_logprob(word: str) -> float:
    """The fake server's log-probability of one prompt 'token' (a whitespace-separated word)."""
    return -((sum(map(ord, word)) % 7) + 1) / 10.0


#: ``--usage openai``: usage by OpenAI's rules (run/estimate.py), so that a cost estimate can be checked against
#: the bill; else one of BROKEN_USAGE (--max-cost must hold on a broken server's usage, or an inflated one)
USAGE_RULE: str | None = None
BROKEN_USAGE = {
    "inflated": {"prompt_tokens": 1_000_000, "completion_tokens": 2, "total_tokens": 1_000_002},
    "missing": None,
    "negative": {"prompt_tokens": -20_000_000_000, "completion_tokens": -2, "total_tokens": -20_000_000_002},
    "string": {"prompt_tokens": "ten", "completion_tokens": "two", "total_tokens": "twelve"},
    "nan": {"prompt_tokens": float("nan"), "completion_tokens": float("nan"), "total_tokens": float("nan")},
    "nested": {"prompt_tokens": {"text": 10}, "completion_tokens": {"text": 2}, "total_tokens": 12},
}


def _usage(req: dict, answer: str) -> dict | None:
    if USAGE_RULE in BROKEN_USAGE:
        return BROKEN_USAGE[USAGE_RULE]
    if USAGE_RULE is None:
        return {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    from PIL import Image

    from ..core.tokens import image_tokens, text_tokens

    prompt = 0
    for m in req.get("messages", []):
        c = m.get("content")
        for p in ([{"type": "text", "text": c}] if isinstance(c, str) else c or []):
            if p.get("type") == "text":
                prompt += text_tokens(p.get("text", ""))
            elif p.get("type") == "image_url":
                data = base64.b64decode(p["image_url"]["url"].split(",", 1)[1])
                prompt += image_tokens(*Image.open(io.BytesIO(data)).size, USAGE_RULE)
    done = text_tokens(answer)
    return {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}


#: ``--prose``: every answer a paragraph that names no option (cut, finish_reason "length", under 60 max_tokens)
PROSE: bool = False
PROSE_ANSWER = ("The image shows a quiet scene with several objects arranged on a surface, lit from the left; "
                "the colours are muted and the background is slightly blurred, so it is worth looking closely at "
                "each part of the picture before saying what it contains and how the objects relate to one another "
                "in the space that the photograph shows to the viewer")


def _completion(req: dict, digest: str, choices: bool = True) -> dict:
    answer = PROSE_ANSWER if PROSE else f"Answer {digest}"
    out = {"id": f"chatcmpl-{digest}", "object": "chat.completion", "created": 0, "model": req.get("model", "fake"),
           "usage": _usage(req, answer), "choices": []}
    if out["usage"] is None:
        del out["usage"]
    if req.get("prompt_logprobs") is not None:
        # vLLM's extension: one entry per prompt token ({token_id: {logprob, rank, decoded_token}}), the first None.
        # Our "tokens" are the words of the rendered prompt, the final assistant message included when
        # continue_final_message is set.
        words = _prompt_text(req).split()
        out["prompt_logprobs"] = [None] + [{str(i): {"logprob": word_logprob(w), "rank": 1, "decoded_token": w}}
                                           for i, w in enumerate(words[1:], 1)]
    if choices:
        limit = req.get("max_completion_tokens") or req.get("max_tokens")
        cut = PROSE and isinstance(limit, int) and limit < len(answer.split())
        choice = {"index": 0, "message": {"role": "assistant", "content": answer},
                  "finish_reason": "length" if cut else "stop"}
        if req.get("logprobs"):
            choice["logprobs"] = {"content": [
                {"token": "Answer", "logprob": -0.1, "bytes": None, "top_logprobs": []},
                {"token": f" {digest}", "logprob": -0.5, "bytes": None, "top_logprobs": []}]}
        out["choices"] = [choice]
    return out


def _gemini_response(req: dict, digest: str, headers: dict[str, str]) -> dict:
    """Gemini generateContent answer; echoes whether the system instruction, an image and a key arrived."""
    n_images = sum(1 for c in req.get("contents", []) for p in c.get("parts", [])
                   if isinstance(p, dict) and ("inlineData" in p or "inline_data" in p))
    system = "systemInstruction" in req or "system_instruction" in req
    key = bool(headers.get("x-goog-api-key"))
    text = f"Answer {digest} images={n_images} system={int(system)} key={int(key)}"
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 11, "candidatesTokenCount": 5, "totalTokenCount": 16}}


def _anthropic_message(req: dict, digest: str, headers: dict[str, str]) -> dict:
    """Anthropic Messages API answer; echoes whether the system prompt and an image arrived."""
    n_images = sum(1 for m in req.get("messages", []) for p in m.get("content", [])
                   if isinstance(p, dict) and p.get("type") == "image")
    has_key = "x-api-key" in headers or "authorization" in headers
    text = (f"Answer {digest} images={n_images} system={'system' in req} key={has_key} "
            f"temperature={'temperature' in req}")
    return {"id": f"msg_{digest}", "type": "message", "role": "assistant", "model": req.get("model", "fake"),
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": _anthropic_usage()}


def _anthropic_usage() -> dict | None:
    """Anthropic's usage object: 11 in, 3 out, or ``--usage``'s broken one under Anthropic's field names."""
    if USAGE_RULE not in BROKEN_USAGE:
        return {"input_tokens": 11, "output_tokens": 3}
    broken = BROKEN_USAGE[USAGE_RULE]
    return None if broken is None else {"input_tokens": broken["prompt_tokens"],
                                        "output_tokens": broken["completion_tokens"]}


def _image_response(req: dict, digest: str) -> dict:
    from PIL import Image

    colour = tuple(int(digest[i:i + 2], 16) for i in (0, 2, 4))
    buf = io.BytesIO()
    Image.new("RGB", (32, 32), colour).save(buf, format="PNG")
    return {"created": 0, "data": [{"b64_json": base64.b64encode(buf.getvalue()).decode()}]}


async def serve(port: int, **options) -> None:
    """Serve a :class:`FakeOpenAI` made with ``options``; the port it listens on is printed on stdout."""
    server = await asyncio.start_server(FakeOpenAI(**options).handle, "127.0.0.1", port, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--log", default=None)
    parser.add_argument("--models", default=None, type=lambda ids: ids.split(","),
                        help="comma-separated ids that GET /v1/models lists")
    parser.add_argument("--require-key", default=None, help="answer 401 to requests without this key")
    parser.add_argument("--batch-delay", type=float, default=1.0, help="seconds until a batch ends")
    parser.add_argument("--capacity", type=int, default=None,
                        help="serve at most this many requests at once; the rest queue (a server's batch slots)")
    parser.add_argument("--usage", default=None, choices=["openai", *BROKEN_USAGE],
                        help="count usage by OpenAI's rules instead of a fixed 10 + 2 tokens per request; or a "
                             "broken usage (missing, negative, string, nan, nested), or one far above the estimate "
                             "(inflated)")
    parser.add_argument("--dialect", default=None, choices=["transformers", "litellm"],
                        help="answer as transformers serve does (422 for unknown fields, no logprobs, one model), "
                             "or as a LiteLLM proxy in front of it (400 'No connected db.' for a wrong key, its "
                             "backend's errors in its own words)")
    parser.add_argument("--no-usage", action="store_true", help="answers carry no usage object")
    parser.add_argument("--prose", action="store_true",
                        help="answer every question with a paragraph that names no option (a chat model's prose)")
    parser.add_argument("--sampling", action="store_true",
                        help="honour the temperature: the answer depends on the seed when temperature > 0")
    options = vars(parser.parse_args(argv))  # the rest are FakeOpenAI's own options, by the same names
    global USAGE_RULE, PROSE
    USAGE_RULE, PROSE = options.pop("usage"), options.pop("prose")
    try:
        asyncio.run(serve(**options))
    except KeyboardInterrupt:  # pragma: no cover
        sys.exit(0)


if __name__ == "__main__":
    main()
