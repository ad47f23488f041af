"""Model roles as typed Protocols, and the value types that cross them.  A *role* is what a method needs from a
model, not what the model is: :class:`VLM`, :class:`TextModel`, :class:`ImageGenerator`, :class:`ImageEncoder`,
with optional capabilities (:class:`SupportsLoglikelihood`, :class:`SupportsVisionEmbedding`,
:class:`SupportsPreflight`).  Adapters declare what they can do in :class:`Capabilities`; methods check the
declaration (:func:`require`) instead of probing with try/except.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from .._lazy import lazy_module

np = lazy_module("numpy")  # loaded on first use (vlmcheck/_lazy.py)
Image = lazy_module("PIL.Image")  # Pillow on first use (vlmcheck/_lazy.py)
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from .messages import Message

if TYPE_CHECKING:  # torch is an optional dependency
    import torch


class GenerationConfig(BaseModel):
    """Decoding parameters.  Defaults are greedy, as the papers use."""

    max_tokens: int = 512
    temperature: float = 0.0
    top_p: float | None = None
    seed: int | None = None
    stop: list[str] | None = None
    logprobs: bool = False
    top_logprobs: int | None = None


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    # why the provider's usage could not be used, or None: never stored; the call is priced at its estimate
    _invalid: str | None = PrivateAttr(default=None)

    @property
    def invalid(self) -> str | None:  # the private dict, read directly: not pydantic's slower __getattr__
        private = self.__pydantic_private__
        return private.get("_invalid") if private else None

    @classmethod
    def reported(cls, input_tokens: Any, output_tokens: Any) -> "Usage":
        """The usage a provider reported, checked: each count a whole number >= 0 (or a float or numeric string
        holding one); anything else gives zero counts marked :attr:`invalid`, never a negative or silent zero."""
        (n_in, why_in), (n_out, why_out) = _token_count(input_tokens), _token_count(output_tokens)
        usage = cls(input_tokens=n_in, output_tokens=n_out)
        problems = [f"{name} tokens {why}" for name, why in (("input", why_in), ("output", why_out)) if why]
        if problems:  # else None already: pydantic's setattr skipped on every valid answer
            usage._invalid = "; ".join(problems)
        return usage


def _token_count(value: Any) -> tuple[int, str | None]:
    if value is None:
        return 0, "missing"
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return 0, f"not a number ({value[:20]!r})"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0, f"not a number ({type(value).__name__})"
    if isinstance(value, float) and not math.isfinite(value):
        return 0, f"not a number ({value})"
    if value < 0:
        return 0, f"negative ({value:g})"
    if value != int(value):
        return 0, f"not a whole number ({value:g})"
    return int(value), None


class TokenLogprob(BaseModel):
    token: str
    logprob: float
    top: list[tuple[str, float]] | None = None


FinishReason = Literal["stop", "length", "content_filter", "refusal", "error", "unknown"]


class Generation(BaseModel):
    text: str
    finish_reason: FinishReason = "unknown"
    usage: Usage = Field(default_factory=Usage)
    logprobs: list[TokenLogprob] | None = None
    refusal: str | None = None  # provider-reported refusal text, if any
    reasoning: str | None = None  # a reasoning model's thinking, kept apart from the answer in ``text``
    endpoint: str | None = None  # the server that answered, for a model served by several (never in a cache key)


class Loglikelihood(BaseModel):
    """Log-probability of a continuation given a prompt."""

    model_config = ConfigDict(defer_build=True)  # built on first use, not at every command's start-up

    sum: float
    n_tokens: int

    @property
    def mean(self) -> float:
        return self.sum / max(self.n_tokens, 1)


class Capabilities(BaseModel):
    """What an adapter declares it can do.  Methods rely on this, not on probing."""

    multi_image: bool = True
    loglikelihood: bool = False
    vision_embedding: bool = False
    logprobs: bool = False
    seeded: bool = False  # outputs reproducible for a given seed
    # continues a trailing assistant message (a pre-filled answer start) instead of starting a new turn
    prefill: bool = False
    # answers a request that carries no image; False: the blind control sends it a uniform grey image
    # of the same size instead, and records that it did
    text_only: bool = True


class CapabilityError(RuntimeError):
    """A method needs a capability that the model does not declare."""


def require(model: Any, capability: str, purpose: str) -> None:
    caps: Capabilities | None = getattr(model, "capabilities", None)
    if caps is None or not getattr(caps, capability, False):
        name = getattr(model, "model_id", type(model).__name__)
        raise CapabilityError(f"{purpose} needs the '{capability}' capability, which model {name!r} does not "
                              "declare. Use a model whose adapter provides it (for example a local 'hf:' model).")


@runtime_checkable
class VLM(Protocol):
    model_id: str
    capabilities: Capabilities

    async def generate(self, messages: list[Message], config: GenerationConfig) -> Generation: ...


@runtime_checkable
class SupportsLoglikelihood(Protocol):
    async def loglikelihood(self, messages: list[Message], continuations: list[str]) -> list[Loglikelihood]: ...


@runtime_checkable
class SupportsVisionEmbedding(Protocol):
    def vision_embedding(self, pixels: "torch.Tensor") -> "torch.Tensor":
        """Connector output for ``pixels`` in [0, 1] (B, 3, H, W), differentiable."""
        ...

    def vision_input_size(self) -> tuple[int, int]:
        """(height, width) the vision tower expects."""
        ...


@runtime_checkable
class SupportsPreflight(Protocol):
    """Optional for every role: a model that can check, before the first sample, that it can serve the run."""

    async def preflight(self) -> None:
        """One cheap check (an API adapter's ``GET /models``), called once per model before a new run's first
        sample (``--no-preflight`` skips it); raises :class:`vlmcheck.core.errors.PreflightError` if not."""
        ...


@runtime_checkable
class TextModel(VLM, Protocol):
    """Text-only chat -> text: a VLM's interface, sent no image."""


@runtime_checkable
class ImageGenerator(Protocol):
    model_id: str
    capabilities: Capabilities

    async def generate_image(self, prompt: str, seed: int | None = None) -> Image.Image: ...


@runtime_checkable
class ImageEncoder(Protocol):
    model_id: str
    capabilities: Capabilities

    async def encode(self, images: list[Image.Image]) -> np.ndarray:
        """Return an (n, d) float32 matrix, one row per image."""
        ...
