"""OpenAI-compatible chat: the OpenAI API and servers that speak its protocol (vLLM, SGLang, Ollama, LM Studio,
llama.cpp server); ``openai:MODEL[@URL[,URL...]][?params]``, parameters and endpoints in docs/usage.md.

Requests go out through the neutral JSON client (:class:`OpenAIHTTP`, ``models/http.py``) unless ``?http=sdk|httpx``
sends them through the ``openai`` SDK, which always serves the Batch API.  No retries here (the SDK's are off,
``max_retries=0``): the scheduler retries with backoff, honours Retry-After and counts attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import ModelCallError, read_capped
from ..core.messages import Message, to_openai
from ..core.roles import Capabilities, Generation, GenerationConfig, Loglikelihood, TokenLogprob, Usage
from ..core.secrets import redact
from ..core.spec import ModelSpec, SpecError
from ..run.loop_clients import PerLoopClients
from ._http_errors import name_sent_fields, translate
from .batch_api import OpenAIBatches
from .http import JSONHTTP, KeyedChat, json_body, json_object
from .openai_preflight import preflight

DEFAULT_MAX_RESPONSE_MB = 8.0
DEFAULT_MAX_ANSWER_CHARS = 1_000_000

_FINISH = {"stop": "stop", "length": "length", "content_filter": "content_filter", "tool_calls": "stop",
           "function_call": "stop", "eos": "stop"}


class OpenAIHTTP(JSONHTTP):
    """The OpenAI dialect: a Bearer key, the organisation and project headers and the base URL the SDK reads from
    the environment (``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID``, ``OPENAI_BASE_URL``)."""

    key_header, key_scheme = "Authorization", "Bearer"
    default_base_url, base_url_env = "https://api.openai.com/v1", "OPENAI_BASE_URL"

    def dialect_headers(self) -> dict[str, str]:
        named = (("OpenAI-Organization", "OPENAI_ORG_ID"), ("OpenAI-Project", "OPENAI_PROJECT_ID"))
        return {header: os.environ[env] for header, env in named if os.environ.get(env)}


def _clients(spec: ModelSpec, n: int, key: str, timeout: float, aiohttp: bool) -> PerLoopClients:
    """SDK clients, built lazily per event loop (the SDK is imported on first use, not before).  ``aiohttp``: the
    SDK's aiohttp transport (``openai[aiohttp]``), which the SDK documents for high concurrency, else its default
    httpx transport (``?http=httpx``, about twice the CPU per request)."""

    def make() -> Any:
        import openai

        extra: dict[str, Any] = {}
        if aiohttp and hasattr(openai, "DefaultAioHttpClient"):  # openai[aiohttp], a dependency
            extra["http_client"] = openai.DefaultAioHttpClient(timeout=timeout)
        # URL userinfo and credential query parameters travel with each request only (ModelSpec.request_auth);
        # aiohttp refuses a URL with userinfo next to the SDK's Authorization header, so none reaches it.
        return openai.AsyncOpenAI(api_key=key, base_url=spec.base_url, max_retries=0, timeout=timeout,
                                  **spec.request_auth(), **extra)

    return PerLoopClients(make, n)


@dataclass(eq=False)
class _Endpoint:
    """One server of a model: its clients, requests in flight, and a cooldown after it failed.  ``http`` sends
    the chat requests, or only the preflight with ``?http=sdk|httpx``, when the SDK's ``clients`` send them (they
    also serve the Batch API)."""

    url: str | None
    clients: PerLoopClients
    http: OpenAIHTTP
    in_flight: int = 0
    cool_until: float = 0.0
    _slots: dict[int, asyncio.Semaphore] = field(default_factory=dict)  # per event loop: `concurrency` at once

    def slots(self, limit: int) -> asyncio.Semaphore:
        """This endpoint's ``concurrency`` slots (in the running loop): a survivor of a failed endpoint never
        gets more than its own share, whatever the total limit lets through."""
        return self._slots.setdefault(id(asyncio.get_running_loop()), asyncio.Semaphore(limit))


class OpenAIChat(KeyedChat):
    """``VLM`` and ``TextModel`` role over ``/chat/completions``."""

    dialect, provider, key_envs, local_key = OpenAIHTTP, "OpenAI", ("OPENAI_API_KEY",), "EMPTY"

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        # clients > 1: clients (HTTP sessions) used round-robin.  With ?http=httpx, httpcore's pool scans
        # every pooled connection on each request, so several small pools beat one large one.
        n_clients = spec.get_int("clients", 1)
        transport = spec.get_str("http", "aiohttp")
        if transport not in ("aiohttp", "sdk", "httpx"):
            raise SpecError(f"http={transport!r}: use aiohttp (the default), sdk or httpx")
        self._direct = transport == "aiohttp"
        # a reply is read up to max_response_mb (decompressed) and an answer kept up to max_answer_chars: beyond,
        # the sample fails with a too_large error, and memory stays bounded whatever the server sends
        self.max_response_bytes = int(spec.get_float("max_response_mb", DEFAULT_MAX_RESPONSE_MB) * 1e6)
        self.max_answer_chars = spec.get_int("max_answer_chars", DEFAULT_MAX_ANSWER_CHARS)

        def endpoint(url: str | None) -> _Endpoint:
            at = spec.at(url) if url else spec
            http = OpenAIHTTP(at, self._key, timeout=self.timeout, n_sessions=n_clients if self._direct else 1,
                              max_bytes=self.max_response_bytes)
            return _Endpoint(url, _clients(at, n_clients, self._key, self.timeout, transport != "httpx"), http)

        self._endpoints = [endpoint(url) for url in spec.endpoints] or [endpoint(None)]
        self._cooldown = spec.get_float("cooldown", 10.0)
        per_endpoint = self._per_endpoint = spec.get_int("concurrency", 0)
        self.max_concurrency = per_endpoint * len(self._endpoints) if per_endpoint else None
        self._logprobs = spec.get_bool("logprobs", True)
        default_param = "max_completion_tokens" if not spec.base_url else "max_tokens"
        self._max_tokens_param = spec.get_str("max_tokens_param", default_param)
        # Scoring given continuations needs prompt log-probabilities, which the OpenAI API does not offer;
        # vLLM does (prompt_logprobs + continue_final_message).  Declared only when the spec asks for it.
        self.capabilities = Capabilities(multi_image=spec.get_bool("multi_image", True), logprobs=self._logprobs,
                                         loglikelihood=spec.get_bool("prompt_logprobs", False), seeded=False,
                                         prefill=spec.get_bool("prefill", False))
        self._extra = _body_extras(spec)
        single = len(self._endpoints) == 1
        if spec.get_bool("batch", False) and not single:
            raise SpecError(f"{spec.canonical()}: batch=1 sends batches to one API; give one base URL")
        self.batch_api(OpenAIBatches(self._endpoints[0].clients, _parse_chat) if single else None)

    async def preflight(self) -> None:
        for ep in self._endpoints:  # every endpoint answers and serves this model
            if not self._direct:
                ep.clients.get()  # the SDK imported and its client built now, not inside the first call's deadline
            await preflight(ep.http, self.spec.at(ep.url) if ep.url else self.spec)

    def _pick(self, tried: set[str | None]) -> "_Endpoint":
        """The endpoint for the next request: fewest in flight among those not cooling down and not yet tried
        by this request; when every one is cooling down, the one that recovers first."""
        now = time.monotonic()
        fresh = [e for e in self._endpoints if e.url not in tried] or self._endpoints
        return min(fresh, key=lambda e: (e.cool_until > now, e.in_flight if e.cool_until <= now else e.cool_until))

    async def _post_chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST to one endpoint; on a connection error or a 5xx from a model with several endpoints, cool
        that one down and fail over to the next at once (the scheduler's retries come after all were tried)."""
        tried: set[str | None] = set()
        while True:
            ep = self._pick(tried)
            ep.in_flight += 1
            try:
                several = self._per_endpoint and len(self._endpoints) > 1  # `concurrency` is per endpoint
                async with ep.slots(self._per_endpoint) if several else contextlib.nullcontext():
                    data = await self._post_chat_to(ep, body)
            except Exception as exc:
                err = _call_error(exc)
                down = (err.status is None and err.kind in ("connection", "timeout")) or (err.status or 0) >= 500
                if down and len(self._endpoints) > 1:
                    ep.cool_until = time.monotonic() + self._cooldown
                    tried.add(ep.url)
                    if len(tried) < len(self._endpoints):
                        continue
                named = name_sent_fields(err, body)  # a gateway's words for a field the backend refused
                if named is exc:
                    raise
                raise named from exc
            finally:
                ep.in_flight -= 1
            if len(self._endpoints) > 1:
                data["_endpoint"] = ep.url
            return data

    async def _post_chat_to(self, ep: "_Endpoint", body: dict[str, Any]) -> dict[str, Any]:
        """POST /chat/completions; the answer as plain JSON.  Through the SDK, its low-level ``post()``: its auth,
        timeouts and status mapping without ``chat.completions.create()``'s TypedDict transform, which walks every
        base64 image string, nor the response's pydantic objects (our messages are already plain JSON)."""
        if self._direct:
            return await ep.http.post_json("/chat/completions", body)
        import httpx

        # the SDK's streaming raw response (what its with_streaming_response uses), read up to the cap, not whole
        resp = await ep.clients.get().post("/chat/completions", cast_to=httpx.Response, content=json_body(body),
                                           options={"headers": {"X-Stainless-Raw-Response": "stream"}})
        try:
            content = await read_capped(resp.aiter_bytes(), self.max_response_bytes)
        finally:
            await resp.aclose()
        return json_object(content)

    def batch_body(self, messages: list[Message], config: GenerationConfig) -> dict[str, Any]:
        """The ``/chat/completions`` body of one request, as sent and as a batch item carries it."""
        kwargs: dict[str, Any] = {"model": self.model, "messages": to_openai(messages),
                                  "temperature": config.temperature, self._max_tokens_param: config.max_tokens}
        optional = {"top_p": config.top_p, "seed": config.seed, "stop": config.stop or None}
        kwargs.update({k: v for k, v in optional.items() if v is not None}, **self._extra)
        if messages and messages[-1].role == "assistant" and self.capabilities.prefill:
            # vLLM / SGLang: continue the pre-filled assistant turn instead of opening a new one
            kwargs.update(continue_final_message=True, add_generation_prompt=False)
        if config.logprobs and self._logprobs:
            kwargs["logprobs"] = True
            if config.top_logprobs:
                kwargs["top_logprobs"] = config.top_logprobs
        return kwargs

    def _withdraw_logprobs(self, how: str) -> None:
        """The server gives no token log-probabilities: never ask again, declare none, and say so once."""
        if self._logprobs:
            logging.getLogger("vlmcheck").warning(
                "%s: asked for token log-probabilities, the server %s; answers come without them from now on "
                "(add ?logprobs=0 to ask for none, or use a server that returns them: vLLM, OpenAI)",
                self.model_id, how)
        self._logprobs = False
        self.capabilities = self.capabilities.model_copy(update={"logprobs": False})

    async def generate(self, messages: list[Message], config: GenerationConfig) -> Generation:
        want_logprobs = config.logprobs and self._logprobs
        kwargs = self.batch_body(messages, config)
        try:
            resp = await self._post_chat(kwargs)
        except ModelCallError as exc:
            if (want_logprobs and exc.status in (400, 422) and "prompt_logprobs" not in str(exc)
                    and "logprob" in (str(exc) + getattr(exc, "body", "")).lower()):
                self._withdraw_logprobs("refused them")
                return await self.generate(messages, config.model_copy(update={"logprobs": False}))
            raise
        try:
            gen = _parse_chat(resp)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ModelCallError("malformed", f"unexpected response shape: {type(exc).__name__}: {exc}") from exc
        if len(gen.text) > self.max_answer_chars:
            raise ModelCallError("too_large", f"the answer has {len(gen.text):,} characters, more than "
                                              f"max_answer_chars={self.max_answer_chars:,}; it is not stored")
        if want_logprobs and gen.logprobs is None and gen.text:
            # asked, answered, none given (transformers serve accepts the field and ignores it): the capability was
            # an assumption; it is withdrawn, and said once (the run marks it in results.json: run/calls.py)
            self._withdraw_logprobs("answered without them")
        return gen

    async def _prompt_logprobs(self, messages: list[Message], continuation: str) -> list[float]:
        """Log-probabilities of the prompt tokens, the assistant turn pre-filled with ``continuation``."""
        body = {"model": self.model, "messages": to_openai(messages) + [{"role": "assistant", "content": continuation}],
                "temperature": 0.0, "max_tokens": 1, "prompt_logprobs": 0, "continue_final_message": True,
                "add_generation_prompt": False}
        resp = await self._post_chat(body)
        entries = resp.get("prompt_logprobs")
        if not isinstance(entries, list):
            raise ModelCallError("malformed", "the server returned no prompt_logprobs; it needs vLLM's "
                                              "prompt_logprobs extension (drop ?prompt_logprobs=1)")
        # prompt_logprobs=0: each entry holds just the prompt token itself
        return [float(next(iter(e.values()))["logprob"]) for e in entries if e]

    async def loglikelihood(self, messages: list[Message], continuations: list[str]) -> list[Loglikelihood]:
        """Sum and count of each continuation's token log-probabilities (vLLM servers, ?prompt_logprobs=1): a request
        with an empty assistant turn gives the prompt's length, each continuation's tokens are the entries beyond."""
        base = await self._prompt_logprobs(messages, "")
        out = []
        for cont in continuations:
            lps = await self._prompt_logprobs(messages, cont)
            n = len(lps) - len(base)
            if n <= 0:
                raise ModelCallError("malformed", f"continuation {cont!r} added no prompt tokens")
            out.append(Loglikelihood(sum=float(sum(lps[-n:])), n_tokens=n))
        return out


