"""What a run will cost before it starts: ``--dry-run`` (docs/usage.md, "Before a run"): the remaining samples
run through the method's own code on the run's store read in place, each model an :class:`Estimator`."""

from __future__ import annotations

import asyncio
import hashlib
import tempfile
from pathlib import Path
from typing import Any

from PIL import Image

from ..core import inputs
from ..core.roles import Generation, Loglikelihood, Usage
from ..core.tokens import image_tokens, text_tokens
from ..store.db import DB_NAME, RunStore
from .calls import key_version_of
from .folder import RunFolderExists, check_folder, check_replaceable
from .loop_clients import close_loop_clients
from .options import input_policy
from .prices import _spec, cost_of, image_rule
from .runner import _run_samples, check_spec, run_spec, select_samples, start_session

#: a task attribute holding a model -> the role it is reported under
ROLES = {"vlm": "describer", "generator": "generator", "encoder": "encoder", "judge": "judge", "judge2": "judge",
         "negator": "negator", "rewriter": "rewriter", "extractor": "extractor", "target": "attack target"}


class Estimator:
    """Stands in for one model during a dry run: counts each request (calls, estimated tokens) and answers with
    a stand-in (the task's ``dry_run_reply``, else "Yes.")."""

    batch = None  # never a provider batch: the session then calls :meth:`generate` directly
    dry_run = True  # methods that skip a call on some answers count it anyway (an upper bound): ChEF's judge

    def __init__(self, model: Any, attr: str, task: Any, mean_output: float | None) -> None:
        self.model_id, self.capabilities = model.model_id, model.capabilities
        self.concurrency_key = f"dry-run:{model.model_id}"
        self.attr, self.task, self.mean_output = attr, task, mean_output
        self.rule = image_rule(model.model_id)
        self.calls = self.images = 0
        self.input_tokens = self.output_tokens = 0.0
        self.output_from_max_tokens = False

    def _count_call(self, messages: list[Any]) -> None:
        self.calls += 1
        for m in messages:
            self.input_tokens += text_tokens(m.text)
            for im in m.images:  # an ImagePart knows its size: nothing is decoded
                self.input_tokens += image_tokens(im.width, im.height, self.rule)

    async def generate(self, messages: list[Any], config: Any) -> Generation:
        self._count_call(messages)
        self.output_from_max_tokens |= self.mean_output is None
        self.output_tokens += config.max_tokens if self.mean_output is None else self.mean_output
        reply = getattr(self.task, "dry_run_reply", lambda *a: None)(self.attr, messages, config)
        # "Yes." and a digest of the request: each stand-in answer differs, so a generator prompt made from it is
        # never a cache hit a real, different answer would not be
        return Generation(text=reply or f"Yes. {_digest(messages)}", finish_reason="stop",
                          usage=Usage(input_tokens=0, output_tokens=0))

    async def loglikelihood(self, messages: list[Any], continuations: list[str]) -> list[Loglikelihood]:
        self._count_call(messages)
        self.input_tokens += sum(text_tokens(c) for c in continuations)
        return [Loglikelihood(sum=-1.0, n_tokens=1) for _ in continuations]

    async def generate_image(self, prompt: str, seed: int | None = None) -> Image.Image:
        self.calls += 1
        self.images += 1
        self.input_tokens += text_tokens(prompt)
        # the size the generator would return, so the next step's image tokens are counted right: the spec's
        # width/height or size=WxH, else 1024 x 1024 (DALL-E 3's and most diffusion models' default)
        spec = _spec(self.model_id)
        params = spec.params if spec else {}
        w, h = ((params.get("size") or "x").split("x") if "size" in params
                else (params.get("width"), params.get("height")))
        size = (int(w or 1024), int(h or 1024))
        img = Image.new("RGB", size, (128, 128, 128))
        img.putpixel((0, 0), tuple(bytes.fromhex(_digest(prompt))[:3]))  # one image per prompt, as a generator's
        return img

    async def encode(self, images: list[Any]) -> Any:
        import numpy as np  # numpy loads on first use

        self.calls += 1
        return np.ones((len(images), 8), dtype=np.float32)


def _digest(obj: Any) -> str:
    text = obj if isinstance(obj, str) else "\n".join(f"{m.role}:{m.text}:{[i.sha256 for i in m.images]}" for m in obj)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def dry_run(task: Any, folder: str | Path, options: Any) -> dict[str, Any]:
    """The estimate of what running ``task`` into ``folder`` with ``options`` still takes (module docstring)."""
    return asyncio.run(_dry_run(task, check_folder(folder), options))


class _DryStore:
    """The run's store as a dry run sees it: the user's read in place (RunStore ``untouched``: nothing made
    beside it), what the simulation writes in a temp store, read first.  Errors name the user's store."""

    def __init__(self, folder: Path, scratch: Path, read_user_store: bool) -> None:
        self.folder = folder
        self.user = RunStore(folder, read_only=True, untouched=True) if read_user_store else None
        self.scratch = RunStore(scratch)

    def __getattr__(self, name: str) -> Any:  # every write, and what only this session made
        return getattr(self.scratch, name)

    def get_call(self, key: str) -> Any:
        hit = self.scratch.get_call(key)
        return hit if hit is not None or self.user is None else self.user.get_call(key)

    def get_meta(self, key: str, default: Any = None) -> Any:
        value = self.scratch.get_meta(key)
        return value if value is not None or self.user is None else self.user.get_meta(key, default)

    def sample_status(self, task: str) -> dict[str, str]:
        return {**(self.user.sample_status(task) if self.user is not None else {}), **self.scratch.sample_status(task)}

    def call_stats(self) -> dict[str, Any]:
        return self.user.call_stats() if self.user is not None else {}

    def image_path(self, rel: str) -> Path:
        own = self.scratch.image_path(rel)
        return own if own.exists() or self.user is None else self.user.image_path(rel)

    def close(self) -> None:
        try:
            self.scratch.close()
        finally:
            if self.user is not None:
                self.user.close()


