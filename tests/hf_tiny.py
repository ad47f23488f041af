"""Tiny randomly initialised Hugging Face models, built from configs and saved
to a folder so that vlmcheck loads them with ``from_pretrained`` - the same path
a real checkpoint takes.  No download."""

from __future__ import annotations

from pathlib import Path

WORDS = ("describe this image look say yes no a the red green blue cat dog answer is it there in of and "
         "what color option A B C D user assistant : . ,").split()
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}:"
    "{% for item in message['content'] %}{% if item['type'] == 'image' %} <image>{% else %} {{ item['text'] }}"
    "{% endif %}{% endfor %} </s> {% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
)


def tiny_tokenizer(specials: tuple[str, ...] = ("<image>",), extra: dict[str, str] | None = None,
                   words: tuple[str, ...] = ()):
    """A word-level tokenizer over WORDS (and ``words``); ``specials`` are added as special tokens after
    <pad> <unk> <s> </s>, ``extra`` names them for the processor (``image_token`` ...)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(["<pad>", "<unk>", "<s>", "</s>", *specials] + sorted(set(WORDS) | set(words)))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    out = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                  pad_token="<pad>", extra_special_tokens=extra or {"image_token": "<image>"})
    out.add_special_tokens({"additional_special_tokens": list(specials)})
    return out


def build_tiny_llava(folder: Path, words: tuple[str, ...] = (), *, image_size: int = 32, patch_size: int = 8,
                     vision: dict | None = None, text: dict | None = None) -> Path:
    """A LLaVA of random weights (CLIP tower, Llama text model, the word-level tokenizer), saved to ``folder``.
    The defaults are the tests' tiny model; the benches pass larger ``vision``/``text`` config fields."""
    import torch
    from transformers import (CLIPImageProcessorPil, CLIPVisionConfig, LlamaConfig, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor)

    torch.manual_seed(0)
    tokenizer = tiny_tokenizer(words=words)
    image_token = tokenizer.convert_tokens_to_ids("<image>")
    vision = CLIPVisionConfig(**{"hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 2,
                                 "num_attention_heads": 2, "projection_dim": 32, **(vision or {})},
                              image_size=image_size, patch_size=patch_size)
    text = LlamaConfig(**{"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                          "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 256,
                          **(text or {})},
                       vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                       bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=image_token,
                         vision_feature_layer=-1, vision_feature_select_strategy="default",
                         projector_hidden_act="gelu")
    model = LlavaForConditionalGeneration(config).eval()
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessorPil(size={"shortest_edge": image_size},
                                              crop_size={"height": image_size, "width": image_size}),
        tokenizer=tokenizer, patch_size=patch_size, vision_feature_select_strategy="default",
        chat_template=CHAT_TEMPLATE, num_additional_image_tokens=1)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def build_tiny_vit(folder: Path) -> Path:
    import torch
    from transformers import ViTConfig, ViTImageProcessorPil, ViTModel

    torch.manual_seed(0)
    ViTModel(ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
                       image_size=32, patch_size=8), add_pooling_layer=False).save_pretrained(folder)
    ViTImageProcessorPil(size={"height": 32, "width": 32}, image_mean=[0.5] * 3, image_std=[0.5] * 3
                         ).save_pretrained(folder)
    return folder


# Tiny text and vision towers shared by the CLIP and SigLIP builders.
TINY_TEXT = {"hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 2, "num_attention_heads": 2,
             "vocab_size": 99}
TINY_VISION = {"hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 2, "num_attention_heads": 2,
               "image_size": 32, "patch_size": 8}


def build_tiny_clip(folder: Path) -> Path:
    import torch
    from transformers import CLIPConfig, CLIPImageProcessorPil, CLIPModel

    torch.manual_seed(0)
    config = CLIPConfig(text_config=dict(TINY_TEXT), vision_config=dict(TINY_VISION), projection_dim=16)
    CLIPModel(config).save_pretrained(folder)
    CLIPImageProcessorPil(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    return folder


def build_tiny_siglip(folder: Path) -> Path:
    import torch
    from transformers import SiglipConfig, SiglipImageProcessorPil, SiglipModel

    torch.manual_seed(0)
    config = SiglipConfig(text_config=dict(TINY_TEXT), vision_config=dict(TINY_VISION))
    SiglipModel(config).save_pretrained(folder)
    SiglipImageProcessorPil(size={"height": 32, "width": 32}).save_pretrained(folder)
    return folder


def build_tiny_sd(folder: Path) -> Path:
    """A tiny Stable Diffusion pipeline (random weights) with a character-level CLIP tokenizer."""
    import json
    import string

    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    torch.manual_seed(0)
    unet = UNet2DConditionModel(block_out_channels=(8, 16), layers_per_block=1, sample_size=16, in_channels=4,
                                out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=16,
                                norm_num_groups=4, attention_head_dim=4)
    vae = AutoencoderKL(block_out_channels=(8, 16), in_channels=3, out_channels=3,
                        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                        latent_channels=4, norm_num_groups=4, sample_size=32)
    chars = list(string.ascii_lowercase + string.digits + ".,:;!?'-")
    tokens = ["<|startoftext|>", "<|endoftext|>"] + chars + [c + "</w>" for c in chars]
    tok_dir = folder / "tok-src"
    tok_dir.mkdir(parents=True)
    (tok_dir / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}))
    (tok_dir / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(str(tok_dir / "vocab.json"), str(tok_dir / "merges.txt"), model_max_length=32)
    text = CLIPTextModel(CLIPTextConfig(hidden_size=16, intermediate_size=32, num_attention_heads=2,
                                        num_hidden_layers=2, vocab_size=len(tokens), max_position_embeddings=32,
                                        bos_token_id=0, eos_token_id=1, pad_token_id=1))
    pipe = StableDiffusionPipeline(vae=vae, text_encoder=text, tokenizer=tokenizer, unet=unet,
                                   scheduler=DDIMScheduler(clip_sample=False), safety_checker=None, feature_extractor=None,
                                   requires_safety_checker=False)
    pipe.save_pretrained(folder / "sd")
    return folder / "sd"


def build_tiny_qwen2_vl(folder: Path) -> Path:
    """Model, image processor and tokenizer of a tiny Qwen2-VL.  No processor: transformers'
    Qwen2VLProcessor needs a video processor, and video processors need torchvision, which
    has no CPU build here.  Tests load the model and the image processor separately."""
    import torch
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLImageProcessorPil

    torch.manual_seed(0)
    specials = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
    tokenizer = tiny_tokenizer(tuple(specials), {"image_token": "<|image_pad|>"})
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in specials}
    config = Qwen2VLConfig(
        text_config=dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id),
        vision_config=dict(depth=2, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
    Qwen2VLForConditionalGeneration(config).eval().save_pretrained(folder)
    Qwen2VLImageProcessorPil(size={"shortest_edge": 28 * 28 * 4, "longest_edge": 28 * 28 * 16}).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}{% else %}{% for item in message['content'] %}{% if item['type'] == 'image' %}"
    "<|vision_start|><|image_pad|><|vision_end|>{% else %}{{ item['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Qwen2.5-VL's processor loads a video processor whatever the checkpoint holds, and every video processor
