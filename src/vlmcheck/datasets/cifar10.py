"""CIFAR-10 as released for Python (``cifar-10-batches-py/``): one record per image of the split (``test`` by
default), options the class names, answer the label index.  The images are written as PNG to a content-addressed
store in ``$VLMCHECK_CACHE/releases/cifar10/``; a reuse skips the encoding through an index named by the batch's
SHA-256, each file used only where its bytes still hash to its name.  Batches are unpickled by a loader that
accepts only NumPy arrays and plain values, so a file that is not what it claims cannot run code."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import pickle
from pathlib import Path
from typing import Any

from ..core.data import hfds_cache_root
from ..core.dataset_files import current_root, read_bytes
from ..core.files import InputFileError, write_text_atomic
from ._release import inner, reason, refuse
from .base import Dataset, Record, register_form
from .imagestore import ImageStore

TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
_ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
            ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")}


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a CIFAR batch")
        return super().find_class(module, name)


def detect(path: Path) -> bool:
    folder = inner(path, "cifar-10-batches-py")
    return path.is_dir() and (folder / "batches.meta").is_file() and (folder / "test_batch").is_file()


def _load(file: Path) -> tuple[dict[str, Any], str]:
    """The batch's dict and the SHA-256 of its bytes."""
    try:
        data = read_bytes(file, current_root.get(), "CIFAR-10 batch")  # a regular file, inside, within the cap
    except InputFileError as exc:
        raise refuse(file, f"a CIFAR-10 python batch ({reason(file, exc)})") from None
    try:
        # from the bytes read, so a length the pickle claims is never more than the file holds
        raw = _SafeUnpickler(io.BytesIO(data), encoding="bytes").load()
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError,
            KeyError, MemoryError, OverflowError, RecursionError) as exc:
        raise refuse(file, f"a CIFAR-10 python batch (a pickled dict; {type(exc).__name__}: {exc})") from None
    if not isinstance(raw, dict):
        raise refuse(file, "a CIFAR-10 python batch (a pickled dict)")
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in raw.items()}, hashlib.sha256(data).hexdigest()


def _index(cache: Path, batch_sha: str) -> list[str | None]:
    """The cached files (paths under ``cache``) of a batch's images by the batch's SHA-256, or [] if none."""
    try:
        names = json.loads((cache / "index" / f"{batch_sha}.json").read_text())
    except (OSError, ValueError):
        return []
    return names if isinstance(names, list) else []


def _intact(cache: Path, name: Any) -> str | None:
    """The path of cached file ``name`` where the SHA-256 of its bytes is its name still, else None."""
    if not isinstance(name, str) or "/" not in name or ".." in name:
        return None
    path = cache / name
    try:
        return str(path) if hashlib.sha256(path.read_bytes()).hexdigest() == path.stem else None
    except OSError:
        return None


def _png(pixels: Any) -> bytes:
    import numpy as np
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels, dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


@register_form("cifar10", detect=detect, benchmarks=("cifar10", "cifar-10"),
               schema="cs.toronto.edu/~kriz/cifar.html (CIFAR-10 python version: cifar-10-batches-py/)",
               carries=('images', 'classes'))
def read(path: Path, *, benchmark: str | None = None, split: str = "test", **_) -> Dataset:
    import numpy as np

    folder = inner(path, "cifar-10-batches-py")
    if split not in ("test", "train"):
        raise refuse(folder, f"split test or train (not {split!r})")
    label_names = _load(folder / "batches.meta")[0].get("label_names", [])
    names = [n.decode("utf-8", "replace") if isinstance(n, bytes) else str(n)
             for n in (label_names if isinstance(label_names, (list, tuple)) else [])]
    if len(names) < 2:
        raise refuse(folder / "batches.meta", "CIFAR's batches.meta with its label_names")
    files = [folder / "test_batch"] if split == "test" else [folder / b for b in TRAIN]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise refuse(folder, f"the batch file(s) {', '.join(missing)}")
    store = ImageStore(hfds_cache_root().parent / "releases" / "cifar10")  # $VLMCHECK_CACHE/releases/cifar10
    cache = store.root
    ds = Dataset("cifar10", "cifar10", str(folder), [], notes=[f"split {split!r}; images in {cache}"])
    for f in files:
        batch, digest = _load(f)
        known = _index(cache, digest)
        data, labels = batch.get("data"), batch.get("labels")
        fnames = batch.get("filenames") or []
        if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072 \
                or not isinstance(labels, (list, tuple, np.ndarray)) or len(labels) != len(data) \
                or not isinstance(fnames, (list, tuple, np.ndarray)):
            raise refuse(f, "a CIFAR-10 batch (data N x 3072 uint8, N labels and a list of filenames)")
        pixels = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        cached: list[str | None] = [None] * len(labels)  # each image's file under the cache, by position
        for i, label in enumerate(labels):
            try:
                label = int(label)
            except (TypeError, ValueError, OverflowError):
                ds.skipped.append((f"{f.name}[{i}]", f"label {str(label)[:40]!r} is not a whole number"))
                continue
            if not 0 <= label < len(names):
                ds.skipped.append((f"{f.name}[{i}]", f"label {label} outside the {len(names)} label_names"))
                continue
            img = _intact(cache, known[i]) if i < len(known) else None
            if img is None:
                try:
                    img = store.put(_png(pixels[i]))
                except OSError as exc:
                    raise refuse(cache, f"a cache folder the images can be written to ({exc.strerror or exc}); "
                                 "free space there or point VLMCHECK_CACHE elsewhere") from None
            cached[i] = Path(img).relative_to(cache).as_posix()
            fname = fnames[i].decode("utf-8", "replace") if i < len(fnames) and isinstance(fnames[i], bytes) else None
            ds.records.append(Record(id=f"{f.name}-{i}", images=[img], options=list(names), answer=label,
                                     category=names[label], split=split, root=str(cache),
                                     meta={"filename": fname} if fname else {}))
        if store.write and cached != known:
            _write_index(cache, digest, cached)
    return ds


def _write_index(cache: Path, batch_sha: str, names: list[str | None]) -> None:
    try:
        (cache / "index").mkdir(parents=True, exist_ok=True)
        write_text_atomic(cache / "index" / f"{batch_sha}.json", json.dumps(names))
    except OSError as exc:  # the images are stored; the next read encodes them again
        logging.getLogger("vlmcheck").warning("%s: the index of a CIFAR-10 batch not written (%s)", cache,
                                              exc.strerror or exc)