def refuse_as_the_run_would(task: Any, folder: Path, options: Any, samples: list[Any], store: Any) -> None:
    """The refusals the real command makes before its first sample (run/runner.py), made without writing: a
    store without --resume or --overwrite, another shard, another task spec (else a dry run on a folder holding
    a run with another prompt says "0 calls, $0")."""
    if not (folder / DB_NAME).exists():
        return
    if not (options.resume or options.overwrite):
        raise RunFolderExists(f"{folder} already holds a run; pass --resume to continue it or --overwrite")
    if options.overwrite:
        check_replaceable(folder)
        return
    check_spec(folder, store.get_meta("spec"), run_spec(task, samples, options), getattr(task, "spec_model", None),
               key_version_of(store))


async def _dry_run(task: Any, folder: Path, options: Any) -> dict[str, Any]:
    inputs.active_policy.set(input_policy(options))  # in asyncio.run's task: its context ends with the dry run
    fresh = options.overwrite or not (folder / DB_NAME).exists()  # --overwrite: estimated as an empty folder
    originals = {k: v for k, v in vars(task).items() if k in ROLES and hasattr(v, "model_id")}
    samples = select_samples(task, options)
    with tempfile.TemporaryDirectory(prefix="vlmcheck-dry-run-") as tmp:
        store = _DryStore(folder, Path(tmp), read_user_store=not fresh)
        try:
            refuse_as_the_run_would(task, folder, options, samples, store)
            # per model: the mean output tokens of the run's own calls so far
            means = {m: e["output_tokens"] / e["ok"] for m, e in store.call_stats().items()
                     if e.get("ok") and e.get("output_tokens")}
            stand_ins = {k: Estimator(v, k, task, means.get(v.model_id)) for k, v in originals.items()}
            session = start_session(store, options, key_version_of(store))
            todo = [s for s in samples if s.id not in store.sample_status(task.name)]
            quiet = options.model_copy(update={"progress": False})
            for k, v in stand_ins.items():
                setattr(task, k, v)
            try:
                await _run_samples(task, todo, session, quiet, already=len(samples) - len(todo), total=len(samples))
            finally:
                for k, v in originals.items():
                    setattr(task, k, v)
                await close_loop_clients()
            failed = sum(1 for s in todo if store.sample_status(task.name).get(s.id) == "error")
        finally:
            store.close()
    est = summarize_estimate(stand_ins, getattr(task, "calls_depend_on_answers", False))
    est["samples"] = {"total": len(samples), "finished": len(samples) - len(todo), "to_run": len(todo),
                      "failed_in_simulation": failed}
    return est


def _role() -> dict[str, Any]:
    return {"models": [], "calls": 0, "input_tokens": 0, "output_tokens": 0, "images": 0, "cost_usd": 0.0,
            "upper_bound": False, "output_from": "the run's mean"}


def _add(into: dict[str, Any], r: dict[str, Any]) -> None:
    """Role figures ``r`` added to ``into``; the cost is unknown once a role that makes calls has none."""
    into["models"] += [x for x in r["models"] if x not in into["models"]]
    for k in ("calls", "input_tokens", "output_tokens", "images"):
        into[k] += r[k]
    into["cost_usd"] = None if into["cost_usd"] is None or (r["cost_usd"] is None and r["calls"]) else \
        into["cost_usd"] + (r["cost_usd"] or 0.0)
    into["upper_bound"] = into["upper_bound"] or r["upper_bound"]
    if r["output_from"] == "max_tokens":
        into["output_from"] = "max_tokens"


def summarize_estimate(stand_ins: dict[str, Estimator], multi_step: bool) -> dict[str, Any]:
    roles: dict[str, dict[str, Any]] = {}
    for e in stand_ins.values():
        _add(roles.setdefault(ROLES[e.attr], _role()), {
            "models": [e.model_id], "calls": e.calls, "input_tokens": int(round(e.input_tokens)),
            "output_tokens": int(round(e.output_tokens)), "images": e.images,
            "cost_usd": cost_of(e.model_id, e.input_tokens, e.output_tokens, e.images) if e.calls else 0.0,
            "upper_bound": multi_step or e.output_from_max_tokens,
            "output_from": "max_tokens" if e.output_from_max_tokens else "the run's mean"})
    totals = _totals(roles)
    for r in roles.values():
        if r["cost_usd"] is not None:
            r["cost_usd"] = round(r["cost_usd"], 6)
    return {"roles": roles, "totals": totals}


def _totals(roles: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every role's calls, tokens and cost summed; the cost is unknown when a role that makes calls has none."""
    rs = roles.values()
    return {**{k: sum(r[k] for r in rs) for k in ("calls", "input_tokens", "output_tokens")},
            "cost_usd": (None if any(r["cost_usd"] is None and r["calls"] for r in rs)
                         else round(sum(r["cost_usd"] or 0.0 for r in rs), 6)),
            "upper_bound": any(r["upper_bound"] for r in rs if r["calls"])}


def merge_estimates(estimates: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs' estimates (a sweep, GenCeption with several VLMs) as one: per role and in total."""
    roles: dict[str, dict[str, Any]] = {}
    samples = {"total": 0, "finished": 0, "to_run": 0, "failed_in_simulation": 0}
    for est in estimates:
        for name, r in est["roles"].items():
            _add(roles.setdefault(name, _role()), r)
        for k in samples:
            samples[k] += est.get("samples", {}).get(k, 0)
    return {"roles": roles, "totals": _totals(roles), "samples": samples, "runs": len(estimates)}
