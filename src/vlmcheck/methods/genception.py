"""GenCeption (Cao et al.): describe, regenerate, repeat; score the drift.

Algorithm 1 of the paper, per seed image X0 and t = 1..T::

    Q_t = VLM(P_Desc, X_{t-1})                          # eq. 1
    X_t = Gen("Generate an image that fully and precisely reflects this description: <Q_t>")  # eq. 2
    s(t) = cos(Enc(X0), Enc(X_t))
    GC@T = sum_t t*s(t) / sum_t t                        # eq. 3

Steps within a chain are sequential; chains run concurrently under the
runner's limits.  Every model call is cached in the run store, so a chain
killed after step 2 resumes at step 3 without asking any model again.

A chain that stops early (an empty or refused description, or a model call
that failed after its retries) is *incomplete*: it is reported with its step
and reason and left out of GC@t - never normalised over fewer terms (the
authors' code did; see docs/methods.md).

Kept per chain: every Q_t, X_t (a lossless PNG artifact), embedding and s(t).
Also computed from the same run: GC@t for every t <= T, the unweighted s(T)
ablation, GC_FID@t (v2 paper, eq. 4: Frechet distance between the encoder
features of D(0) and D(t), labelled with the encoder used), per-category and
MMECeption group scores.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel

from ..core.answers import answer_status
from ..core.data import load_image_dataset
from ..core.images import image_hash, load_image
from ..core.messages import Message
from ..core.roles import GenerationConfig
from ..core.spec import load_model
from ..metrics.stats import bootstrap_ci, cosine, frechet_distance, gc_at
from ..run.calls import Session
from ..run.runner import Sample, SpecTask

#: P_Desc, GenCeption Table 1 (verbatim).
P_DESC = (
    "Please write a clear, precise, detailed, and concise description of all elements in the image. Focus on "
    "accurately depicting various aspects, including but not limited to the colors, shapes, positions, styles, "
    "texts and the relationships between different objects and subjects in the image. Your description should "
    "be thorough enough to guide a professional in recreating this image solely based on your textual "
    "representation. Remember, only include descriptive texts that directly pertain to the contents of the "
    "image. You must complete the description using less than 500 words."
)
#: P_Gen, GenCeption section 2.1; ``{description}`` is Q_t.
P_GEN = "Generate an image that fully and precisely reflects this description: {description}"
TEMPLATE_VERSION = "genception-v1"

#: MME's 14 categories (folder names as MME ships them) and MMECeption's groups.
MME_VISUAL = ("existence", "count", "position", "color", "posters", "celebrity", "scene", "landmark", "artwork",
              "commonsense_reasoning")
MME_TEXTUAL = ("code_reasoning", "numerical_calculation", "text_translation", "OCR")
#: The reference world's categories, grouped the same way.
WORLD_VISUAL = ("existence", "count", "position", "color", "shape")
WORLD_TEXTUAL = ("ocr", "numerical", "code")
FID_MIN_IMAGES = 50


def _norm(cat: str) -> str:
    return "".join(ch for ch in cat.lower() if ch.isalnum())


_GROUP = {_norm(c): "visual" for c in MME_VISUAL + WORLD_VISUAL}
_GROUP.update({_norm(c): "textual" for c in MME_TEXTUAL + WORLD_TEXTUAL})
_GROUP.update({"poster": "visual", "commonsense": "visual", "numerical": "textual", "code": "textual",
               "texttranslation": "textual"})


def category_group(category: str | None) -> str | None:
    """'visual', 'textual' or None for a category name (MME or world; case and separators ignored)."""
    return _GROUP.get(_norm(category)) if category else None


class GenCeptionSpec(BaseModel):
    vlm: str
    generator: str
    encoder: str
    data: str
    T: int = 3
    prompt_desc: str = P_DESC
    prompt_gen: str = P_GEN
    max_tokens: int = 512
    temperature: float = 0.0
    seed: int = 0
    fid_min_images: int = FID_MIN_IMAGES


class ChainIncomplete(RuntimeError):
    """A chain stopped before T; ``partial`` keeps the steps that were done."""

    def __init__(self, message: str, partial: dict[str, Any]) -> None:
        super().__init__(message)
        self.partial = partial


def _vec(v: np.ndarray) -> list[float]:
    return [float(x) for x in np.asarray(v, dtype=np.float32)]


class GenCeptionTask(SpecTask):
    spec_model = GenCeptionSpec
    name = "genception"

    def __init__(self, spec: GenCeptionSpec, vlm: Any = None, generator: Any = None, encoder: Any = None) -> None:
        if spec.T < 1:
            raise ValueError("T must be at least 1")
        if "{description}" not in spec.prompt_gen:
            raise ValueError("prompt_gen must contain '{description}'")
        self.cfg = spec
        self.items = load_image_dataset(spec.data)
        self.vlm = vlm if vlm is not None else load_model(spec.vlm, "vlm")
        self.generator = generator if generator is not None else load_model(spec.generator, "generator")
        self.encoder = encoder if encoder is not None else load_model(spec.encoder, "encoder")

    def samples(self) -> list[Sample]:
        return [Sample(item.id, item) for item in self.items]

    async def run_sample(self, sample: Sample, session: Session) -> dict[str, Any]:
        item = sample.payload
        cfg = self.cfg
        x0 = load_image(item.path)
        vlm, gen, enc = session.vlm(self.vlm), session.generator(self.generator), session.encoder(self.encoder)
        e0 = (await enc.encode([x0]))[0]
        record: dict[str, Any] = {
            "image": item.id, "image_path": item.path, "image_sha256": image_hash(x0), "category": item.category,
            "group": category_group(item.category), "T": cfg.T, "steps": [], "s": [],
            "embedding0": _vec(e0),
        }
        config = GenerationConfig(max_tokens=cfg.max_tokens, temperature=cfg.temperature, seed=cfg.seed)
        prev = x0
        for t in range(1, cfg.T + 1):
            step: dict[str, Any] = {"t": t}
            try:
                g = await vlm.generate([Message.user(prev, cfg.prompt_desc)], config, template=TEMPLATE_VERSION)
            except Exception as exc:
                record["stopped"] = {"t": t, "stage": "describe", "reason": f"{type(exc).__name__}: {exc}"}
                raise ChainIncomplete(f"chain stopped at t={t} (describe): {exc}", record) from exc
            status = answer_status(g)
            step.update(description=g.text, answer_status=status, finish_reason=g.finish_reason)
            if status in ("empty", "refusal"):
                record["steps"].append(step)
                record["stopped"] = {"t": t, "stage": "describe", "reason": status}
                return self._finish(record, complete=False)
            try:
                xt, artifact = await gen.generate_image(cfg.prompt_gen.format(description=g.text),
                                                        seed=cfg.seed, template=TEMPLATE_VERSION)
                et = (await enc.encode([xt]))[0]
            except Exception as exc:
                record["steps"].append(step)
                record["stopped"] = {"t": t, "stage": "generate", "reason": f"{type(exc).__name__}: {exc}"}
                raise ChainIncomplete(f"chain stopped at t={t} (generate/encode): {exc}", record) from exc
            s_t = cosine(e0, et)
            step.update(image=artifact, image_sha256=image_hash(xt), s=s_t, embedding=_vec(et))
            record["steps"].append(step)
            record["s"].append(s_t)
            prev = xt
        return self._finish(record, complete=True)

    def _finish(self, record: dict[str, Any], complete: bool) -> dict[str, Any]:
        record["complete"] = complete
        s = record["s"]
        record["gc"] = {f"GC@{t}": gc_at(s, t) for t in range(1, len(s) + 1)}
        return record

    # ------------------------------------------------------------------ summary

    def summarize(self, records: list[dict[str, Any]], failed: list[dict[str, Any]] = ()) -> dict[str, Any]:
        T = self.cfg.T
        results = [r["result"] for r in records]
        complete = [r for r in results if r.get("complete")]
        incomplete = [{"image": r["image"], **r.get("stopped", {})} for r in results if not r.get("complete")]
        for f in failed:
            part = f.get("result") or {}
            incomplete.append({"image": part.get("image", f["sample_id"]), **part.get("stopped", {}),
                               "error": f["error"]["type"]})
        reasons: dict[str, int] = {}
        for inc in incomplete:
            key = inc.get("reason") or inc.get("error") or "unknown"
            key = key.split(":")[0]
            reasons[key] = reasons.get(key, 0) + 1
        out: dict[str, Any] = {
            "T": T,
            "chains": {"total": len(results) + len(failed), "complete": len(complete),
                       "incomplete": len(incomplete), "incomplete_by_reason": reasons,
                       "incomplete_list": incomplete},
        }
        if not complete:
            out["warning"] = "no complete chains: GC@T is undefined"
            return out
        S = np.array([r["s"][:T] for r in complete], dtype=float)
        for t in range(1, T + 1):
            per = np.array([gc_at(row, t) for row in S])
            lo, hi = bootstrap_ci(per, seed=self.cfg.seed)
            out[f"GC@{t}"] = {"mean": float(per.mean()), "ci95": [lo, hi], "n": int(per.size)}
        out["s_mean"] = [float(v) for v in S.mean(axis=0)]
        sT = S[:, T - 1]
        lo, hi = bootstrap_ci(sT, seed=self.cfg.seed)
        out[f"s@{T}_unweighted"] = {"mean": float(sT.mean()), "ci95": [lo, hi], "n": int(sT.size)}
        out["by_category"] = self._by_category(complete, T)
        out["groups"] = self._groups(out["by_category"], T)
        out["fid"] = self._fid(complete, T)
        for t in range(1, T + 1):  # also at the top level: results keyed GC@1..GC@T and GC_FID@1..GC_FID@T
            if f"GC_FID@{t}" in out["fid"]:
                out[f"GC_FID@{t}"] = out["fid"][f"GC_FID@{t}"]
        return out

    def _by_category(self, complete: list[dict[str, Any]], T: int) -> dict[str, Any]:
        cats: dict[str, list[float]] = {}
        for r in complete:
            cats.setdefault(r.get("category") or "(none)", []).append(gc_at(r["s"], T))
        return {c: {f"GC@{T}": float(np.mean(v)), "n": len(v), "group": category_group(c)}
                for c, v in sorted(cats.items())}

    @staticmethod
    def _groups(by_cat: dict[str, Any], T: int) -> dict[str, Any]:
        """MMECeption groups: mean of the category scores in each group."""
        out: dict[str, Any] = {}
        for group in ("visual", "textual"):
            vals = [v[f"GC@{T}"] for v in by_cat.values() if v["group"] == group]
            if vals:
                out[group] = {f"GC@{T}": float(np.mean(vals)), "categories": len(vals)}
        return out

    def _fid(self, complete: list[dict[str, Any]], T: int) -> dict[str, Any]:
        """GC_FID@t (v2 eq. 4): Frechet distance between the features of D(0) and D(t)."""
        out: dict[str, Any] = {"features": f"encoder {self.cfg.encoder}", "n": len(complete)}
        if len(complete) < 2:
            out["warning"] = "GC_FID needs at least two complete chains"
            return out
        X0 = np.array([r["embedding0"] for r in complete], dtype=np.float64)
        if len(complete) < max(self.cfg.fid_min_images, 2):
            out["warning"] = (f"only {len(complete)} images: a set-level Frechet distance is unreliable below "
                              f"{self.cfg.fid_min_images} images (the feature dimension is {X0.shape[1]})")
        for t in range(1, T + 1):
            Xt = np.array([r["steps"][t - 1]["embedding"] for r in complete], dtype=np.float64)
            out[f"GC_FID@{t}"] = frechet_distance(X0, Xt)
        return out
