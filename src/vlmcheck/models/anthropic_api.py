"""Anthropic Messages API through the official ``anthropic`` SDK (extra ``apis``).

Spec: ``anthropic:MODEL[?key_env=ANTHROPIC_API_KEY&concurrency=N&send_temperature=1]``.

Current Anthropic SDKs and models take no sampling parameters, so by default
decoding is the provider's own, not greedy: results record the spec, and
``send_temperature=1`` sends ``temperature``/``top_p`` for models that accept them.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import ModelCallError
from ..core.messages import Message, to_anthropic
from ..core.roles import Capabilities, Generation, GenerationConfig, Usage
from ..core.secrets import register_secret, secret_from_env
from ..core.spec import ModelSpec, SpecError
from ._http_errors import translate
from ..run.loop_clients import PerLoopClients

_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "refusal": "refusal"}


class AnthropicChat:
    def __init__(self, spec: ModelSpec) -> None:
        import anthropic

        key = spec.secret("api_key") or secret_from_env(spec.get_str("key_env", "ANTHROPIC_API_KEY"))
        if not key:
            raise SpecError("the Anthropic API needs a key: set ANTHROPIC_API_KEY (or ?key_env=NAME)")
        register_secret(key)
        timeout = spec.get_float("timeout", 600.0)
        self.timeout = timeout  # the scheduler's total deadline per call
        self._clients = PerLoopClients(lambda: anthropic.AsyncAnthropic(api_key=key, base_url=spec.base_url,
                                                                        max_retries=0, timeout=timeout,
                                                                        **spec.request_auth()))
        self.model_id = spec.canonical()
        self.model = spec.name
        self.concurrency_key = f"anthropic@{spec.base_url or 'api.anthropic.com'}"
        self.max_concurrency = spec.get_int("concurrency", 0) or None
        self.send_sampling = spec.get_bool("send_temperature", False)
        # the Messages API continues a trailing assistant turn (a pre-filled answer start)
        self.capabilities = Capabilities(multi_image=True, prefill=True)
        # ?batch=1: cache misses go through Message Batches at the batch price (run/batch.py).  Without it the
        # backend is still there for a resume to re-attach to batches an earlier session journaled
        from .batch_api import AnthropicBatches

        self.batch_backend = AnthropicBatches(self._clients, _parse_message)
        self.batch = self.batch_backend if spec.get_bool("batch", False) else None
        self.batch_window = spec.get_float("batch_window", 2.0)
        self.batch_poll = spec.get_float("batch_poll", 30.0)

    def batch_body(self, messages: list[Message], config: GenerationConfig) -> dict[str, Any]:
        """The Messages API parameters of one request, as a batch item carries them (sampling parameters,
        sent as extra body fields directly, are plain parameters here)."""
        kwargs = self._kwargs(messages, config)
        return {**{k: v for k, v in kwargs.items() if k != "extra_body"}, **kwargs.get("extra_body", {})}

    def _kwargs(self, messages: list[Message], config: GenerationConfig) -> dict[str, Any]:
        system, msgs = to_anthropic(messages)
        kwargs: dict[str, Any] = {"model": self.model, "messages": msgs, "max_tokens": config.max_tokens}
        if system:
            kwargs["system"] = system
        if self.send_sampling:
            # Current SDKs no longer type sampling parameters (current models
            # ignore them); older models and proxies still accept them as JSON.
            extra: dict[str, Any] = {"temperature": config.temperature}
            if config.top_p is not None:
                extra["top_p"] = config.top_p
            kwargs["extra_body"] = extra
        if config.stop:
            kwargs["stop_sequences"] = config.stop
        return kwargs

    async def generate(self, messages: list[Message], config: GenerationConfig) -> Generation:
        import anthropic

        try:
            resp = await self._clients.get().messages.create(**self._kwargs(messages, config))
        except Exception as exc:  # noqa: BLE001
            raise translate(exc, anthropic) from exc
        return _parse_message(resp)


def _parse_message(resp: Any) -> Generation:
    """A Messages API response (the SDK's object) as a :class:`Generation`."""
    blocks = getattr(resp, "content", None)
    if blocks is None:
        raise ModelCallError("malformed", "response has no content")
    text = "".join(getattr(b, "text", "") for b in blocks if getattr(b, "type", "") == "text")
    u = getattr(resp, "usage", None)
    usage = Usage.reported(getattr(u, "input_tokens", None), getattr(u, "output_tokens", None))
    return Generation(text=text, finish_reason=_FINISH.get(resp.stop_reason or "", "unknown"), usage=usage)


def make(spec: ModelSpec, role: str) -> AnthropicChat:
    return AnthropicChat(spec)
