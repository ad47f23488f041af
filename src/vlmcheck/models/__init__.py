"""Built-in adapters, registered by import path so heavy dependencies load lazily."""

from ..core.spec import register

register("openai", "vlmcheck.models.openai_compat:make_chat", ("vlm", "text"),
         "OpenAI API and OpenAI-compatible servers (vLLM, SGLang, Ollama, LM Studio, llama.cpp)")
register("openai-image", "vlmcheck.models.openai_images:make_images", ("generator",),
         "OpenAI-compatible image generation (DALL-E 3, gpt-image)")
register("anthropic", "vlmcheck.models.anthropic_api:make", ("vlm", "text"), "Anthropic Messages API")
register("gemini", "vlmcheck.models.gemini_api:make", ("vlm", "text"), "Google Gemini API")
register("hf", "vlmcheck.models.hf:make", ("vlm", "text"), "local transformers image-text-to-text model")
register("diffusers", "vlmcheck.models.diffusers_gen:make", ("generator",), "local diffusers text-to-image pipeline")
register("hf-encoder", "vlmcheck.models.encoders:make_hf", ("encoder",), "transformers vision encoder (ViT, CLIP, SigLIP)")
register("timm", "vlmcheck.models.encoders:make_timm", ("encoder",), "timm image model, pooled features")
register("ref", "vlmcheck.world.registry:make", ("vlm", "text", "generator", "encoder"),
         "offline reference models (ref:photo, ref:effnet, ref:pixels, ...)")
register("human", "vlmcheck.models.human:make_human", ("vlm",),
         "human-written descriptions from a CSV/JSONL file (GenCeption human baseline)")
