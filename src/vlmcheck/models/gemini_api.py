"""Google Gemini API (``POST /v1beta/models/MODEL:generateContent``): ``gemini:MODEL[@URL]``."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from ..core.errors import ModelCallError
from ..core.messages import Message, to_gemini
from ..core.roles import Capabilities, Generation, GenerationConfig, Usage
from ..core.spec import ModelSpec
from .http import JSONHTTP, KeyedChat

_FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter", "PROHIBITED_CONTENT": "content_filter",
           "BLOCKLIST": "content_filter", "RECITATION": "content_filter"}


class GeminiHTTP(JSONHTTP):
    """The Gemini dialect: the key in ``x-goog-api-key``."""

    key_header = "x-goog-api-key"
    default_base_url, base_url_env = "https://generativelanguage.googleapis.com", "GOOGLE_GEMINI_BASE_URL"


class GeminiChat(KeyedChat):
    dialect, provider, key_envs = GeminiHTTP, "Gemini", ("GEMINI_API_KEY", "GOOGLE_API_KEY")

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        self._path = f"/v1beta/models/{quote(spec.name.removeprefix('models/'), safe='-._~')}:generateContent"
        self.concurrency_key = "gemini"
        self.capabilities = Capabilities(multi_image=True, seeded=True)

    def _body(self, messages: list[Message], config: GenerationConfig) -> dict[str, Any]:
        system, contents = to_gemini(messages)
        generation = {"temperature": config.temperature, "maxOutputTokens": config.max_tokens, "topP": config.top_p,
                      "seed": config.seed, "stopSequences": config.stop}
        body: dict[str, Any] = {"contents": contents,
                                "generationConfig": {k: v for k, v in generation.items() if v is not None}}
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        return body

    async def generate(self, messages: list[Message], config: GenerationConfig) -> Generation:
        resp = await self.http.post_json(self._path, self._body(messages, config))
        candidates = resp.get("candidates") or []
        if not candidates:
            feedback = resp.get("promptFeedback")
            if feedback is not None:
                return Generation(text="", finish_reason="content_filter", refusal=str(feedback))
            raise ModelCallError("malformed", "response has no candidates")
        cand = candidates[0] if isinstance(candidates, list) else None
        if not isinstance(cand, dict):
            raise ModelCallError("malformed", "response candidate is not an object")
        parts = (cand.get("content") or {}).get("parts") or []
        # the answer's text, without a thinking model's thought summaries (parts marked "thought")
        text = "".join(p.get("text") or "" for p in parts if isinstance(p, dict) and not p.get("thought"))
        meta = resp.get("usageMetadata")
        meta = meta if isinstance(meta, dict) else {}
        usage = Usage.reported(meta.get("promptTokenCount"), meta.get("candidatesTokenCount", 0) or 0)
        return Generation(text=text, finish_reason=_FINISH.get(cand.get("finishReason") or "", "unknown"),
                          usage=usage)
