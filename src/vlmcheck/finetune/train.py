"""LoRA fine-tuning of a local Hugging Face VLM on ``vhx dataset`` output (VHExpansion section 5.4).

The paper's learning rate and epoch, and otherwise LLaVA-1.5's LoRA recipe (``scripts/v1_5/finetune_lora.sh``),
are the defaults of :class:`FinetuneConfig` (docs/methods.md, "Fine-tuning on expanded cases").  Training goes
through ``transformers.Trainer`` with ``peft``, the loss on the answer tokens only (:class:`AnswerOnlyCollator`),
the conversation templated by the model's own processor chat template, as ``hf:`` asks it at evaluation.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ..core.files import InputFileError, write_text_atomic
from ..core.messages import Message, to_hf
from ..core.spec import ModelSpec, SpecError
from .data import read_llava

IGNORE = -100
_NOT_LANGUAGE = {"vision_tower", "vision_model", "visual", "multi_modal_projector", "mm_projector", "connector",
                 "lm_head", "image_newline", "vision_resampler"}


class FinetuneConfig(BaseModel):
    model: str
    data: str
    out: str
    learning_rate: float = Field(1.8e-6, gt=0)  # VHExpansion 5.4
    epochs: float = Field(1.0, gt=0)  # VHExpansion 5.4
    max_steps: int | None = Field(None, ge=1)  # stop after this many optimiser steps (overrides epochs)
    lora_r: int = Field(128, ge=1)  # LLaVA-1.5 finetune_lora.sh
    lora_alpha: int = Field(256, ge=1)
    lora_dropout: float = Field(0.05, ge=0, lt=1)
    batch_size: int = Field(16, ge=1)  # per device, as LLaVA-1.5
    grad_accum: int = Field(1, ge=1)
    warmup_ratio: float = Field(0.03, ge=0, lt=1)
    lr_scheduler: str = "cosine"
    weight_decay: float = Field(0.0, ge=0)
    gradient_checkpointing: bool = True
    save_steps: int = Field(50, ge=1)
    seed: int = 0
    probe_rows: int = Field(16, ge=0)  # rows whose loss is measured before and after training
    # the multimodal projector's learning rate: None = LLaVA-1.5's finetune_lora.sh (mm_projector_lr 2e-5) for a
    # LLaVA-family model and untouched for others; 0 = never trained.  Recorded in finetune.json.
    projector_lr: float | None = Field(None, ge=0)
    model_max_length: int = Field(2048, ge=16)  # LLaVA-1.5's; longer conversations are cut at the end


#: LLaVA-1.5 scripts/v1_5/finetune_lora.sh: --mm_projector_lr 2e-5
LLAVA_PROJECTOR_LR = 2e-5
_PROJECTORS = {"multi_modal_projector", "mm_projector"}


def _projector(cfg: FinetuneConfig, model: Any) -> tuple[float, list[str]]:
    """The projector's learning rate (0: frozen; given, else LLaVA-1.5's for a LLaVA-family model) and the names
    of its modules to train (LLaVA's ``multi_modal_projector``, ``mm_projector``)."""
    lr = cfg.projector_lr
    if lr is None:
        lr = LLAVA_PROJECTOR_LR if str(getattr(model.config, "model_type", "")).lower().startswith("llava") else 0.0
    return lr, sorted(name for name, _ in model.named_modules() if lr > 0 and name.split(".")[-1] in _PROJECTORS)


def lora_targets(model: Any) -> list[str]:
    """Full names of the language model's linear layers (LLaVA's ``find_all_linear_names``: everything but
    the vision tower, the projector and the LM head)."""
    import torch

    return sorted(name for name, module in model.named_modules()
                  if isinstance(module, torch.nn.Linear) and not (_NOT_LANGUAGE & set(name.split("."))))


def read_rows(data: Path) -> list[dict[str, Any]]:
    """The LLaVA-format records of a ``vhx dataset`` folder (or a LLaVA JSON file)."""
    path = data / "llava.json" if data.is_dir() else data
    if not path.is_file():
        raise InputFileError(f"{data}: no llava.json; build the data with `vlmcheck vhx dataset`")
    rows = read_llava(path, "training data")
    if not rows:
        raise InputFileError(f"{path}: expected a non-empty JSON list of LLaVA records")
    for i, row in enumerate(rows):
        if not any(t.get("from") == "gpt" for t in row["conversations"] if isinstance(t, dict)):
            raise InputFileError(f"{path}: record {i} has no conversations with an answer ('from': 'gpt')")
    return rows


class AnswerOnlyCollator:
    """Batches LLaVA records for a VLM: the processor's tensors for the whole conversations, and labels that keep
    only the assistant turns (answer text and end-of-turn tokens).  Each turn's span is found by templating up to
    its start (with the generation prompt) and its end, both checked to be token prefixes of the whole: a template
    that re-tokenises across the boundary fails loudly instead of training on shifted labels."""

    def __init__(self, processor: Any, root: Path, max_length: int | None = None) -> None:
        self.processor = processor
        self.root = root
        self.max_length = max_length
        self.tokenizer = getattr(processor, "tokenizer", processor)

    def messages(self, row: dict[str, Any]) -> list[Message]:
        from PIL import Image

        image = None
        if row.get("image"):
            with Image.open(self.root / row["image"]) as im:
                image = im.convert("RGB")
        out = []
        for turn in row["conversations"]:
            text = str(turn.get("value", ""))
            if turn.get("from") == "gpt":
                out.append(Message.assistant(text))
            elif image is not None and "<image>" in text:
                out.append(Message.user(image, text.replace("<image>", "").strip()))
                image = None
            else:
                out.append(Message.user(text))
        if image is not None:  # no <image> placeholder: the image goes first, as LLaVA puts it
            first = next(i for i, m in enumerate(out) if m.role == "user")
            out[first] = Message.user(image, out[first].text)
        return out

    def _process(self, conversations: list[list[Message]], generation_prompt: bool = False, **options: Any) -> Any:
        """The processor's tensors for ``conversations``, each templated by the model's own chat template."""
        texts, images = [], []
        for messages in conversations:
            conv, imgs = to_hf(messages)
            texts.append(self.processor.apply_chat_template(conv, add_generation_prompt=generation_prompt,
                                                            tokenize=False))
            images.extend(imgs)
        return self.processor(text=texts, return_tensors="pt", **({"images": images} if images else {}), **options)

    def _ids(self, messages: list[Message], generation_prompt: bool) -> list[int]:
        return self._process([messages], generation_prompt)["input_ids"][0].tolist()

    def encode(self, row: dict[str, Any]) -> tuple[list[Message], list[int], list[int]]:
        """(messages, input ids, labels) of one record."""
        messages = self.messages(row)
        full = self._ids(messages, False)
        labels = [IGNORE] * len(full)
        for j, m in enumerate(messages):
            if m.role != "assistant":
                continue
            start = self._ids(messages[:j], True)
            end = full if j == len(messages) - 1 else self._ids(messages[:j + 1], False)
            if full[:len(start)] != start or full[:len(end)] != end:
                raise ValueError(f"record {row.get('id')}: the chat template does not extend the prompt token by "
                                 "token, so the answer's tokens cannot be located")
            labels[len(start):len(end)] = full[len(start):len(end)]
        return messages, full, labels

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        encoded = [self.encode(r) for r in rows]
        side = self.tokenizer.padding_side
        self.tokenizer.padding_side = "right"  # the labels are aligned from the left
        try:
            batch = dict(self._process([messages for messages, _, _ in encoded], padding=True))
        finally:
            self.tokenizer.padding_side = side
        labels = torch.full_like(batch["input_ids"], IGNORE)
        for i, (_, ids, lab) in enumerate(encoded):
            if batch["input_ids"][i, :len(ids)].tolist() != ids:
                raise ValueError(f"record {rows[i].get('id')}: batched and single tokenisation differ")
            labels[i, :len(ids)] = torch.tensor(lab)
        batch["labels"] = labels
        batch.pop("token_type_ids", None)
        if self.max_length and batch["input_ids"].shape[1] > self.max_length:  # model_max_length: cut the end
            image_id = getattr(self.processor, "image_token_id", None)
            cut = batch["input_ids"][:, self.max_length:]
            if image_id is not None and bool((cut == image_id).any()):
                raise ValueError(f"a conversation's image tokens run past model_max_length={self.max_length}; "
                                 "raise --model-max-length")
            for key in ("input_ids", "attention_mask", "labels"):
                if key in batch:
                    batch[key] = batch[key][:, :self.max_length]
        return batch


def _probe_loss(model: Any, collator: AnswerOnlyCollator, rows: list[dict[str, Any]], device: str) -> float | None:
    """Mean answer-token loss over ``rows`` (one batch), without gradients."""
    import torch

    if not rows:
        return None
    model.eval()
    with torch.no_grad():
        batch = {k: v.to(device) if hasattr(v, "to") else v for k, v in collator(rows).items()}
        return float(model(**batch).loss)


@contextlib.contextmanager
def _quiet_deprecations():
    """peft and Trainer ask transformers 5.x questions it renamed (is_gradient_checkpointing ...); the
    FutureWarnings say nothing a user can act on."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*deprecated and will be removed in v6.*", category=FutureWarning)
        yield


def finetune(cfg: FinetuneConfig, callbacks: list[Any] | None = None, progress: bool = True) -> dict[str, Any]:
    """Train a LoRA adapter; write it and ``finetune.json`` to ``cfg.out``; return what ``finetune.json`` holds."""
    try:
        import peft
        import torch
        from transformers import (AutoModelForImageTextToText, AutoProcessor, Trainer, TrainerCallback,
                                  TrainingArguments, set_seed)
        from transformers.trainer_callback import PrinterCallback
        from transformers.trainer_utils import get_last_checkpoint
        from transformers.utils import logging as hf_logging
    except ImportError as exc:
        raise SpecError(f"fine-tuning needs torch, transformers and peft ({exc.name} is missing): "
                        "pip install 'vlmcheck[finetune]'") from None
    from ..core.progress import Progress
    from ..models.hf import ensure_available, resolve_device

    spec = ModelSpec.parse(cfg.model)
    if spec.provider != "hf":
        raise SpecError(f"{cfg.model}: fine-tuning takes a local Hugging Face model (hf:REPO_OR_PATH)")
    if spec.get_str("adapter"):
        raise SpecError(f"{cfg.model}: give the base model; the adapter is what fine-tuning writes")
    data = Path(cfg.data)
    rows = read_rows(data)
    data_file = data / "llava.json" if data.is_dir() else data
    out = Path(cfg.out)
    ckpt_dir = out / "checkpoints"
    fingerprint = hashlib.sha256(data_file.read_bytes() + cfg.model_dump_json(
        exclude={"out", "max_steps", "save_steps"}).encode()).hexdigest()[:16]
    last = get_last_checkpoint(str(ckpt_dir)) if ckpt_dir.is_dir() else None
    state_file = out / "finetune.json"
    if last:
        try:
            before = json.loads(state_file.read_text())
        except (OSError, ValueError):
            before = {}
        if before.get("fingerprint") != fingerprint:
            raise InputFileError(f"{out} holds checkpoints of a fine-tune with other data or settings; give a new "
                                 "--out (or delete the folder)")

    device = resolve_device(spec.get_str("device"))
    bf16 = device.startswith("cuda") and torch.cuda.is_bf16_supported()
    dtype = torch.bfloat16 if bf16 else torch.float32
    ensure_available(spec.name)
    hf_logging.disable_progress_bar()  # the weight-loading bar; our own line reports the training
    processor = AutoProcessor.from_pretrained(spec.name)
    model = AutoModelForImageTextToText.from_pretrained(spec.name, dtype=dtype)
    tokenizer = getattr(processor, "tokenizer", processor)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    targets = lora_targets(model)
    if not targets:
        raise SpecError(f"{cfg.model}: found no linear layers in the language model to adapt")
    set_seed(cfg.seed)  # LoRA's A matrices start random: the same seed gives the same adapter, resumed or not
    proj_lr, projectors = _projector(cfg, model)
    with _quiet_deprecations():
        # the projector, trained in full at its own rate as LLaVA-1.5's LoRA recipe does (modules_to_save: saved
        # with the adapter, loaded with it by hf:MODEL?adapter=)
        model = peft.get_peft_model(model, peft.LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha,
                                                            lora_dropout=cfg.lora_dropout, bias="none",
                                                            target_modules=targets,
                                                            modules_to_save=projectors or None))
    trainable, total = model.get_nb_trainable_parameters()
    collator = AnswerOnlyCollator(processor, data_file.parent, cfg.model_max_length)
    probe = rows[:cfg.probe_rows]
    model.to(device)
    probe_before = _probe_loss(model, collator, probe, device)

    per_epoch = math.ceil(len(rows) / (cfg.batch_size * cfg.grad_accum))
    steps = cfg.max_steps or max(1, math.ceil(per_epoch * cfg.epochs))
    # transformers 5.x renamed gradient checkpointing to activation checkpointing (the old names warn)
    fields = TrainingArguments.__dataclass_fields__
    ckpt = "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"
    args = TrainingArguments(
        output_dir=str(ckpt_dir), per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.grad_accum, learning_rate=cfg.learning_rate,
        num_train_epochs=cfg.epochs, max_steps=steps, lr_scheduler_type=cfg.lr_scheduler,
        warmup_steps=math.ceil(cfg.warmup_ratio * steps), weight_decay=cfg.weight_decay, logging_steps=1,
        save_strategy="steps", save_steps=cfg.save_steps, save_total_limit=2, bf16=bf16,
        use_cpu=device == "cpu", **{ckpt: cfg.gradient_checkpointing, f"{ckpt}_kwargs": {"use_reentrant": False}},
        remove_unused_columns=False, report_to="none",
        disable_tqdm=True, seed=cfg.seed, data_seed=cfg.seed, dataloader_num_workers=0, label_names=["labels"])

    class _Progress(TrainerCallback):  # our progress line (a bar on a terminal) instead of tqdm's
        def on_train_begin(self, args, state, control, **kw):
            self.bar = Progress("finetune", state.max_steps, done=state.global_step, enabled=progress)
            self.bar.__enter__()

        def on_step_end(self, args, state, control, **kw):
            self.bar.advance(state.global_step - self.bar.done)

        def on_train_end(self, args, state, control, **kw):
            self.bar.__exit__(None, None, None)

    out.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"base_model": spec.canonical(), "data": str(data_file), "fingerprint": fingerprint,
                              "config": cfg.model_dump(), "device": device, "dtype": str(dtype).split(".")[-1],
                              "train_rows": len(rows), "steps": steps, "lora_target_layers": len(targets),
                              "projector_lr": proj_lr, "projector_modules": projectors,
                              "model_max_length": cfg.model_max_length,
                              "trainable_parameters": trainable, "total_parameters": total,
                              "resumed_from": Path(last).name if last else None, "finished": False}
    write_text_atomic(state_file, json.dumps(record, indent=2) + "\n")

    class _Trainer(Trainer):
        def create_optimizer(self, *a, **kw):  # the projector's parameters at their own learning rate
            if self.optimizer is None and projectors:
                params = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
                proj = [p for n, p in params if "modules_to_save" in n]
                rest = [p for n, p in params if "modules_to_save" not in n]
                self.optimizer = torch.optim.AdamW(
                    [{"params": rest, "lr": cfg.learning_rate}, {"params": proj, "lr": proj_lr}],
                    lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
                return self.optimizer
            return super().create_optimizer(*a, **kw)

    trainer = _Trainer(model=model, args=args, train_dataset=rows, data_collator=collator,
                       callbacks=[_Progress(), *(callbacks or [])])
    trainer.remove_callback(PrinterCallback)  # it prints every log dict; the losses go to finetune.json
    for config in (model.config, getattr(model.config, "text_config", None)):
        if config is not None and getattr(config, "use_cache", False):
            config.use_cache = False  # no KV cache while training (and none with gradient checkpointing)
    t0 = time.monotonic()
    with _quiet_deprecations():
        output = trainer.train(resume_from_checkpoint=last)
    seconds = time.monotonic() - t0
    done_here = trainer.state.global_step - (int(Path(last).name.split("-")[-1]) if last else 0)
    model.save_pretrained(str(out))
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    record.update(finished=True, global_step=trainer.state.global_step, train_loss=output.training_loss,
                  losses=losses, seconds=round(seconds, 3),
                  seconds_per_step=round(seconds / done_here, 4) if done_here > 0 else None,
                  probe_loss_before=probe_before, probe_loss_after=_probe_loss(model, collator, probe, device))
    write_text_atomic(state_file, json.dumps(record, indent=2) + "\n")
    return record
