"""The preflight of an OpenAI-compatible server: reachable, key accepted, model served (``GET /models``), before
the first sample."""

from __future__ import annotations

import json
import re

from ..core.errors import ModelCallError, PreflightError, shorten_middle
from ..core.secrets import redact
from ..core.spec import ModelSpec
from ._http_errors import connection_reason
from .http import JSONHTTP


async def preflight(http: JSONHTTP, spec: ModelSpec) -> None:
    """``GET /models`` once, with a short timeout: the endpoint answers, the key is accepted, the model is
    listed.  A server without the endpoint (a bare 404) passes: only what it says is checked; a client error about
    the run (a gateway's 400 for a key it does not know, a 404 naming the model) refuses it.  Sent by the neutral
    client whichever transport the model's requests take (``?http=sdk`` included)."""
    where = spec.base_url or "the OpenAI API"
    try:
        content = await http.request("GET", "/models", timeout=min(spec.get_float("timeout", 600.0), 15.0))
    except ModelCallError as exc:
        if exc.status in (401, 403):
            raise PreflightError(f"{where} rejected the API key (HTTP {exc.status}); set the right key "
                                 "(--api-key, OPENAI_API_KEY or ?key_env=NAME)") from None
        if exc.status is None and exc.kind == "timeout":
            raise PreflightError(f"{where} did not answer GET /models within 15 s; is the server up?") from None
        if exc.status is None:
            reason = connection_reason(exc.__cause__) if exc.__cause__ else str(exc.args[0])
            raise PreflightError(f"cannot connect to {where}: {reason}; is the server running there?") from None
        if exc.status >= 500:
            raise PreflightError(f"{where} answered GET /models with HTTP {exc.status}; the server is "
                                 "not ready") from None
        _refused(exc.status, str(exc.args[0]), where)
        return  # 404 (no such endpoint) and other answers: nothing more to check
    try:
        page = json.loads(content)
    except ValueError:
        return
    data = page.get("data") if isinstance(page, dict) else None
    ids = [m["id"] for m in data if isinstance(m, dict) and m.get("id")] if isinstance(data, list) else []
    if ids and spec.name not in ids:
        shown = ", ".join(str(i) for i in ids[:8]) + (" ..." if len(ids) > 8 else "")
        raise PreflightError(f"{where} does not serve model {spec.name!r}; it serves: {shown} (check the name; a "
                             "server that loads models on demand, such as Ollama, LM Studio or transformers serve, "
                             "lists only those loaded: then pass --no-preflight)")


#: a 404's own words when the server simply has no ``GET /models`` (nginx routing only the chat path, a server
#: without the endpoint): nothing is wrong with the run then
_NO_ENDPOINT = re.compile(r"\W*(404\W*)?((page|route|endpoint|resource|path)\W+)?not\W*found\W*|\s*<.*|\s*",
                          re.I | re.S)
#: what a gateway says of a key it does not know (LiteLLM without a database: HTTP 400 "No connected db.")
_KEY_WORDS = re.compile(r"key|auth|token|credential|db\b|database|permission|forbidden|unauthori", re.I)


def _refused(status: int | None, message: str, where: str) -> None:
    """Refuse a run whose ``GET /models`` was answered with a client error that is about the run (a gateway's
    answer to a wrong key, an unknown model or route), quoting the server; a server that only lacks the
    endpoint (a bare 404, 405) or is busy (429) passes."""
    if status is None or status in (405, 429) or not 400 <= status < 500:
        return
    message = " ".join(message.split())
    if status == 404 and _NO_ENDPOINT.fullmatch(message):
        return
    said = shorten_middle(redact(message), 200) or "no message"
    if _KEY_WORDS.search(message):
        advice = ("a gateway such as LiteLLM answers a key it does not know this way: set the right key (--api-key, "
                  "OPENAI_API_KEY or ?key_env=NAME)")
    else:
        advice = "check the base URL and the model name (or pass --no-preflight if the server serves the model)"
    raise PreflightError(f"{where} refused GET /models with HTTP {status} (\"{said}\"); {advice}")