# needs torchvision, which has no CPU build here.  transformers 5.24: ``transformers serve`` ->
# AutoProcessor.from_pretrained (models/auto/processing_auto.py:356) -> ProcessorMixin._get_arguments_from_pretrained
# (processing_utils.py:1996) -> AutoVideoProcessor (video_processing_auto.py:435) -> ImportError
# "Qwen2VLVideoProcessor requires the Torchvision library", and the server exits; building
# Qwen2_5_VLProcessor(video_processor=None) fails too (processing_utils.py:2042, the video mapping is a dummy).
# This subclass is the same processor without the video slot, shipped with the checkpoint as remote code
# (auto_map), so that ``transformers serve --trust-remote-code`` loads it; images go through Qwen2.5-VL's own code.
QWEN_IMAGE_ONLY_PROCESSOR = '''from transformers import Qwen2_5_VLProcessor


class Qwen2_5_VLImageOnlyProcessor(Qwen2_5_VLProcessor):
    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)
'''


def build_tiny_qwen2_5_vl(folder: Path) -> Path:
    """A tiny Qwen2.5-VL (windowed vision tower, M-RoPE text model) with Qwen2-VL's PIL image processor and
    the image-only processor above: load it with ``trust_remote_code=True``."""
    import json

    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration, Qwen2VLImageProcessorPil

    torch.manual_seed(0)
    specials = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
    tokenizer = tiny_tokenizer(tuple(specials), {"image_token": "<|image_pad|>"})
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in specials}
    config = Qwen2_5_VLConfig(
        text_config=dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=32,
                           patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=56,
                           fullatt_block_indexes=[1]),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
    Qwen2_5_VLForConditionalGeneration(config).eval().save_pretrained(folder)
    Qwen2VLImageProcessorPil(size={"shortest_edge": 28 * 28 * 4, "longest_edge": 28 * 28 * 16}).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "chat_template.jinja").write_text(QWEN_CHAT_TEMPLATE)
    (folder / "processing_image_only.py").write_text(QWEN_IMAGE_ONLY_PROCESSOR)
    (folder / "processor_config.json").write_text(json.dumps({
        "processor_class": "Qwen2_5_VLImageOnlyProcessor",
        "auto_map": {"AutoProcessor": "processing_image_only.Qwen2_5_VLImageOnlyProcessor"}}))
    return folder


def build_tiny_idefics3(folder: Path, words: tuple[str, ...] = ()) -> Path:
    """A tiny Idefics3 (the SmolVLM architecture) with its full processor."""
    import torch
    from transformers import (Idefics3Config, Idefics3ForConditionalGeneration, Idefics3ImageProcessorPil,
                              Idefics3Processor)

    torch.manual_seed(0)
    grid = [f"<row_{i}_col_{j}>" for i in range(1, 5) for j in range(1, 5)]
    specials = ["<fake_token_around_image>", "<image>", "<global-img>", "<end_of_utterance>"] + grid
    tokenizer = tiny_tokenizer(tuple(specials), {"image_token": "<image>"}, words=words)
    config = Idefics3Config(
        vision_config=dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8),
        text_config=dict(model_type="llama", vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=1024, pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id),
        scale_factor=2, image_token_id=tokenizer.convert_tokens_to_ids("<image>"))
    Idefics3ForConditionalGeneration(config).eval().save_pretrained(folder)
    image_processor = Idefics3ImageProcessorPil(size={"longest_edge": 64}, max_image_size={"longest_edge": 32})
    Idefics3Processor(image_processor=image_processor, tokenizer=tokenizer, image_seq_len=4,
                      chat_template=CHAT_TEMPLATE).save_pretrained(folder)
    return folder
