"""VHTest (Huang et al., 2024) as released: ``Benchmark/YNQ_Benchmark/<mode>.xlsx`` (image_path,
yes_or_no_question, yes_or_no_ground_truth y/n) and ``Benchmark/Images/<mode>/``, as the authors'
``Evaluation/LLaVA/llava_ynq_version.py`` reads them.  One record per row (1,200: VHExpansion's Table 1),
category the mode, group the image.  The open-ended workbooks carry no yes/no answer and are not read.
Needs openpyxl (``vlmcheck[vhtest]``)."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from ..core import dataset_files
from ..core.files import InputFileError
from ._release import found, reason, refuse
from .base import Dataset, Record, register_form

MODES = ("counting", "shape", "color", "orientation", "size", "position", "OCR", "existence")
COLUMNS = ("image_path", "yes_or_no_question", "yes_or_no_ground_truth")


def _tables(path: Path) -> Path | None:
    if path.is_file():
        return path.parent if path.suffix.lower() == ".xlsx" and path.parent.name == "YNQ_Benchmark" else None
    for d in (path / "YNQ_Benchmark", path / "Benchmark" / "YNQ_Benchmark", path):
        if d.name == "YNQ_Benchmark" and d.is_dir():
            return d
    return None


def detect(path: Path) -> bool:
    tables = _tables(path)
    return tables is not None and any(tables.glob("*.xlsx"))


def _check_parts(book: Path) -> None:
    """The workbook under the rule for dataset files, and each of its XML parts no larger than a field may be
    (a part holds the cells; checked from the zip's directory, before anything is inflated or parsed)."""
    import zipfile

    try:
        dataset_files.check_file(book, dataset_files.current_root.get(), "workbook", dataset_files.limits().text_bytes)
    except InputFileError as exc:
        raise refuse(book, f"a VHTest workbook ({reason(book, exc)})") from None
    cap = dataset_files.limits().field_bytes
    try:
        with zipfile.ZipFile(book) as z:
            big = next((i for i in z.infolist() if i.file_size > cap), None)
            doctype = None if big else next((i.filename for i in z.infolist() if i.filename.endswith(
                (".xml", ".rels")) and _declares_doctype(z, i)), None)
    except (OSError, zipfile.BadZipFile, ValueError, EOFError, NotImplementedError) as exc:
        raise refuse(book, f"an .xlsx workbook ({type(exc).__name__}: {exc})") from None
    if big is not None:
        raise refuse(book, f"a VHTest workbook whose parts hold at most {cap} bytes ({big.filename} inflates to "
                           f"{big.file_size}; raise the limit with {dataset_files.ENV['field_bytes'][0]}=MB)")
    if doctype is not None:  # Excel never writes one; entities (nested, or naming files) are never expanded
        raise refuse(book, f"an .xlsx workbook without DOCTYPE declarations ({doctype} declares one)")


def _declares_doctype(z, info) -> bool:
    tail = b""
    with z.open(info) as fh:
        while True:
            chunk = fh.read(1 << 16)
            if not chunk:
                return False
            if b"<!DOCTYPE" in tail + chunk:
                return True
            tail = chunk[-9:]


def _rows(book: Path) -> list[dict[str, object]]:
    try:
        import openpyxl
    except ImportError:
        raise refuse(book, "a VHTest workbook, read with openpyxl, which is not installed (pip install "
                           "'vlmcheck[vhtest]')") from None
    _check_parts(book)
    rows = []
    window = dataset_files.row_window.get()
    try:
        with closing(openpyxl.load_workbook(book, read_only=True, data_only=True)) as wb:
            for row in wb.worksheets[0].iter_rows(values_only=True):  # streamed (read_only): a row at a time
                if window is not None and window.full(len(rows) - 1):
                    break
                rows.append(row)
    except Exception as exc:  # a damaged file (zipfile, KeyError, openpyxl's own errors) or the sheet's XML parsed
        # as rows are read (expat's errors: entity loops, external entities; a wrong type): all one sentence
        raise refuse(book, f"an .xlsx workbook ({type(exc).__name__}: {exc})") from None
    if not rows:
        raise refuse(book, "a VHTest workbook with a header row")
    header = [str(h).strip() if h is not None else "" for h in rows[0]]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise refuse(book, f"a VHTest YNQ workbook with columns {', '.join(COLUMNS)} (missing {', '.join(missing)})")
    return [dict(zip(header, r)) for r in rows[1:]]


@register_form("vhtest", detect=detect, benchmarks=("vhtest",),
               schema="github.com/wenhuang2000/VHTest Benchmark/YNQ_Benchmark/<mode>.xlsx + Benchmark/Images/<mode>/",
               carries=('images', 'yes/no'))
def read(path: Path, *, benchmark: str | None = None, **_) -> Dataset:
    tables = _tables(path)
    if tables is None:
        raise refuse(path, "VHTest's Benchmark/YNQ_Benchmark/ folder of <mode>.xlsx workbooks")
    books = [path] if path.is_file() else sorted(tables.glob("*.xlsx"))
    images = tables.parent / "Images"
    ds = Dataset("vhtest", "vhtest", str(path), [])
    for book in books:
        mode = next((m for m in MODES if book.stem.startswith(m)), book.stem)
        for n, row in enumerate(_rows(book), 2):
            where = f"{book.name}:{n}"
            img, q = row.get("image_path"), row.get("yes_or_no_question")
            truth = str(row.get("yes_or_no_ground_truth") or "").strip().lower()
            if img is None and q is None:
                continue  # the authors' result sheets end in a summary row; a blank row is no question
            answer = {"y": "yes", "yes": "yes", "n": "no", "no": "no"}.get(truth)
            if not img or not q or answer is None:
                ds.skipped.append((where, f"needs image_path, a question and y/n (got {truth!r})"))
                continue
            file = images / mode / str(img)
            if not file.is_file():
                ds.skipped.append((where, f"image Images/{mode}/{img} not found"))
                continue
            ds.records.append(Record(id=f"{mode}-{n - 1}", images=[str(file)], question=str(q).strip(),
                                     answer=answer, category=mode, group=f"{mode}/{img}", root=str(images)))
    return found(path, ds, "VHTest yes/no rows whose images exist", none="no rows")
