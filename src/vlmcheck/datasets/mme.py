"""MME (Fu et al., 2023) as released: ``[MME_Benchmark/]<category>/`` folders, either ``images/`` with
``questions_answers_YN/*.txt`` or images and ``.txt`` side by side; each ``.txt`` names its image by its stem and
holds ``question<TAB>Yes`` and ``question<TAB>No``.  One record per question, category the folder (MME's 14, the
names GenCeption's MMECeption groups into 10 visual and 4 textual; another folder laid out the same way is read
and named in the notes), group the image.  Only images a ``.txt`` names are read, never the ``results_<model>/``
folders the GenCeption authors' code writes."""

from __future__ import annotations

from pathlib import Path

from ._release import found, image_in, inner, refuse, text
from .base import Dataset, Record, register_form
from .official import Answer, declare, grouped

CATEGORIES = ("existence", "count", "position", "color", "posters", "celebrity", "scene", "landmark", "artwork",
              "OCR", "commonsense_reasoning", "numerical_calculation", "text_translation", "code_reasoning")


def _laid_out(folder: Path) -> bool:
    """A category folder in one of MME's two layouts."""
    return (folder / "questions_answers_YN").is_dir() or any(folder.glob("*.txt"))


def detect(path: Path) -> bool:
    root = inner(path, "MME_Benchmark")
    return path.is_dir() and any((root / c).is_dir() and _laid_out(root / c) for c in CATEGORIES)


@register_form("mme", detect=detect, benchmarks=("mme",),
               schema="MME_Benchmark_release_version.zip (github.com/BradyFU/Awesome-Multimodal-Large-Language-"
                      "Models, Evaluation): <category>/[images/]*.jpg + [questions_answers_YN/]*.txt",
               carries=('images', 'yes/no'))
def read(path: Path, *, benchmark: str | None = None, **_) -> Dataset:
    root = inner(path, "MME_Benchmark")
    # MME's 14 category folders first, in the paper's order, then any other sub-folder laid out as one
    others = sorted(p for p in root.iterdir() if p.is_dir() and p.name not in CATEGORIES and _laid_out(p))
    cats = [root / c for c in CATEGORIES if (root / c).is_dir()] + others
    if not cats:
        raise refuse(path, f"MME's release folder (category folders such as {', '.join(CATEGORIES[:4])}, ...)")
    ds = Dataset("mme", "mme", str(path), [])
    if others:
        ds.notes.append("categories that are not among MME's 14, read as laid out: "
                        + ", ".join(p.name for p in others))
    for cat in cats:
        qa = cat / "questions_answers_YN"
        txts, pics = (sorted(qa.glob("*.txt")), cat / "images") if qa.is_dir() else (sorted(cat.glob("*.txt")), cat)
        if not txts:
            ds.skipped.append((cat.name, "no question files (.txt)"))
            continue
        for txt in txts:
            img = image_in(pics, txt.stem)
            where = f"{cat.name}/{txt.name}"
            if img is None:
                ds.skipped.append((where, f"no image {txt.stem}.jpg/.png in {pics.relative_to(root)}"))
                continue
            lines = [ln for ln in text(txt, "MME's question file (question<TAB>Yes/No per line)").splitlines()
                     if ln.strip()]
            for k, line in enumerate(lines, 1):
                question, sep, answer = line.rpartition("\t")
                answer = answer.strip().lower()
                if not sep or answer not in ("yes", "no") or not question.strip():
                    ds.skipped.append((f"{where}:{k}", "not 'question<TAB>Yes' or 'question<TAB>No'"))
                    continue
                ds.records.append(Record(id=f"{cat.name}/{img.name}#{k}", images=[str(img)],
                                         question=question.strip(), answer=answer, category=cat.name,
                                         group=f"{cat.name}/{img.name}", root=str(root)))
    return found(path, ds, "MME questions", "files ")


#: MME's two scores: the first ten categories are perception, the last four cognition (MME's calculation script)
PERCEPTION, COGNITION = CATEGORIES[:10], CATEGORIES[10:]


@declare("mme", "MME score (perception, cognition)",
         "MME's eval_tool/calculation.py (BradyFU/Awesome-Multimodal-Large-Language-Models); lmms-eval's mme task")
def mme_score(answers: list[Answer]) -> dict:
    """Per category: accuracy (share of its questions right) + accuracy+ (share of its images with every question
    right, MME's two per image), each x 100; the perception score sums the 10 perception categories, the
    cognition score the 4 cognition ones.  Sums of shares: no interval.  A category outside MME's 14 is listed
    and counted in neither score."""
    per: dict[str, dict] = {}
    for cat in dict.fromkeys(a.category for a in answers):
        mine = [a for a in answers if a.category == cat]
        images = grouped(a if a.group is not None else Answer(a.unit, a.correct, a.category, a.unit)
                         for a in mine)
        acc = 100 * sum(a.correct for a in mine) / len(mine)
        acc_plus = 100 * sum(all(a.correct for a in qs) for qs in images.values()) / len(images)
        per[str(cat)] = {"accuracy": acc, "accuracy_plus": acc_plus, "score": acc + acc_plus,
                         "questions": len(mine), "images": len(images),
                         "single_question_images": sum(len(qs) == 1 for qs in images.values())}
    out: dict = {}
    for name, cats in (("perception", PERCEPTION), ("cognition", COGNITION)):
        have = [c for c in cats if c in per]
        if have:
            out[name] = {"value": sum(per[c]["score"] for c in have), "ci95": None, "categories": len(have),
                         "of": len(cats)}
    out["categories"] = per
    notes = []
    other = [c for c in per if c not in CATEGORIES]
    if other:
        notes.append(f"categories outside MME's 14, in neither score: {', '.join(other)}")
    missing = [c for c in CATEGORIES if c not in per and any(c2 in per for c2 in CATEGORIES)]
    if missing:
        notes.append(f"MME categories not in this run (their scores are missing from the sums): {', '.join(missing)}")
    if any(v["single_question_images"] for v in per.values()):
        notes.append("images with one answered question (the other failed or is not in the data): accuracy+ "
                     "counts them on that one")
    if notes:
        out["notes"] = notes
    return out
