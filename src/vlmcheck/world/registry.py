"""The ``ref:`` provider: one table from model name to (roles, factory)."""

from __future__ import annotations

from ..core.spec import ModelSpec, SpecError
from . import describer, negator, paraphraser, ref_models, renderer, rewriter

REFERENCE_MODELS = {
    "pixels": (("encoder",), ref_models.make_pixels, "pixel-statistics encoder (fast, for tests)"),
    "effnet": (("encoder",), ref_models.make_effnet, "EfficientNet-Lite0 ImageNet features, 1280-d"),
    "photo": (("vlm",), ref_models.make_photo, "photo describer: EfficientNet-Lite0 labels + colours"),
    "describer": (("vlm",), describer.make_describer,
                  "world-scene VLM from pixels (shapes, colours, grid, OCR); error knobs "
                  "omit/hallucinate/confuse/misplace/misread/yes_bias/level"),
    "renderer": (("generator",), renderer.make_renderer, "text-to-image for world scenes (parses English)"),
    "negator": (("text",), negator.make_negator, "rule-based yes/no question negation (VHExpansion rules)"),
    "rewriter": (("text",), rewriter.make_rewriter,
                 "rule-based sentence rewriting for ChEF's passive/active/casual/formal/back-translation"),
    "paraphraser": (("text",), paraphraser.make_paraphraser,
                    "rule-based question rephrasing for VHExpansion fine-tuning data (k versions)"),
}


def make(spec: ModelSpec, role: str):
    entry = REFERENCE_MODELS.get(spec.name)
    if entry is None:
        raise SpecError(f"unknown reference model 'ref:{spec.name}'; known: "
                        + ", ".join(f"ref:{n}" for n in REFERENCE_MODELS))
    roles, factory, _ = entry
    if role not in roles:
        raise SpecError(f"ref:{spec.name} serves the {'/'.join(roles)} role, not {role!r}")
    return factory(spec, role)