def _body_extras(spec: ModelSpec) -> dict[str, Any]:
    """Provider extras named in the spec, as request body fields (they are part of the model's identity)."""
    extra: dict[str, Any] = {}
    raw = spec.get_str("extra_body")
    if raw:
        try:
            extra = json.loads(raw)
        except ValueError as exc:
            raise SpecError(f"{spec.canonical()}: extra_body is not JSON ({exc})") from None
        if not isinstance(extra, dict):
            raise SpecError(f"{spec.canonical()}: extra_body must be a JSON object")
    if spec.get_str("reasoning_effort"):
        extra["reasoning_effort"] = spec.get_str("reasoning_effort")
    if "enable_thinking" in spec.params:
        extra.setdefault("chat_template_kwargs", {})["enable_thinking"] = spec.get_bool("enable_thinking", True)
    return extra


def _call_error(exc: BaseException) -> ModelCallError:
    """``exc`` as a :class:`ModelCallError`: the direct path raises these already; the SDK's exceptions are
    translated (the SDK is imported only then).  Anything else is raised as it is."""
    if isinstance(exc, ModelCallError):
        return exc
    import openai

    err = translate(exc, openai)
    if getattr(exc, "body", None) is not None:  # the whole error body, as the direct path keeps it
        err.body = redact(json.dumps(exc.body, default=str))  # type: ignore[attr-defined]
    return err


