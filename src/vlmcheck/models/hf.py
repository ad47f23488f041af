"""Local Hugging Face VLMs: ``AutoProcessor`` + ``AutoModelForImageTextToText``; ``hf:REPO_OR_PATH[?params]``
(``device``, ``dtype``, ``batch_size``, ``vision_size``, ``adapter``, ``merge``: docs/usage.md).

``generate`` runs the processor's chat template and batched generation (concurrent calls gathered by a
micro-batcher); ``loglikelihood`` scores continuations after the templated prompt; ``vision_embedding`` is the
connector output for pixels in [0, 1], differentiable (:mod:`vlmcheck.models._vision`).  Models run in a worker
thread so the event loop stays responsive.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import threading
import warnings
from pathlib import Path
from typing import Any

from ..core.messages import Message, to_hf
from ..core.roles import Capabilities, Generation, GenerationConfig, Loglikelihood, Usage
from ..core.spec import ModelSpec, SpecError
from ..run.batching import Batcher
from . import _vision


def resolve_device(name: str | None) -> str:
    import torch

    mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if name in (None, "", "auto"):
        return "cuda" if torch.cuda.is_available() else "mps" if mps else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        raise SpecError(f"device={name} but torch {torch.__version__} ({build}) sees no CUDA GPU here; use "
                        "device=cpu (or device=auto)")
    if name == "mps" and not mps:
        raise SpecError("device=mps but this machine has no Apple GPU; use device=cpu (or device=auto)")
    return name


def ensure_available(name: str, marker: str = "config.json") -> None:
    """Say at once when a checkpoint is neither a folder nor in the local Hugging Face cache and the Hub cannot
    be reached (offline mode or no network): ``from_pretrained`` would otherwise retry for minutes."""
    from huggingface_hub import constants, try_to_load_from_cache

    if Path(name).exists() or isinstance(try_to_load_from_cache(name, marker), str):
        return
    offline = bool(constants.HF_HUB_OFFLINE) or os.environ.get("TRANSFORMERS_OFFLINE", "") in ("1", "true", "TRUE")
    if not offline:
        host = constants.ENDPOINT.split("://", 1)[-1].split("/", 1)[0]
        try:
            socket.create_connection((host.split(":")[0], 443), timeout=3).close()
            return  # the Hub answers: from_pretrained downloads it
        except OSError:
            pass
    raise SpecError(f"{name!r} is not a local folder and not in the Hugging Face cache ({constants.HF_HUB_CACHE}), "
                    "and the Hub cannot be reached; download it first (huggingface-cli download "
                    f"{name}) or give the checkpoint's folder")


def adapter_digest(path: str) -> str:
    """The first 16 hex digits of a SHA-256 over an adapter folder's config and weight files."""
    folder = Path(path)
    if not (folder / "adapter_config.json").is_file():
        raise SpecError(f"adapter={path}: not a PEFT adapter folder (no adapter_config.json); give the folder "
                        "that `vlmcheck vhx finetune --out` wrote")
    h = hashlib.sha256()
    for f in sorted(folder.iterdir()):
        if f.is_file() and (f.name == "adapter_config.json" or f.name.startswith("adapter_model")):
            h.update(f.name.encode())
            with f.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()[:16]


def load_adapter(model, path: str, merge: bool):
    """Wrap ``model`` with the PEFT adapter in ``path`` (merged into the base weights when ``merge``)."""
    digest = adapter_digest(path)
    try:
        from peft import PeftModel
    except ImportError:
        raise SpecError("adapter= needs peft: pip install 'vlmcheck[finetune]'") from None
    with warnings.catch_warnings():  # peft asks transformers a deprecated question (is_gradient_checkpointing)
        warnings.simplefilter("ignore", FutureWarning)
        model = PeftModel.from_pretrained(model, path, is_trainable=False)
    return (model.merge_and_unload() if merge else model), digest


def resolve_dtype(name: str | None, device: str):
    import torch

    if name in (None, "", "auto"):
        return torch.float32 if device == "cpu" else torch.bfloat16
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise SpecError(f"unknown dtype {name!r}")
    return dtype


