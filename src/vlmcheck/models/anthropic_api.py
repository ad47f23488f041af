"""Anthropic Messages API (``POST /v1/messages``) and Message Batches (``?batch=1``): ``anthropic:MODEL[@URL]``.

Current Anthropic models take no sampling parameters, so decoding is the provider's own, not greedy, unless
``send_temperature=1`` sends ``temperature``/``top_p`` (for models that accept them).
"""

from __future__ import annotations

from typing import Any

from ..core.errors import ModelCallError
from ..core.messages import Message, to_anthropic
from ..core.roles import Capabilities, Generation, GenerationConfig, Usage
from ..core.spec import ModelSpec
from .batch_api import AnthropicBatches
from .http import JSONHTTP, KeyedChat

_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "refusal": "refusal"}


class AnthropicHTTP(JSONHTTP):
    """The Anthropic dialect: the key in ``x-api-key`` and the API version in ``anthropic-version``."""

    key_header = "x-api-key"
    default_base_url, base_url_env = "https://api.anthropic.com", "ANTHROPIC_BASE_URL"

    def dialect_headers(self) -> dict[str, str]:
        return {"anthropic-version": "2023-06-01"}


class AnthropicChat(KeyedChat):
    dialect, provider, key_envs = AnthropicHTTP, "Anthropic", ("ANTHROPIC_API_KEY",)

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        self.send_sampling = spec.get_bool("send_temperature", False)
        # the Messages API continues a trailing assistant turn (a pre-filled answer start)
        self.capabilities = Capabilities(multi_image=True, prefill=True)
        # Message Batches' results are read up to the batch's own size limit
        self.batch_api(AnthropicBatches(self.client(max_bytes=AnthropicBatches.max_bytes), _parse_message))

    def batch_body(self, messages: list[Message], config: GenerationConfig) -> dict[str, Any]:
        """The Messages API body of one request, as sent and as a batch item carries it."""
        system, msgs = to_anthropic(messages)
        body: dict[str, Any] = {"model": self.model, "messages": msgs, "max_tokens": config.max_tokens}
        if system:
            body["system"] = system
        if self.send_sampling:
            body["temperature"] = config.temperature
            if config.top_p is not None:
                body["top_p"] = config.top_p
        if config.stop:
            body["stop_sequences"] = config.stop
        return body

    async def generate(self, messages: list[Message], config: GenerationConfig) -> Generation:
        return _parse_message(await self.http.post_json("/v1/messages", self.batch_body(messages, config)))


def _parse_message(resp: dict[str, Any]) -> Generation:
    """A Messages API response (plain JSON) as a :class:`Generation`."""
    blocks = resp.get("content")
    if not isinstance(blocks, list):
        raise ModelCallError("malformed", "response has no content")
    text = "".join(b.get("text") or "" for b in blocks if isinstance(b, dict) and b.get("type") == "text")
    u = resp.get("usage")
    # checked, never trusted: a missing, negative or non-numeric count is marked and priced at the estimate
    usage = Usage.reported(u.get("input_tokens"), u.get("output_tokens")) if isinstance(u, dict) else \
        Usage.reported(None, None) if u is None else Usage.reported(u, u)
    return Generation(text=text, finish_reason=_FINISH.get(resp.get("stop_reason") or "", "unknown"), usage=usage)