def _parse_chat(resp: dict[str, Any]) -> Generation:
    """A chat-completions response body (plain JSON) as a :class:`Generation`."""
    choices = resp.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ModelCallError("malformed", "response has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise ModelCallError("malformed", "response choice has no message")
    text = message.get("content") or ""
    if not isinstance(text, str):
        raise ModelCallError("malformed", f"message content is a {type(text).__name__}, not text")
    refusal = message.get("refusal") or None
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    reasoning = reasoning if isinstance(reasoning, str) and reasoning else None
    finish = "refusal" if refusal else _FINISH.get(choice.get("finish_reason") or "", "unknown")
    u = resp.get("usage")
    # checked, never trusted: a missing, negative or non-numeric count is marked and priced at the estimate
    usage = Usage.reported(u.get("prompt_tokens"), u.get("completion_tokens")) if isinstance(u, dict) else \
        Usage.reported(None, None) if u is None else Usage.reported(u, u)
    logprobs = None
    lp = choice.get("logprobs")
    if isinstance(lp, dict) and lp.get("content"):
        logprobs = [
            TokenLogprob(token=t["token"], logprob=t["logprob"],
                         top=[(x["token"], x["logprob"]) for x in (t.get("top_logprobs") or [])] or None)
            for t in lp["content"]
        ]
    return Generation(text=text, finish_reason=finish, usage=usage, logprobs=logprobs, refusal=refusal,
                      reasoning=reasoning, endpoint=resp.get("_endpoint"))

