"""Translate HTTP error statuses (the neutral client's, ``models/http.py``) and the ``openai`` SDK's exceptions
(``?http=sdk`` and its Batch API) into :class:`ModelCallError`."""

from __future__ import annotations

import json
import re
from types import ModuleType
from typing import Any

from ..core.errors import ModelCallError, kind_for_status, parse_retry_after
from ..core.secrets import redact


#: What a refused connection reads as, whichever client met it.
REFUSED = "connection refused (is the server running at that address?)"


def translate(exc: BaseException, sdk: ModuleType) -> ModelCallError:
    if isinstance(exc, sdk.APIConnectionError) and _refused(exc):
        # before the timeout check: the SDK's aiohttp transport reports a refused connection as ConnectTimeout
        return ModelCallError("connection", REFUSED)
    if isinstance(exc, sdk.APITimeoutError):
        return ModelCallError("timeout", redact(str(exc) or "request timed out"))
    if isinstance(exc, sdk.APIConnectionError):
        return ModelCallError("connection", redact(f"{connection_reason(exc)} ({exc})" if str(exc) else
                                                   connection_reason(exc)))
    if isinstance(exc, sdk.APIResponseValidationError):
        return ModelCallError("malformed", redact(f"response did not match the API schema: {exc}"))
    if isinstance(exc, sdk.APIStatusError):
        message = body_message(getattr(exc, "body", None)) or str(exc)
        return status_error(exc.status_code, getattr(exc.response, "headers", None), message)
    if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)):
        return ModelCallError("malformed", f"response body is not valid JSON: {exc}")
    raise exc


def status_error(status: int, headers: Any, message: str) -> ModelCallError:
    """The error for an HTTP error status, with the wait the server asked for (Retry-After, retry-after-ms)."""
    headers = headers or {}
    retry_after = parse_retry_after(headers.get("retry-after"))
    if retry_after is None and headers.get("retry-after-ms"):
        try:
            retry_after = float(headers["retry-after-ms"]) / 1000.0
        except ValueError:
            retry_after = None
    message = unknown_fields_sentence(status, message) or message
    return ModelCallError(kind_for_status(status), redact(message), status=status, retry_after=retry_after)


