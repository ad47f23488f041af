"""Fine-tuning data from finished VHExpansion runs (VHExpansion section 5.4; docs/methods.md, "Fine-tuning on
expanded cases"): each case on a training image gives one row per image variant and per question (the original
and its checked negation), each question rephrased ``k`` times by any ``TextModel``, optionally mixed with a general
VQA set.  Images are split by source image (a hash of the original file), seeded, so no evaluated image, nor any
version of it, is trained on; the held-out cases are written as ``heldout.jsonl`` for ``vhx run``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ..core.files import InputFileError, read_results, read_text_input, write_text_atomic
from .compare import dataset_of, done_records
from ..methods.vhx_cases import require_vhx_run
from ..core.messages import Message
from ..core.roles import GenerationConfig
from ..world.paraphraser import PARAPHRASE_PROMPT

DEFAULT_K = 4
ANSWER_TEXT = {"yes": "Yes", "no": "No"}  # LLaVA's short-answer style


def _file_digest(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def split_images(digests: list[str], train_fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """Seeded split of source images: (train, held-out), each sorted.  At least one image on each side when
    there are two or more."""
    unique = sorted(set(digests))
    order = np.random.default_rng(seed).permutation(len(unique))
    n_train = int(round(train_fraction * len(unique)))
    if len(unique) >= 2:
        n_train = min(max(n_train, 1), len(unique) - 1)
    train = sorted(unique[i] for i in order[:n_train])
    return train, sorted(unique[i] for i in order[n_train:])


async def _rephrase_all(model: Any, questions: list[str], k: int) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """``k`` rephrasings of every question; counts of what was left out and why."""
    sem = asyncio.Semaphore(8)
    skipped: dict[str, Any] = {"failed": 0, "unchanged_or_repeated": 0, "first_error": None}

    async def one(q: str, version: int) -> str | None:
        async with sem:
            try:
                g = await model.generate([Message.user(PARAPHRASE_PROMPT.format(version=version, k=k, question=q))],
                                         GenerationConfig(max_tokens=96, temperature=0.0, seed=version))
            except Exception as exc:  # noqa: BLE001 - a failed rephrasing is counted and left out
                skipped["failed"] += 1
                skipped["first_error"] = skipped["first_error"] or " ".join(f"{type(exc).__name__}: {exc}".split())
                return None
        text = " ".join(g.text.split()).strip().strip('"')
        return text or None

    async def versions(q: str) -> list[str]:
        got = await asyncio.gather(*(one(q, v) for v in range(1, k + 1)))
        out, seen = [], {q.strip().lower()}
        for text in got:
            if text is None:
                continue
            if text.lower() in seen:
                skipped["unchanged_or_repeated"] += 1
                continue
            seen.add(text.lower())
            out.append(text)
        return out

    results = await asyncio.gather(*(versions(q) for q in questions))
    return dict(zip(questions, results)), skipped


def read_llava(path: Path, what: str) -> list[dict[str, Any]]:
    """A LLaVA-format JSON list (``image`` relative to the file's folder, ``conversations`` of human/gpt turns)."""
    try:
        rows = json.loads(read_text_input(path, what))
    except ValueError as exc:
        raise InputFileError(f"{path}: not JSON ({exc})") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and isinstance(r.get("conversations"), list)
                                            for r in rows):
        raise InputFileError(f"{path}: expected a JSON list of LLaVA records with 'conversations'")
    return rows


#: the paper's expansion for fine-tuning: negation x {original, adversarial} ("adversarial": any adv_* variant)
DEFAULT_VARIANTS = ("original", "adversarial")


