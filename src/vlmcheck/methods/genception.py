"""GenCeption (Cao et al.): describe, regenerate, repeat; score the drift.

Algorithm 1 of the paper, per seed image X0 and t = 1..T::

    Q_t = VLM(P_Desc, X_{t-1})                          # eq. 1
    X_t = Gen("Generate an image that fully and precisely reflects this description: <Q_t>")  # eq. 2
    s(t) = cos(Enc(X0), Enc(X_t))
    GC@T = sum_t t*s(t) / sum_t t                        # eq. 3

Every Q_t goes to the generator, as Algorithm 1 does; refusals (``methods/refusals.py``) are counted beside GC@T,
and an answer with no text stops its chain.  A chain is left out only when a model call failed after its retries
(or the encoder gave NaN/inf), never normalised over fewer terms as the authors' code did.  Dataset scores are
MMECeption's mean of the category means; GC_FID@t is v2 eq. 4.  What each figure means: docs/methods.md.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from ..core.answers import answer_status
from ..core.images import image_hash
from ..core.inputs import read_image
from ..core.messages import Message
from ..core.spec import load_model
from ..metrics.decisions import headline_entry, too_few_units, widen_degenerate
from ..metrics.stats import (FeatureSet, bootstrap_ci_strata, cosine, frechet_between, gc_at, mean_of_means,
                              strata_level)
from ..run.calls import Session
from ..run.task import Sample, SpecTask
from .gc_drawn import Drawn
from .refusals import refusal_kind
from .repeats import generation_config, per_repeat, repeated, spread
from .records import load_images, read_items, source_name

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
#: s(t) of a refused step and every step after it in the penalised sensitivity figure: the lowest cosine.
REFUSAL_SCORE = -1.0
#: the reason recorded for a chain stopped by an answer with no text
EMPTY_REASON = "empty_description"


def _norm(cat: str) -> str:
    return "".join(ch for ch in cat.lower() if ch.isalnum())


#: Other spellings of MME's category names, with their group.
MME_ALIASES = {"poster": "visual", "commonsense": "visual", "numerical": "textual", "code": "textual",
               "texttranslation": "textual"}
_GROUP = {_norm(c): "visual" for c in MME_VISUAL + WORLD_VISUAL}
_GROUP.update({_norm(c): "textual" for c in MME_TEXTUAL + WORLD_TEXTUAL})
_GROUP.update(MME_ALIASES)


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
    per_category: int | None = None  # K seeded random images per category (v2 section 3's human baseline)
    # every chain run `repeats` times (seeds seed, seed + 1, ...) at `temperature`; methods/repeats.py
    repeats: int = Field(1, ge=1)


class ChainIncomplete(RuntimeError):
    """A chain stopped before T; ``partial`` keeps the steps that were done."""

    def __init__(self, message: str, partial: dict[str, Any]) -> None:
        super().__init__(message)
        self.partial = partial


def per_category_sample(items: list, k: int, seed: int) -> list:
    """K images per category drawn with ``seed`` (all of a smaller category), in dataset order; the draw
    depends only on the ids in each category."""
    by_cat: dict[str, list] = {}
    for it in items:
        by_cat.setdefault(it.category or "(none)", []).append(it)
    keep: set[str] = set()
    for cat in sorted(by_cat):
        members = sorted(by_cat[cat], key=lambda it: it.id)
        rng = np.random.default_rng([seed, *cat.encode()])
        chosen = rng.choice(len(members), size=min(k, len(members)), replace=False)
        keep.update(members[i].id for i in chosen)
    return [it for it in items if it.id in keep]


def _vec(v: np.ndarray) -> list[float]:
    return [float(x) for x in np.asarray(v, dtype=np.float32)]


class GenCeptionTask(SpecTask):
    reads = ('images',)
    reports = 'GC@T (and GC_FID@T): the drift of the regenerated images from the seed image'
    spec_model = GenCeptionSpec
    name = "genception"

    def __init__(self, spec: GenCeptionSpec, vlm: Any = None, generator: Any = None, encoder: Any = None) -> None:
        if spec.T < 1:
            raise ValueError("T must be at least 1")
        if "{description}" not in spec.prompt_gen:
            raise ValueError("prompt_gen must contain '{description}'")
        if spec.per_category is not None and spec.per_category < 1:
            raise ValueError("per_category must be at least 1")
        self.cfg = spec
        self.items, self.data_read = read_items(load_images, spec.data)
        if spec.per_category:
            self.items = per_category_sample(self.items, spec.per_category, spec.seed)
        self.vlm = vlm if vlm is not None else load_model(spec.vlm, "vlm")
        self.generator = generator if generator is not None else load_model(spec.generator, "generator")
        self.encoder = encoder if encoder is not None else load_model(spec.encoder, "encoder")
        if getattr(self.vlm, "batch", None) is not None:
            import logging

            logging.getLogger("vlmcheck").warning(
                "GenCeption with a batch API (batch=1): each of the %d steps waits for the previous one, so every "
                "step is one batch round trip (minutes to hours each); batches suit single-step methods", spec.T)

    calls_depend_on_answers = True  # a refusal or an empty description ends a chain early

    @classmethod
    def samples_follow_rows(cls, task_spec: dict[str, Any]) -> bool:
        # one chain per distinct image in the dataset's order, unless images are sampled per category
        return not task_spec.get("per_category")

    async def run_sample(self, sample: Sample, session: Session) -> dict[str, Any]:
        item = sample.payload
        x0 = await read_image(item.path, root=item.root)
        e0 = _finite((await session.encoder(self.encoder).encode([x0]))[0], "X0")
        return await repeated(lambda k: self._chain(item, x0, e0, session, k), self.cfg.repeats)

    async def _chain(self, item: Any, x0: Any, e0: np.ndarray, session: Session, repeat: int) -> dict[str, Any]:
        """One chain X0 -> Q1 -> X1 -> ... -> XT (repeat ``repeat``: seeds offset by it)."""
        cfg = self.cfg
        label = f"chain (repeat {repeat})" if repeat else "chain"
        vlm, gen, enc = session.vlm(self.vlm), session.generator(self.generator), session.encoder(self.encoder)
        record: dict[str, Any] = {
            "image": item.id, "image_path": item.path, "image_sha256": image_hash(x0), "category": item.category,
            "group": category_group(item.category), "T": cfg.T, "steps": [], "s": [],
            "embedding0": _vec(e0),
        }
        config = generation_config(cfg.max_tokens, cfg.repeats, cfg.temperature, repeat, cfg.seed, seed_always=True)
        prev = x0
        for t in range(1, cfg.T + 1):
            step: dict[str, Any] = {"t": t}
            try:
                g = await vlm.generate([Message.user(prev, cfg.prompt_desc)], config, template=TEMPLATE_VERSION)
            except Exception as exc:
                record["stopped"] = {"t": t, "stage": "describe", "reason": f"{type(exc).__name__}: {exc}"}
                raise ChainIncomplete(f"{label} stopped at t={t} (describe): {exc}", record) from exc
            step.update(description=g.text, answer_status=answer_status(g), finish_reason=g.finish_reason)
            kind = refusal_kind(g)
            if kind:  # a refusal is a Q_t like any other (Algorithm 1); counted beside GC@T
                step.update(refused=True)
                record["refused_at"] = record.get("refused_at") or t
            if kind == "empty":  # no text: nothing to send to the generator
                record["steps"].append(step)
                record["stopped"] = {"t": t, "stage": "describe", "reason": EMPTY_REASON}
                raise ChainIncomplete(f"{label} stopped at t={t}: the description is empty ({g.finish_reason})",
                                      record)
            try:
                xt, artifact = await gen.generate_image(cfg.prompt_gen.format(description=g.text),
                                                        seed=cfg.seed + repeat, template=TEMPLATE_VERSION)
                et = _finite((await enc.encode([xt]))[0], f"X{t}")
            except Exception as exc:
                record["steps"].append(step)
                record["stopped"] = {"t": t, "stage": "generate", "reason": f"{type(exc).__name__}: {exc}"}
                raise ChainIncomplete(f"{label} stopped at t={t} (generate/encode): {exc}", record) from exc
            s_t = cosine(e0, et)
            step.update(image=artifact, image_sha256=image_hash(xt), s=s_t, embedding=_vec(et))
            record["steps"].append(step)
            record["s"].append(s_t)
            prev = xt
        record["complete"] = True  # every step 1..T has a score (a refused step's included)
        record["gc"] = {f"GC@{t}": gc_at(record["s"], t) for t in range(1, cfg.T + 1)}
        return record

    def summary_folder(self) -> "GenCeptionSummary":
        return GenCeptionSummary(self)

    def _summary(self, scored: list[dict[str, Any]], features: list[FeatureSet],
                 failed: list[dict[str, Any]], drawn: Drawn) -> dict[str, Any]:
        """The summary from each scored chain's scores (``scored``: s, category, refused_at, repeats' s) and the
        features of D(0)..D(T) over those chains."""
        T = self.cfg.T
        parts = [f.get("result") or {} for f in failed]  # what each failed chain did before it stopped
        failed_list = [{"image": p.get("image", f["sample_id"]), **p.get("stopped", {}), "error": f["error"]["type"]}
                       for f, p in zip(failed, parts)]
        reasons = Counter((inc.get("reason") or inc.get("error") or "unknown").split(":")[0] for inc in failed_list)
        refused = [r for r in scored if r.get("refused_at")]
        empty = [p for p in parts if (p.get("stopped") or {}).get("reason") == EMPTY_REASON]
        total = len(scored) + len(failed_list)
        out: dict[str, Any] = {
            "T": T,
            "chains": {"total": total, "scored": len(scored), "refused": len(refused), "empty": len(empty),
                       "failed": len(failed_list), "failed_by_reason": dict(reasons), "failed_list": failed_list},
            # chains with a refused step, among the chains that ran (an empty answer's chain included)
            "refusal_rate": (len(refused) + len(empty)) / (len(scored) + len(empty)) if scored or empty else None,
            "aggregate": "mean of the category means (MMECeption overall); image_mean: mean over images",
            "dataset": source_name(self.cfg.data),  # its declared name: the benchmark of the GC rank weights
        }
        if not scored:
            out["warning"] = "no scored chains: every chain failed, GC@T is undefined"
            return out
        S = np.array([r["s"][:T] for r in scored], dtype=float)
        gone = drawn.unmeasured(S, len({r["image"] for r in scored}), T)
        if gone:  # the generator drew nothing that differs: no figure (methods/gc_drawn.py)
            return {**out, **gone}
        cats = [r.get("category") or "(none)" for r in scored]
        seed = self.cfg.seed
        G = np.array([[gc_at(row, t) for t in range(1, T + 1)] for row in S])  # per chain: GC@1..GC@T
        for t in range(1, T + 1):
            out[f"GC@{t}"] = _score(G[:, t - 1], cats, seed)
        out["s_mean"] = [mean_of_means(S[:, t], cats) for t in range(T)]
        out[f"s@{T}_unweighted"] = _score(S[:, T - 1], cats, seed)
        out["by_category"] = self._by_category(G, S, cats)
        out["groups"] = self._groups(out["by_category"], T)
        out.update(self._refusal_views(scored, empty, cats, T, seed))
        top = out[f"GC@{T}"]
        out["headline"] = headline_entry(f"GC@{T}", top["score"], top["ci95"], top["interval"])
        if self.cfg.repeats > 1:  # GC@T per repeat beside; the headline pools the repeats of each image
            per = [np.array([[gc_at(r["s"][:T], T)] for r in rs]) for rs in per_repeat(scored, self.cfg.repeats)]
            out["repeats"] = spread([mean_of_means(v[:, 0], cats) for v in per], self.cfg.temperature)
            pooled = _score(np.mean(np.hstack(per), axis=1), cats, seed)
            out["headline"] = headline_entry(f"GC@{T}", pooled["score"], pooled["ci95"],
                                             {**pooled["interval"], "repeats": self.cfg.repeats,
                                              "unit": "image (its repeats averaged; stratified by category)"})
        out["fid"] = self._fid(features, T)
        out.update({k: v for k, v in out["fid"].items() if k.startswith("GC_FID@")})  # also at the top level
        return out

    @staticmethod
    def _by_category(G: np.ndarray, S: np.ndarray, cats: list[str]) -> dict[str, Any]:
        """Per category: mean GC@1..GC@T (``G``, one row per chain) and mean s(T) (``S``)."""
        T = S.shape[1]
        labels = np.array(cats)
        out = {}
        for c in sorted(set(cats)):
            rows = labels == c
            entry: dict[str, Any] = {f"GC@{t}": float(G[rows, t - 1].mean()) for t in range(1, T + 1)}
            entry[f"s@{T}"] = float(S[rows, T - 1].mean())
            entry.update(n=int(rows.sum()), group=category_group(c))
            out[c] = entry
        return out

    @staticmethod
    def _groups(by_cat: dict[str, Any], T: int) -> dict[str, Any]:
        """MMECeption groups: mean of the category scores in each group, for every GC@t."""
        out: dict[str, Any] = {}
        for group in ("visual", "textual"):
            members = [v for v in by_cat.values() if v["group"] == group]
            if members:
                out[group] = {**{f"GC@{t}": float(np.mean([v[f"GC@{t}"] for v in members])) for t in range(1, T + 1)},
                              "categories": len(members)}
        return out

    @staticmethod
    def _refusal_views(scored: list[dict[str, Any]], empty: list[dict[str, Any]], cats: list[str], T: int,
                       seed: int) -> dict[str, Any]:
        """Beside the headline: GC@T over the chains that never refused, and the penalised GC@T (s = -1 from a
        refused step on; a chain stopped by an empty answer counts too) as a sensitivity figure."""
        out: dict[str, Any] = {}
        honest = [(r, c) for r, c in zip(scored, cats) if not r.get("refused_at")]
        if honest:
            S = np.array([r["s"][:T] for r, _ in honest], dtype=float)
            out[f"GC@{T}_non_refused"] = _score(np.array([gc_at(row, T) for row in S]), [c for _, c in honest], seed)
        rows, rcats = [], []
        for r, c in [*zip(scored, cats), *((e, e.get("category") or "(none)") for e in empty)]:
            t0 = r.get("refused_at")
            s = list(r.get("s", []))[: (t0 - 1) if t0 else T]
            rows.append(gc_at(s + [REFUSAL_SCORE] * (T - len(s)), T))
            rcats.append(c)
        if rows:
            out[f"GC@{T}_penalised"] = _score(np.array(rows), rcats, seed)
        return out

    def _fid(self, features: list[FeatureSet], T: int) -> dict[str, Any]:
        """fid(t): Frechet distance between the features of D(0) and D(t); GC_FID@t (v2 eq. 4):
        sum_{tau<=t} tau*fid(tau) / sum_{tau<=t} tau.  Lower is better."""
        n = features[0].n
        out: dict[str, Any] = {"features": f"encoder {self.cfg.encoder}", "n": n}
        if n < 2:
            out["warning"] = "GC_FID needs at least two chains with an image at every step"
            return out
        if n < max(self.cfg.fid_min_images, 2):
            out["warning"] = (f"only {n} images: a set-level Frechet distance is unreliable below "
                              f"{self.cfg.fid_min_images} images (the feature dimension is {features[0].dim})")
        fids = [frechet_between(features[0], features[t]) for t in range(1, T + 1)]
        for t in range(1, T + 1):
            out[f"fid@{t}"] = fids[t - 1]
            out[f"GC_FID@{t}"] = gc_at(fids, t)  # the same t-weighting as eq. 3
        return out


class GenCeptionSummary:
    """GenCeption's summary, folded one finished chain at a time: per scored chain its T scores, category and
    refusal step, and the features of D(0)..D(T) as :class:`FeatureSet` s (rows, then moments)."""

    def __init__(self, task: GenCeptionTask) -> None:
        self.task = task
        self.scored: list[dict[str, Any]] = []
        self.features = [FeatureSet() for _ in range(task.cfg.T + 1)]
        self.drawn = Drawn()  # whether the generator drew what it was told (the headline's definition)

    def add(self, rec: dict[str, Any]) -> None:
        r = rec["result"]
        if not r.get("complete"):
            return
        self.scored.append({"s": r["s"], "category": r.get("category"), "refused_at": r.get("refused_at"),
                            "repeats": [{"s": x["s"]} for x in r.get("repeats", ())],
                            "image": (r.get("image_sha256") or "")[:16]})  # its order key (result())
        self.drawn.add(r["steps"])
        for features, e in zip(self.features, [r["embedding0"], *(st["embedding"] for st in r["steps"])]):
            features.add(e)  # D(0), then D(1)..D(T)

    def result(self, failed: list[dict[str, Any]] = ()) -> dict[str, Any]:
        # chains in order of (category, image): one interval whatever order the dataset's form lists them in
        scored = sorted(self.scored, key=lambda r: (r["category"] or "", r["image"]))
        return self.task._summary(scored, self.features, failed, self.drawn)


def _score(per_image: np.ndarray, cats: list[str], seed: int) -> dict[str, Any]:
    """Headline ``score`` (mean of category means) with a bootstrap CI resampled within categories,
    beside the plain mean over images."""
    score = mean_of_means(per_image, cats)
    # every chain alike (s = 1 throughout) or 5 images or fewer: the Wilson bound for a mean in [-1, 1]
    # (metrics/decisions.widen_degenerate), on the Kish effective n of the category weights
    lo, hi = bootstrap_ci_strata(per_image, cats, seed=seed, level=strata_level(per_image, cats))  # expanded
    n, few = int(per_image.size), too_few_units(int(per_image.size))
    w = np.array([1.0 / cats.count(c) for c in cats] if few else [1.0])  # an image's weight in the mean of means
    n_units = float(w.sum() ** 2 / (w * w).sum()) if few else n
    ci, widened = widen_degenerate([max(lo, -1.0), min(hi, 1.0)], score, n_units, low=-1.0, high=1.0, few=few)
    if widened and few:
        method = (f"{'clopper-pearson' if n_units < 2 else 'wilson'} bound on {n} images (Kish effective n "
                  f"{n_units:.2f} of the category weights): too few images for a bootstrap (conservative)")
    elif widened:
        method = "wilson bound on n images (every image scored the same)"
    else:
        method = "bootstrap within categories, rescaled (Rao-Wu), expanded percentile"
    return {"score": score, "ci95": ci, "image_mean": float(per_image.mean()),
            "n": n, "categories": len(set(cats)),
            "interval": {"method": method, "unit": "image (stratified by category)", "n_units": n}}


def _finite(v: np.ndarray, what: str) -> np.ndarray:
    v = np.asarray(v)
    if not np.isfinite(v).all():
        raise ValueError(f"the encoder returned a non-finite embedding (NaN or inf) for {what}")
    return v