class HFVLM:
    def __init__(self, spec: ModelSpec) -> None:
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.spec = spec
        self.model_id = spec.canonical()
        self.device = resolve_device(spec.get_str("device"))
        self.dtype = resolve_dtype(spec.get_str("dtype"), self.device)
        ensure_available(spec.name)
        self.processor = AutoProcessor.from_pretrained(spec.name)
        self.model = AutoModelForImageTextToText.from_pretrained(spec.name, dtype=self.dtype).to(self.device)
        if spec.get_str("adapter"):
            self.model, digest = load_adapter(self.model, spec.get_str("adapter"), spec.get_bool("merge", False))
            self.model_id = spec.with_params(adapter_sha256=digest).canonical()
        self.model.eval()
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        self.tokenizer.padding_side = "left"  # batched generation appends to the right end
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self._lock = threading.Lock()  # one forward pass at a time on this model
        self._prep_lock = threading.Lock()  # one caller of the processor (its fast tokenizer) at a time
        self._torch = torch
        self._packing = _vision.packing_of(self.model)
        self._image_proc = getattr(self.processor, "image_processor", None)
        self.capabilities = Capabilities(multi_image=True, loglikelihood=True,
                                         vision_embedding=self._packing is not None, seeded=True, prefill=True)
        self.concurrency_key = f"hf:{spec.name}"
        self.max_concurrency = None
        # the next batch's inputs are made (processor, copy to the device) while the current batch generates
        self._batcher = Batcher(self._generate_prepared, spec.get_int("batch_size", 8), prepare=self._prepare_batch)

    def _inputs(self, conversations: list[list[Message]]):
        texts, images = [], []
        rendered: dict[str, str] = {}  # a batch's requests mostly share one prompt: the template once for each
        for messages in conversations:
            conv, imgs = to_hf(messages)
            # a trailing assistant turn is a pre-filled answer start: continue it rather than open a new turn
            prefilled = bool(messages) and messages[-1].role == "assistant"
            key = json.dumps([conv, prefilled])  # images are placeholders in `conv`: the text the template sees
            if key not in rendered:
                rendered[key] = self.processor.apply_chat_template(
                    conv, add_generation_prompt=not prefilled, continue_final_message=prefilled, tokenize=False)
            texts.append(rendered[key])
            images.extend(imgs)
        with self._prep_lock:
            return self.processor(text=texts, images=images or None, return_tensors="pt", padding=True).to(self.device)

    async def generate(self, messages: list[Message], config: GenerationConfig) -> Generation:
        return await self._batcher.submit(config.model_dump_json(), messages)

    def _prepare_batch(self, config_json: str, conversations: list[list[Message]]):
        """The batch's model inputs; the batcher runs this for the next batch while the current one generates."""
        with self._torch.inference_mode():
            return self._inputs(conversations)

    def _generate_prepared(self, config_json: str, inputs) -> list[Generation]:
        torch = self._torch
        config = GenerationConfig.model_validate_json(config_json)
        with self._lock, torch.inference_mode():
            gen_kwargs: dict[str, Any] = {"max_new_tokens": config.max_tokens, "do_sample": config.temperature > 0,
                                          "pad_token_id": self.tokenizer.pad_token_id}
            if config.temperature > 0:
                gen_kwargs["temperature"] = config.temperature
                if config.top_p is not None:
                    gen_kwargs["top_p"] = config.top_p
                if config.seed is not None:
                    torch.manual_seed(config.seed)
            if config.stop:
                gen_kwargs.update(stop_strings=config.stop, tokenizer=self.tokenizer)
            out = self.model.generate(**inputs, **gen_kwargs)
        prompt_len = inputs["input_ids"].shape[1]
        results = []
        eos = self.tokenizer.eos_token_id
        for row, mask in zip(out, inputs["attention_mask"]):
            new = row[prompt_len:]
            n_new = int((new != self.tokenizer.pad_token_id).sum()) if eos != self.tokenizer.pad_token_id else len(new)
            text = self.tokenizer.decode(new, skip_special_tokens=True)
            finished = eos is not None and bool((new == eos).any())
            results.append(Generation(text=text.strip(), usage=Usage(input_tokens=int(mask.sum()), output_tokens=n_new),
                                      finish_reason="stop" if finished or len(new) < config.max_tokens else "length"))
        return results

    async def loglikelihood(self, messages: list[Message], continuations: list[str]) -> list[Loglikelihood]:
        return await asyncio.to_thread(self._loglikelihood, messages, continuations)

    def _loglikelihood(self, messages: list[Message], continuations: list[str]) -> list[Loglikelihood]:
        """Score each continuation after the templated prompt: its tokens (tokenised on their own, without special
        tokens) are appended to the prompt's ids, so the split is exact with no re-tokenisation of the joined text."""
        torch = self._torch
        results = []
        with self._lock, torch.inference_mode():
            base = self._inputs([messages])
            prompt_ids = base["input_ids"]
            for cont in continuations:
                cont_ids = self.tokenizer(cont, add_special_tokens=False, return_tensors="pt")["input_ids"]
                cont_ids = cont_ids.to(self.device)
                if cont_ids.shape[1] == 0:
                    results.append(Loglikelihood(sum=0.0, n_tokens=0))
                    continue
                ids = torch.cat([prompt_ids, cont_ids], dim=1)
                logits = self.model(**{**base, "input_ids": ids, "attention_mask": torch.ones_like(ids)}).logits.float()
                n = cont_ids.shape[1]
                logprobs = torch.log_softmax(logits[0, -n - 1:-1], dim=-1)
                token_lp = logprobs.gather(1, cont_ids[0].unsqueeze(1)).squeeze(1)
                results.append(Loglikelihood(sum=float(token_lp.sum()), n_tokens=n))
        return results

    def vision_pad_colour(self) -> tuple[int, int, int]:
        """The processor's mean colour in 8 bits: what LLaVA's expand2square pads with."""
        mean = _vision._get(self._image_proc, "image_mean", [0.5] * 3)
        return tuple(int(round(float(m) * 255)) for m in list(mean)[:3])  # type: ignore[return-value]

    def vision_input_size(self) -> tuple[int, int]:
        requested, size = None, self.spec.get_str("vision_size")
        if size:
            h, _, w = size.partition("x")
            try:
                requested = (int(h), int(w or h))
            except ValueError:
                raise SpecError(f"vision_size={size!r}: use HxW, e.g. 448x448") from None
        return _vision.input_size(self._packing, self._image_proc, self.model.config, requested)

    def vision_embedding(self, pixels):
        """Connector output for ``pixels`` in [0, 1], (B, 3, H, W) -> (B, tokens, dim), differentiable: normalisation
        and the family's packing happen here, after any perturbation (see ``_vision``)."""
        if not self.capabilities.vision_embedding:
            raise NotImplementedError(f"{self.model_id}: this model has no get_image_features")
        return _vision.embed(self.model, self._image_proc, pixels, self._packing, self.dtype)
