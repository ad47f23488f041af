"""The OpenAI Batch API and Anthropic Message Batches, faked for tests (part of the fake server).

OpenAI: ``POST /v1/files`` (multipart, purpose ``batch``), ``POST /v1/batches``, ``GET /v1/batches/ID``,
``GET /v1/files/ID/content``.  Anthropic: ``POST /v1/messages/batches``, ``GET /v1/messages/batches/ID``,
``GET /v1/messages/batches/ID/results``.  A batch ends ``delay`` seconds after it was created; its items are
answered as the direct endpoints would answer them, and a prompt holding ``[fault=400]`` or
``[fault=500xN]`` makes its item fail (the 500 for the first N batches that carry it).  Every batch
created is logged (``{"batch_create": ID, "n": items}``) so tests can count submissions.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import Any, Callable

_FAULT = re.compile(r"\[fault=(400|500)(?:x(\d+))?\]")


class FakeBatches:
    def __init__(self, delay: float, completion: Callable[[dict, str], dict],
                 message: Callable[[dict, str, dict], dict],
                 prompt_text: Callable[[dict], str], log: Any = None) -> None:
        self.delay, self.completion, self.message, self.prompt_text, self.log = (delay, completion, message,
                                                                                 prompt_text, log)
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.seen: dict[str, int] = {}  # custom_id -> batches that carried it

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes] | None:
        """(status, JSON or JSONL bytes) for a batch route, None for any other path."""
        if method == "POST" and path == "/v1/files":
            content = _multipart_file(headers.get("content-type", ""), body)
            fid = "file-" + hashlib.sha256(content).hexdigest()[:16]
            self.files[fid] = content
            return 200, _j({"id": fid, "object": "file", "bytes": len(content), "created_at": int(time.time()),
                            "filename": "batch.jsonl", "purpose": "batch", "status": "processed"})
        m = re.fullmatch(r"/v1/files/([\w-]+)/content", path)
        if method == "GET" and m:
            found = self.files.get(m.group(1))
            return (200, found) if found is not None else (404, _j({"error": {"message": "no such file"}}))
        if method == "POST" and path == "/v1/batches":
            req = json.loads(body)
            lines = [json.loads(x) for x in self.files.get(req["input_file_id"], b"").decode().splitlines() if x]
            return 200, _j(self._openai_view(self._create("batch_", "openai",
                                                          [(x["custom_id"], x["body"]) for x in lines])))
        m = re.fullmatch(r"/v1/batches/([\w-]+)", path)
        if method == "GET" and m and m.group(1) in self.batches:
            return 200, _j(self._openai_view(self.batches[m.group(1)]))
        if method == "POST" and path == "/v1/messages/batches":
            req = json.loads(body)
            b = self._create("msgbatch_", "anthropic", [(r["custom_id"], r["params"]) for r in req["requests"]])
            b["headers"] = headers  # the items are answered as if each had been sent with the batch's headers
            return 200, _j(self._anthropic_view(b, headers))
        m = re.fullmatch(r"/v1/messages/batches/([\w-]+)(/results)?", path)
        if method == "GET" and m and m.group(1) in self.batches:
            b = self.batches[m.group(1)]
            if not m.group(2):
                return 200, _j(self._anthropic_view(b, headers))
            return 200, "".join(json.dumps(r) + "\n" for r in self._anthropic_results(b)).encode()
        return None

    def _create(self, prefix: str, provider: str, items: list[tuple[str, dict]]) -> dict[str, Any]:
        bid = prefix + hashlib.sha256(f"{time.time_ns()}{len(self.batches)}".encode()).hexdigest()[:16]
        outcomes = {}
        for cid, req in items:
            self.seen[cid] = self.seen.get(cid, 0) + 1
            fault = _FAULT.search(self.prompt_text(req))
            failing = fault and (fault.group(1) == "400" or self.seen[cid] <= int(fault.group(2) or 1))
            outcomes[cid] = (int(fault.group(1)) if failing else 200, req)
        b = {"id": bid, "provider": provider, "created": time.time(), "items": outcomes}
        self.batches[bid] = b
        if self.log:
            self.log.write(json.dumps({"batch_create": bid, "provider": provider, "n": len(items),
                                       "t": time.time()}) + "\n")
        return b

    def _ended(self, b: dict[str, Any]) -> bool:
        return time.time() - b["created"] >= self.delay

    def _openai_view(self, b: dict[str, Any]) -> dict[str, Any]:
        done = self._ended(b)
        view = {"id": b["id"], "object": "batch", "endpoint": "/v1/chat/completions", "errors": None,
                "input_file_id": "file-in", "completion_window": "24h", "status": "completed" if done else
                "in_progress", "output_file_id": None, "error_file_id": None, "created_at": int(b["created"]),
                "request_counts": {"total": len(b["items"]), "completed": 0, "failed": 0}}
        if done:
            ok, bad = [], []
            for cid, (status, req) in b["items"].items():
                body = self.completion(req, _digest(req)) if status == 200 else {"error": {"message": f"fake {status}"}}
                row = {"id": f"batch_req_{cid[:8]}", "custom_id": cid, "error": None,
                       "response": {"status_code": status, "request_id": "req", "body": body}}
                (ok if status == 200 else bad).append(row)
            for name, rows in (("output_file_id", ok), ("error_file_id", bad)):
                if rows:
                    fid = f"file-{name[:3]}-{b['id']}"
                    self.files[fid] = "".join(json.dumps(r) + "\n" for r in rows).encode()
                    view[name] = fid
            view["request_counts"] = {"total": len(b["items"]), "completed": len(ok), "failed": len(bad)}
        return view

    def _anthropic_view(self, b: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        done = self._ended(b)
        host = headers.get("host", "127.0.0.1")
        return {"id": b["id"], "type": "message_batch", "processing_status": "ended" if done else "in_progress",
                "request_counts": {"processing": 0 if done else len(b["items"]), "succeeded": 0, "errored": 0,
                                   "canceled": 0, "expired": 0},
                "created_at": "2026-01-01T00:00:00Z", "expires_at": "2026-01-02T00:00:00Z", "ended_at": None,
                "archived_at": None, "cancel_initiated_at": None,
                "results_url": f"http://{host}/v1/messages/batches/{b['id']}/results" if done else None}

    def _anthropic_results(self, b: dict[str, Any]) -> list[dict[str, Any]]:
        rows = []
        for cid, (status, req) in b["items"].items():
            if status == 200:
                result = {"type": "succeeded", "message": self.message(req, _digest(req), b.get("headers", {}))}
            else:
                etype = "invalid_request_error" if status == 400 else "api_error"
                result = {"type": "errored", "error": {"type": "error", "error": {"type": etype,
                                                                                    "message": f"fake {status}"}}}
            rows.append({"custom_id": cid, "result": result})
        return rows


def _j(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def _digest(req: dict) -> str:
    """The digest the direct endpoints would answer this request with."""
    return hashlib.sha256(json.dumps(req.get("messages"), sort_keys=True).encode()).hexdigest()[:12]


def _multipart_file(content_type: str, body: bytes) -> bytes:
    """The ``file`` part of a multipart/form-data body."""
    m = re.search(r"boundary=\"?([^\";]+)\"?", content_type)
    if not m:
        return body
    for part in body.split(b"--" + m.group(1).encode()):
        head, _, rest = part.partition(b"\r\n\r\n")
        if b'name="file"' in head:
            return rest[:-2] if rest.endswith(b"\r\n") else rest
    return b""
