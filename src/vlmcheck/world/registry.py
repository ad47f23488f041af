"""The ``ref:`` provider: one table from model name to (roles, class, what it is)."""

from __future__ import annotations

from ..core.spec import ModelSpec, SpecError
from .describer import RefDescriber
from .negator import RefNegator
from .paraphraser import RefParaphraser
from .ref_models import EffNetEncoder, PhotoDescriber, PixelEncoder, RefRenderer
from .rewriter import RefRewriter

REFERENCE_MODELS = {
    "pixels": (("encoder",), PixelEncoder, "pixel-statistics encoder (fast, for tests)"),
    "effnet": (("encoder",), EffNetEncoder, "EfficientNet-Lite0 ImageNet features, 1280-d"),
    "photo": (("vlm",), PhotoDescriber, "photo describer: EfficientNet-Lite0 labels + colours"),
    "describer": (("vlm",), RefDescriber,
                  "world-scene VLM from pixels (shapes, colours, grid, OCR); error knobs "
                  "omit/hallucinate/confuse/misplace/misread/yes_bias/level"),
    "renderer": (("generator",), RefRenderer, "text-to-image for world scenes (parses English)"),
    "negator": (("text",), RefNegator, "rule-based yes/no question negation (VHExpansion rules)"),
    "rewriter": (("text",), RefRewriter,
                 "rule-based sentence rewriting for ChEF's passive/active/casual/formal/back-translation"),
    "paraphraser": (("text",), RefParaphraser,
                    "rule-based question rephrasing for VHExpansion fine-tuning data (k versions)"),
}


def make(spec: ModelSpec, role: str):
    entry = REFERENCE_MODELS.get(spec.name)
    if entry is None:
        raise SpecError(f"unknown reference model 'ref:{spec.name}'; known: "
                        + ", ".join(f"ref:{n}" for n in REFERENCE_MODELS))
    roles, model, _ = entry
    if role not in roles:
        raise SpecError(f"ref:{spec.name} serves the {'/'.join(roles)} role, not {role!r}")
    return model(spec)
