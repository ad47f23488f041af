"""Built-in adapters, registered by import path so heavy dependencies load lazily.

Each ``register`` call is everything vlmcheck knows about a provider: its roles, the ``?parameters`` its adapter
reads, each IDENTITY or PLACEMENT (docs/usage.md, "Identity and placement"), how it is billed and how its images
count in tokens (core/spec.py ``_Entry``).  tests/test_identity.py checks every parameter an adapter reads is here.
"""

from ..core.spec import IDENTITY as I
from ..core.spec import PLACEMENT as P
from ..core.spec import register

_TRANSPORT = {"concurrency": P, "key_env": P, "timeout": P}  # every API adapter
_BATCH_API = {"batch": P, "batch_poll": P, "batch_window": P}  # the same answers, later and cheaper

OPENAI = {**_TRANSPORT, **_BATCH_API, "clients": P, "cooldown": P, "http": P, "max_tokens_param": P,
          "max_response_mb": P, "max_answer_chars": P,
          "enable_thinking": I, "extra_body": I, "logprobs": I, "multi_image": I, "prefill": I, "prompt_logprobs": I,
          "reasoning_effort": I}
ANTHROPIC = {**_TRANSPORT, **_BATCH_API, "send_temperature": I}
#: the encoders of models/encoders.py (hf-encoder reads dtype and pool, timm pretrained and checkpoint)
ENCODER = {"batch_size": P, "device": P, "checkpoint": I, "dtype": I, "pool": I, "pretrained": I}
HF = {"batch_size": P, "device": P, "adapter": I, "dtype": I, "merge": I, "vision_size": I}

register("openai", "vlmcheck.models.openai_compat:OpenAIChat", ("vlm", "text"),
         "OpenAI API and OpenAI-compatible servers (vLLM, SGLang, Ollama, LM Studio, llama.cpp)", params=OPENAI,
         billing="tokens")
register("openai-image", "vlmcheck.models.openai_images:OpenAIImages", ("generator",),
         "OpenAI-compatible image generation (DALL-E 3, gpt-image)",
         params={**_TRANSPORT, "b64": I, "quality": I, "size": I}, billing="images")
register("anthropic", "vlmcheck.models.anthropic_api:AnthropicChat", ("vlm", "text"), "Anthropic Messages API",
         params=ANTHROPIC, billing="tokens", image_tokens="anthropic")
register("gemini", "vlmcheck.models.gemini_api:GeminiChat", ("vlm", "text"), "Google Gemini API", params=_TRANSPORT,
         billing="tokens", image_tokens="gemini")
register("hf", "vlmcheck.models.hf:HFVLM", ("vlm", "text"), "local transformers image-text-to-text model", params=HF,
         billing="local")
register("diffusers", "vlmcheck.models.diffusers_gen:DiffusersGenerator", ("generator",),
         "local diffusers text-to-image pipeline",
         params={"device": P, "dtype": I, "guidance": I, "height": I, "steps": I, "width": I}, billing="local")
register("hf-encoder", "vlmcheck.models.encoders:HFEncoder", ("encoder",),
         "transformers vision encoder (ViT, CLIP, SigLIP)", params=ENCODER, billing="local")
register("timm", "vlmcheck.models.encoders:TimmEncoder", ("encoder",), "timm image model, pooled features",
         params=ENCODER, billing="local")
# ref: and human: models take their own parameters (ref:describer?omit=0.2 ...): unchecked, all identity
register("ref", "vlmcheck.world.registry:make", ("vlm", "text", "generator", "encoder"),
         "offline reference models (ref:photo, ref:effnet, ref:pixels, ...)", billing="local")
register("human", "vlmcheck.models.human:HumanDescriptions", ("vlm",),
         "human-written descriptions from a CSV/JSONL file (GenCeption human baseline)", billing="local")
