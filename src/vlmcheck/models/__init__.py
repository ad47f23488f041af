"""Built-in adapters, registered by import path so heavy dependencies load lazily."""

from ..core.spec import register

#: the ?parameters each adapter reads (a misspelt one is an error: core/spec.py check_params)
OPENAI = ("batch", "batch_poll", "batch_window", "clients", "concurrency", "cooldown", "enable_thinking", "extra_body",
          "http", "key_env", "logprobs", "max_tokens_param", "multi_image", "prefill", "prompt_logprobs",
          "reasoning_effort", "timeout", "max_response_mb", "max_answer_chars")
ANTHROPIC = ("batch", "batch_poll", "batch_window", "concurrency", "key_env", "send_temperature", "timeout")
GEMINI = ("concurrency", "key_env", "timeout")
HF = ("adapter", "batch_size", "device", "dtype", "merge", "vision_size")

register("openai", "vlmcheck.models.openai_compat:make_chat", ("vlm", "text"),
         "OpenAI API and OpenAI-compatible servers (vLLM, SGLang, Ollama, LM Studio, llama.cpp)", params=OPENAI)
register("openai-image", "vlmcheck.models.openai_images:make_images", ("generator",),
         "OpenAI-compatible image generation (DALL-E 3, gpt-image)",
         params=("b64", "concurrency", "key_env", "quality", "size", "timeout"))
register("anthropic", "vlmcheck.models.anthropic_api:make", ("vlm", "text"), "Anthropic Messages API", params=ANTHROPIC)
register("gemini", "vlmcheck.models.gemini_api:make", ("vlm", "text"), "Google Gemini API", params=GEMINI)
register("hf", "vlmcheck.models.hf:make", ("vlm", "text"), "local transformers image-text-to-text model", params=HF)
register("diffusers", "vlmcheck.models.diffusers_gen:make", ("generator",), "local diffusers text-to-image pipeline",
         params=("device", "dtype", "guidance", "height", "steps", "width"))
register("hf-encoder", "vlmcheck.models.encoders:make_hf", ("encoder",), "transformers vision encoder (ViT, CLIP, SigLIP)")
register("timm", "vlmcheck.models.encoders:make_timm", ("encoder",), "timm image model, pooled features")
register("ref", "vlmcheck.world.registry:make", ("vlm", "text", "generator", "encoder"),
         "offline reference models (ref:photo, ref:effnet, ref:pixels, ...)")
register("human", "vlmcheck.models.human:make_human", ("vlm",),
         "human-written descriptions from a CSV/JSONL file (GenCeption human baseline)")
