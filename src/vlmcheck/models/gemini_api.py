"""Google Gemini through the official ``google-genai`` SDK (extra ``apis``).

Spec: ``gemini:MODEL[@BASE_URL][?key_env=GEMINI_API_KEY&concurrency=N]``.
"""

from __future__ import annotations

from ..core.errors import ModelCallError, kind_for_status
from ..core.messages import Message, to_gemini
from ..core.roles import Capabilities, Generation, GenerationConfig, Usage
from ..core.secrets import redact, register_secret, secret_from_env
from ..core.spec import ModelSpec, SpecError

_FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter", "PROHIBITED_CONTENT": "content_filter",
           "BLOCKLIST": "content_filter", "RECITATION": "content_filter"}


class GeminiChat:
    def __init__(self, spec: ModelSpec) -> None:
        from google import genai

        key = (spec.secret("api_key") or secret_from_env(spec.get_str("key_env", "GEMINI_API_KEY"))
               or secret_from_env("GOOGLE_API_KEY"))
        if not key:
            raise SpecError("the Gemini API needs a key: set GEMINI_API_KEY (or ?key_env=NAME)")
        register_secret(key)
        http_options = None
        if spec.base_url:  # a proxy or a local test server speaking the Gemini API
            from google.genai import types

            # URL userinfo becomes a Basic Authorization header (Gemini authenticates with x-goog-api-key)
            headers = spec.request_auth().get("default_headers")
            http_options = types.HttpOptions(base_url=spec.base_url, headers=headers)
        self.client = genai.Client(api_key=key, http_options=http_options)
        self.model_id = spec.canonical()
        self.model = spec.name
        self.concurrency_key = "gemini"
        self.timeout = spec.get_float("timeout", 600.0)  # the scheduler's total deadline per call
        self.max_concurrency = spec.get_int("concurrency", 0) or None
        self.capabilities = Capabilities(multi_image=True, seeded=True)

    async def generate(self, messages: list[Message], config: GenerationConfig) -> Generation:
        from google.genai import errors, types

        system, contents = to_gemini(messages)
        cfg = types.GenerateContentConfig(temperature=config.temperature, max_output_tokens=config.max_tokens,
                                          top_p=config.top_p, seed=config.seed, stop_sequences=config.stop,
                                          system_instruction=system)
        try:
            resp = await self.client.aio.models.generate_content(model=self.model, contents=contents, config=cfg)
        except errors.APIError as exc:
            raise ModelCallError(kind_for_status(int(exc.code or 500)), redact(str(exc)), status=exc.code) from exc
        candidates = getattr(resp, "candidates", None) or []
        if not candidates:
            feedback = getattr(resp, "prompt_feedback", None)
            if feedback is not None:
                return Generation(text="", finish_reason="content_filter", refusal=str(feedback))
            raise ModelCallError("malformed", "response has no candidates")
        cand = candidates[0]
        reason = getattr(cand.finish_reason, "name", str(cand.finish_reason or ""))
        meta = getattr(resp, "usage_metadata", None)
        usage = Usage.reported(getattr(meta, "prompt_token_count", None),
                               getattr(meta, "candidates_token_count", 0) or 0)
        return Generation(text=resp.text or "", finish_reason=_FINISH.get(reason, "unknown"), usage=usage)


def make(spec: ModelSpec, role: str) -> GeminiChat:
    return GeminiChat(spec)