def body_message(body: Any) -> str | None:
    """The server's own words in an error body: ``error.message`` (or a top-level ``message``), or FastAPI's
    ``detail`` (a string, or pydantic's list of errors: ``transformers serve``, vLLM's validation errors), if any."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        detail = body.get("detail")
        if isinstance(detail, str) and detail:
            return detail
        if isinstance(detail, list) and detail:
            parts = []
            for d in detail[:3]:
                if isinstance(d, dict):
                    loc = ".".join(str(x) for x in d.get("loc", ()) if x != "body")
                    parts.append(f"{loc}: {d.get('msg', d.get('type', ''))}" if loc else str(d.get("msg", d)))
            return "; ".join(parts) or None
    return None


#: request fields vlmcheck sends only when a spec option or a method asks for them: the option to name when a
#: server refuses one (docs/usage.md, "Server dialects")
FIELD_OPTIONS = {
    "prompt_logprobs": "?prompt_logprobs=1 (vLLM's prompt log-probabilities, for likelihood scoring)",
    "continue_final_message": "?prompt_logprobs=1 or ?prefill=1 (vLLM's pre-filled assistant turn)",
    "add_generation_prompt": "?prompt_logprobs=1 or ?prefill=1 (vLLM's pre-filled assistant turn)",
    "logprobs": "a method asking for token log-probabilities (add ?logprobs=0 to never ask)",
    "top_logprobs": "a method asking for token log-probabilities (add ?logprobs=0 to never ask)",
    "max_completion_tokens": "?max_tokens_param=max_completion_tokens (use ?max_tokens_param=max_tokens)",
    "max_tokens": "?max_tokens_param=max_tokens (use ?max_tokens_param=max_completion_tokens)",
    "reasoning_effort": "?reasoning_effort=",
    "chat_template_kwargs": "?enable_thinking= (a chat template's switch, sent as chat_template_kwargs)",
    "seed": "--repeats or --temperature (a per-request seed)",
}
_UNKNOWN = re.compile(r"unexpected field|unrecognized (?:request )?argument|unknown field|extra inputs are not "
                      r"permitted|extra_forbidden|unsupported parameter|not supported|unknown parameter", re.I)


def unknown_fields_sentence(status: int, message: str, body: str = "") -> str | None:
    """One sentence for a 4xx that names request fields the server does not know: which vlmcheck option sent
    each, and what to do.  None when the answer names no such field."""
    if not 400 <= status < 500 or status in (401, 403, 404, 429):
        return None
    text = f"{message} {body}"
    if not _UNKNOWN.search(text):
        return None
    named = [f for f in FIELD_OPTIONS if re.search(rf"(?<![a-z_]){f}(?![a-z_])", text)]
    named = [f for f in named if not any(f != g and f in g for g in named)]  # "logprobs" inside "prompt_logprobs"
    if not named:
        return None
    return (f"the server does not accept the request {_fields_said(named, message)}; drop that option from the "
            "model spec or use a server that offers it")


def _fields_said(named: list[str], message: str) -> str:
    """"field(s) 'a', 'b' [server said: ...]: " and which vlmcheck option sent each, one clause per option: the
    server's words before the advice, so a message shortened for display loses its middle, not its advice."""
    by_option: dict[str, list[str]] = {}
    for f in named:
        by_option.setdefault(FIELD_OPTIONS[f], []).append(repr(f))
    causes = "; ".join(f"{', '.join(fs)} {'is' if len(fs) == 1 else 'are'} sent for {opt}"
                       for opt, fs in by_option.items())
    return (f"field{'s' if len(named) > 1 else ''} {', '.join(repr(f) for f in named)} "
            f"[server said: {' '.join(message.split())[:200]}]: {causes}")


#: request fields that no OpenAI API defines: only servers that offer them (vLLM, SGLang) accept them
NON_STANDARD = ("prompt_logprobs", "continue_final_message", "add_generation_prompt", "chat_template_kwargs")


def name_sent_fields(err: ModelCallError, body: dict[str, Any]) -> ModelCallError:
    """``err`` for a request that carried non-standard fields, naming the option that sent them when the 4xx
    is about them, whatever words wrap it: the answer mentions one of them, or it is a 422 (a body the server
    could not validate) whose own words say nothing more (a gateway's "Error code: 422" for its backend's)."""
    sent = [f for f in NON_STANDARD if f in body]
    message = str(err.args[0]) if err.args else ""
    if not sent or err.status not in (400, 422) or message.startswith("the server does not accept"):
        return err
    named = [f for f in sent if re.search(rf"(?<![a-z_]){f}(?![a-z_])", message)]
    if not named and err.status == 422:
        named = sent
    if not named:
        return err
    return ModelCallError(err.kind, redact(
        f"the server refused a request with the non-standard {_fields_said(named, message)}; if the server (or a "
        "gateway in front of it) does not offer it, drop that option from the model spec"),
        status=err.status, retry_after=err.retry_after)


def _chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and all(e is not x for x in chain):  # a cycle ends it
        chain.append(e)
        e = e.__cause__ or e.__context__
    return chain


def _refused(exc: BaseException) -> bool:
    return any(isinstance(x, ConnectionRefusedError) for x in _chain(exc))


def connection_reason(exc: BaseException) -> str:
    """What went wrong under an SDK's generic "Connection error.": refused, unknown host, reset..."""
    chain = _chain(exc)
    text = " ".join(str(x) for x in chain).lower()
    if _refused(exc) or "refused" in text:
        return "connection refused"
    if "name or service not known" in text or "nodename nor servname" in text or "getaddrinfo" in text:
        return "host not found"
    if any(isinstance(x, ConnectionResetError) for x in chain) or "reset" in text:
        return "connection reset"
    return str(chain[-1]) or type(chain[-1]).__name__
