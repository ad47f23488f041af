"""``openai-image:MODEL[@BASE_URL][?size=1024x1024&quality=standard]``: OpenAI-compatible image generation
(DALL-E 3, gpt-image) through the official SDK.  Parameters as the chat adapter's (``openai_compat.py``): ``key_env``,
``timeout``, ``concurrency``; and ``size``, ``quality``, ``b64`` (0: ask for a URL).
"""

from __future__ import annotations

import base64
import io
from typing import Any

from PIL import Image

from ..core.errors import ModelCallError
from ..core.images import load_image
from ..core.roles import Capabilities
from ..core.spec import ModelSpec, SpecError
from ._http_errors import translate
from .openai_compat import OpenAIHTTP, _api_key, _clients, preflight


class OpenAIImages:
    """``ImageGenerator`` role over ``/images/generations`` (DALL-E 3, gpt-image)."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.model_id = spec.canonical()
        self.model = spec.name
        if len(spec.endpoints) > 1:
            raise SpecError(f"{spec.canonical()}: several endpoints are supported for chat models; give an image "
                            "model one base URL")
        self._clients = _clients(spec)
        self.timeout = spec.get_float("timeout", 600.0)
        self.concurrency_key = f"openai-image@{spec.base_url or 'api.openai.com'}"
        self.max_concurrency = spec.get_int("concurrency", 0) or None
        self.size = spec.get_str("size", "1024x1024")
        self.quality = spec.get_str("quality", "standard")
        self.capabilities = Capabilities(multi_image=False, seeded=False)

    async def preflight(self) -> None:
        await preflight(OpenAIHTTP(self.spec, _api_key(self.spec), timeout=self.timeout), self.spec)

    async def generate_image(self, prompt: str, seed: int | None = None) -> Image.Image:
        import openai

        kwargs: dict[str, Any] = {"model": self.model, "prompt": prompt, "n": 1, "size": self.size}
        if self.quality:
            kwargs["quality"] = self.quality
        if self.spec.get_bool("b64", True) and not self.model.startswith("gpt-image"):
            kwargs["response_format"] = "b64_json"
        try:
            resp = await self._clients.get().images.generate(**kwargs)
        except Exception as exc:  # noqa: BLE001
            raise translate(exc, openai) from exc
        data = getattr(resp, "data", None)
        if not data:
            raise ModelCallError("malformed", "image response has no data")
        item = data[0]
        if getattr(item, "b64_json", None):
            try:
                return load_image(base64.b64decode(item.b64_json))
            except Exception as exc:  # noqa: BLE001
                raise ModelCallError("malformed", f"image payload is not a decodable image: {exc}") from exc
        if getattr(item, "url", None):
            return await _download(item.url)
        raise ModelCallError("malformed", "image response has neither b64_json nor url")


async def _download(url: str) -> Image.Image:
    import httpx

    async with httpx.AsyncClient(timeout=120) as client:
        try:
            r = await client.get(url)
        except httpx.HTTPError as exc:
            raise ModelCallError("connection", f"downloading the generated image failed: {exc}") from exc
    if r.status_code != 200:
        raise ModelCallError("server" if r.status_code >= 500 else "bad_request",
                             f"downloading the generated image gave HTTP {r.status_code}", status=r.status_code)
    return load_image(io.BytesIO(r.content).getvalue())



def make_images(spec: ModelSpec, role: str) -> OpenAIImages:
    return OpenAIImages(spec)