def build_dataset(runs: list[str | Path], out: str | Path, rephraser: Any = None, k: int = DEFAULT_K,
                  train_fraction: float = 0.5, seed: int = 0, vqa: str | Path | None = None, vqa_n: int = 4000,
                  variants: list[str] | tuple[str, ...] | None = None) -> dict[str, Any]:
    """Build the fine-tuning data (see the module docstring); return what ``build.json`` holds."""
    variants = tuple(variants) if variants else DEFAULT_VARIANTS
    if not runs:
        raise InputFileError("give at least one finished VHExpansion run folder")
    if not 0 < train_fraction < 1:
        raise InputFileError(f"train fraction {train_fraction} must lie strictly between 0 and 1")
    if k < 0:
        raise InputFileError(f"k={k}: the number of rephrasings cannot be negative")
    if k and rephraser is None:
        raise InputFileError(f"k={k} rephrasings need a rephraser model (e.g. ref:paraphraser); or pass k=0")
    out = Path(out)

    # 1. every finished case with its source image (read before the output folder is made: a mistyped run
    # folder leaves nothing behind)
    cases: list[dict[str, Any]] = []
    for run in map(Path, runs):
        results = read_results(run)
        require_vhx_run(results, run, "vhx dataset takes VHExpansion runs (vlmcheck vhx run)")
        spec = results.get("spec") or {}
        cases_file = Path(str((spec.get("task_spec") or spec).get("cases") or "cases"))
        cases_name = cases_file.name if cases_file.is_dir() else cases_file.stem  # cases naming no dataset of theirs
        for rec in done_records(run):
            r = rec["result"]
            src = Path(r["image"])
            if not src.is_file():
                raise InputFileError(f"{run}: case {rec['sample_id']}'s image {src} is gone")
            cases.append({"run": run, "id": rec["sample_id"], "result": r, "digest": _file_digest(src),
                          "dataset": dataset_of(r, cases_name)})
    if not cases:
        raise InputFileError("the runs have no finished cases")
    (out / "images").mkdir(parents=True, exist_ok=True)
    train_imgs, held_imgs = split_images([c["digest"] for c in cases], train_fraction, seed)
    train_set = set(train_imgs)

    def copy_image(path: Path) -> str:
        digest = _file_digest(path)
        dest = out / "images" / f"{digest[:20]}{path.suffix.lower() or '.png'}"
        if not dest.exists():
            shutil.copyfile(path, dest)
        return f"images/{dest.name}"

    # 2. the expanded training rows (before rephrasing), one per (image variant, question), deduplicated
    base_rows: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    heldout: list[dict[str, Any]] = []
    for c in cases:
        r = c["result"]
        if c["digest"] not in train_set:
            heldout.append({"id": c["id"], "image": copy_image(Path(r["image"])), "question": r["question"],
                            "answer": r["answer"], "dataset": c["dataset"], "source_run": str(c["run"])})
            continue
        neg = r.get("negation") or {}
        for name, v in r["variants"].items():
            # the blind control carries no image to train on
            if name == "blind" or not (name in variants or name.startswith("adv_") and "adversarial" in variants):
                continue
            image = copy_image(Path(r["image"]) if name == "original" else c["run"] / v["image"])
            questions = [(r["question"], r["answer"], "original")]
            if neg.get("ok") and neg.get("question"):
                questions.append((neg["question"], neg["answer"], "negated"))
            for q, a, kind in questions:
                if (image, q) in seen:
                    continue
                seen.add((image, q))
                base_rows.append({"image": image, "question": q, "answer": a, "dataset": c["dataset"],
                                  "source_case": c["id"], "source_run": str(c["run"]), "variant": name,
                                  "question_kind": kind, "rephrase_of": None})

    # 3. k rephrasings of each distinct question
    skipped: dict[str, Any] = {"failed": 0, "unchanged_or_repeated": 0, "first_error": None}
    rows = list(base_rows)
    if k:
        distinct = sorted({row["question"] for row in base_rows})
        versions, skipped = asyncio.run(_rephrase_all(rephraser, distinct, k))
        if distinct and skipped["failed"] == len(distinct) * k:
            raise InputFileError(f"all {skipped['failed']} rephrasings failed ({skipped['first_error']}); check "
                                 "--rephraser, or pass --k 0 for no rephrasing")
        for row in base_rows:
            for i, text in enumerate(versions[row["question"]], start=1):
                rows.append({**row, "question": text, "question_kind": f"{row['question_kind']}_rephrased_{i}",
                             "rephrase_of": row["question"]})
    for i, row in enumerate(rows):
        row["id"] = f"vh-{i}"

    # 4. the general VQA mix
    vqa_rows: list[dict[str, Any]] = []
    if vqa is not None:
        vqa = Path(vqa)
        from ..core.inputs import confine

        mix = read_llava(vqa, "VQA file")  # vqa_n seeded samples; rows without an image are kept (text-only)
        for j, i in enumerate(sorted(np.random.default_rng(seed).permutation(len(mix))[:vqa_n])):
            rec = mix[i]
            item = {"id": f"vqa-{j}", "conversations": rec["conversations"], "dataset": f"vqa:{vqa.stem}"}
            if rec.get("image"):
                src = vqa.parent / str(rec["image"])
                confine(src, vqa.parent, False)
                if not src.is_file():
                    raise InputFileError(f"{vqa}: record {j}'s image {src} does not exist")
                item["image"] = copy_image(src)
            vqa_rows.append(item)

    llava = [{"id": row["id"], "image": row["image"],
              "conversations": [{"from": "human", "value": "<image>\n" + row["question"]},
                                {"from": "gpt", "value": ANSWER_TEXT[row["answer"]]}]} for row in rows]
    llava += [{k_: v for k_, v in item.items() if k_ != "dataset"} for item in vqa_rows]
    order = np.random.default_rng(seed).permutation(len(llava))
    llava = [llava[i] for i in order]

    write_text_atomic(out / "train.jsonl", "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in rows + vqa_rows))
    write_text_atomic(out / "llava.json", json.dumps(llava, ensure_ascii=False, indent=1) + "\n")
    write_text_atomic(out / "heldout.jsonl", "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in heldout))
    kinds = Counter(row["question_kind"].split("_rephrased_")[0] + ("_rephrased" if row["rephrase_of"] else "")
                    for row in rows)
    build = {
        "runs": [str(r) for r in runs], "k": k, "variants": list(variants),
        "rephraser": getattr(rephraser, "model_id", None) if k else None,
        "seed": seed, "train_fraction": train_fraction,
        "split": {"by": "sha256 of the source image file", "train_images": train_imgs, "heldout_images": held_imgs},
        "counts": {"cases": len(cases), "train_images": len(train_imgs), "heldout_images": len(held_imgs),
                   "expanded_rows": len(base_rows), "rephrased_rows": len(rows) - len(base_rows),
                   "train_rows": len(rows), "vqa_rows": len(vqa_rows), "heldout_cases": len(heldout),
                   "by_kind": dict(kinds), "rephrasings_left_out": skipped},
        "vqa": {"file": str(vqa), "n": len(vqa_rows)} if vqa is not None else None,
    }
    build["hf_dataset"] = _write_hf(out, rows + vqa_rows, heldout)
    write_text_atomic(out / "build.json", json.dumps(build, indent=2) + "\n")
    return build


def _write_hf(out: Path, train: list[dict[str, Any]], heldout: list[dict[str, Any]]) -> str | None:
    """The same rows as a Hugging Face ``DatasetDict`` (images embedded) under ``out/hf``; None without
    ``datasets``."""
    try:
        import datasets
    except ImportError:
        return None

    def table(rows: list[dict[str, Any]]) -> "datasets.Dataset":
        cols = {key: [row.get(key) for row in rows] for key in ("id", "image", "question", "answer", "dataset")}
        cols["image"] = [str(out / image) if image else None for image in cols["image"]]
        cols["conversations"] = [json.dumps(row["conversations"]) if "conversations" in row else None for row in rows]
        return datasets.Dataset.from_dict(cols).cast_column("image", datasets.Image())

    target = out / "hf"
    if target.exists():
        shutil.rmtree(target)
    was_on = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # vlmcheck prints its own one-line summary
    try:
        datasets.DatasetDict({"train": table(train), "heldout": table(heldout)}).save_to_disk(str(target))
    finally:
        if was_on:
            datasets.enable_progress_bars()
    return "hf"
