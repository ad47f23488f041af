"""The providers' batch protocols: the OpenAI Batch API (through its SDK) and Anthropic Message Batches.

Each backend takes the adapter's clients and its parser of a single response, so a batched answer is read, checked
and priced exactly as a direct one; :mod:`vlmcheck.run.batch` decides when to submit and what to retry.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Callable, Iterator

from ..core.errors import ModelCallError, kind_for_status
from ._http_errors import translate
from .http import json_object
from ..run.loop_clients import PerLoopClients

_OPENAI_DONE = ("completed", "failed", "expired", "cancelled")


@contextlib.contextmanager
def _sdk_errors() -> Iterator[None]:
    """The ``openai`` SDK's exceptions as :class:`ModelCallError`."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001
        import openai

        raise translate(exc, openai) from exc


class OpenAIBatches:
    """``/v1/files`` (purpose ``batch``) plus ``/v1/batches`` over ``/v1/chat/completions``."""

    provider = "openai"
    max_items, max_bytes = 50_000, 200_000_000  # the Batch API's limits on one batch (its input file)

    def __init__(self, clients: PerLoopClients, parse: Callable[[dict[str, Any]], Any]) -> None:
        self.clients, self.parse = clients, parse

    async def submit(self, items: list[tuple[str, dict[str, Any]]]) -> str:
        lines = "".join(json.dumps({"custom_id": key, "method": "POST", "url": "/v1/chat/completions", "body": body},
                                   ensure_ascii=False) + "\n" for key, body in items)
        client = self.clients.get()
        with _sdk_errors():
            f = await client.files.create(file=("vlmcheck-batch.jsonl", lines.encode()), purpose="batch")
            batch = await client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                                completion_window="24h")
        return batch.id

    async def ended(self, batch_id: str) -> bool:
        with _sdk_errors():
            return (await self.clients.get().batches.retrieve(batch_id)).status in _OPENAI_DONE

    async def results(self, batch_id: str) -> dict[str, Any]:
        client = self.clients.get()
        out: dict[str, Any] = {}
        with _sdk_errors():
            batch = await client.batches.retrieve(batch_id)
            for file_id in filter(None, (batch.output_file_id, batch.error_file_id)):
                text = (await client.files.content(file_id)).text
                rows = (json.loads(line) for line in text.splitlines() if line.strip())
                out.update((row["custom_id"], self._item(row)) for row in rows)
        # a batch that failed, expired or was cancelled: the items it did not answer are retried by the collector
        return out

    def _item(self, row: dict[str, Any]) -> Any:
        resp, err = row.get("response") or {}, row.get("error")
        status = resp.get("status_code")
        if status == 200 and isinstance(resp.get("body"), dict):
            try:
                return self.parse(resp["body"])
            except ModelCallError as exc:
                return exc
        body = resp.get("body") if isinstance(resp.get("body"), dict) else {}
        message = ((body.get("error") or {}).get("message") if body else None) or (err or {}).get("message") \
            or f"batch item failed (HTTP {status})"
        kind = kind_for_status(status) if isinstance(status, int) else "server"
        if (err or {}).get("code") in ("batch_expired", "batch_cancelled"):
            kind = "timeout"
        return ModelCallError(kind, message, status=status if isinstance(status, int) else None)


class AnthropicBatches:
    """``/v1/messages/batches``: create, retrieve, results (JSONL), through the adapter's neutral client
    (``models/http.py``), the bodies and answers as its direct calls send and read them."""

    provider = "anthropic"
    max_items, max_bytes = 100_000, 256_000_000  # Message Batches' limits on one batch

    def __init__(self, http: Any, parse: Callable[[dict[str, Any]], Any]) -> None:
        self.http, self.parse = http, parse

    async def submit(self, items: list[tuple[str, dict[str, Any]]]) -> str:
        body = {"requests": [{"custom_id": key, "params": params} for key, params in items]}
        return str((await self.http.post_json("/v1/messages/batches", body))["id"])

    async def ended(self, batch_id: str) -> bool:
        batch = json_object(await self.http.request("GET", f"/v1/messages/batches/{batch_id}"))
        return batch.get("processing_status") == "ended"

    async def results(self, batch_id: str) -> dict[str, Any]:
        data = await self.http.request("GET", f"/v1/messages/batches/{batch_id}/results")
        rows = [json.loads(line) for line in data.splitlines() if line.strip()]
        return {row["custom_id"]: self._item(row.get("result") or {}) for row in rows}

    def _item(self, result: dict[str, Any]) -> Any:
        kind = result.get("type")
        if kind == "succeeded":
            try:
                return self.parse(result.get("message") or {})
            except ModelCallError as exc:
                return exc
        if kind in ("expired", "canceled"):
            return ModelCallError("timeout", f"the batch item {kind}")
        err = (result.get("error") or {}).get("error") or {}
        etype, message = err.get("type", "api_error"), err.get("message", "batch item errored")
        retry = etype in ("api_error", "overloaded_error", "rate_limit_error")
        return ModelCallError("server" if retry else "bad_request", f"{etype}: {message}")
