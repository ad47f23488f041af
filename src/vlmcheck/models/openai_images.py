"""``openai-image:MODEL[@BASE_URL][?size=1024x1024&quality=standard]``: OpenAI-compatible image generation
(DALL-E 3, gpt-image) through the neutral JSON client (``models/http.py``).  Parameters as the chat adapter's
(``openai_compat.py``): ``key_env``, ``timeout``, ``concurrency``; and ``size``, ``quality``, ``b64`` (0: ask for a
URL).
"""

from __future__ import annotations

import base64
from typing import Any

from PIL import Image

from ..core.errors import ModelCallError
from ..core.images import load_image
from ..core.roles import Capabilities
from ..core.spec import ModelSpec, SpecError
from .http import KeyedChat
from .openai_compat import OpenAIChat, preflight


class OpenAIImages(KeyedChat):
    """``ImageGenerator`` role over ``/images/generations`` (DALL-E 3, gpt-image)."""

    dialect, provider, key_envs, local_key = OpenAIChat.dialect, "OpenAI", OpenAIChat.key_envs, OpenAIChat.local_key

    def __init__(self, spec: ModelSpec) -> None:
        if len(spec.endpoints) > 1:
            raise SpecError(f"{spec.canonical()}: several endpoints are supported for chat models; give an image "
                            "model one base URL")
        super().__init__(spec)
        # an answer carries the image in base64: a large one (an HD PNG) passes the chat replies' 8-MB cap
        self.http = self.client(max_bytes=64_000_000)
        self.size = spec.get_str("size", "1024x1024")
        self.quality = spec.get_str("quality", "standard")
        self.capabilities = Capabilities(multi_image=False, seeded=False)

    async def preflight(self) -> None:
        await preflight(self.http, self.spec)

    async def generate_image(self, prompt: str, seed: int | None = None) -> Image.Image:
        body: dict[str, Any] = {"model": self.model, "prompt": prompt, "n": 1, "size": self.size}
        if self.quality:
            body["quality"] = self.quality
        if self.spec.get_bool("b64", True) and not self.model.startswith("gpt-image"):
            body["response_format"] = "b64_json"
        data = (await self.http.post_json("/images/generations", body)).get("data")
        item = data[0] if isinstance(data, list) and data else None
        if not isinstance(item, dict):
            raise ModelCallError("malformed", "image response has no data")
        if item.get("b64_json"):
            try:
                return load_image(base64.b64decode(item["b64_json"]))
            except Exception as exc:  # noqa: BLE001
                raise ModelCallError("malformed", f"image payload is not a decodable image: {exc}") from exc
        if isinstance(item.get("url"), str):
            return await _download(item["url"])
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
    return load_image(r.content)
