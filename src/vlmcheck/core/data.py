"""Image datasets from folders and JSONL manifests (docs/usage.md "Data").

* A folder: every image file below it; the first sub-folder level, if any, is the item's category (MME's
  layout), ids are paths relative to the folder.  A folder holding a ``manifest.jsonl``: that manifest.
* A JSONL manifest: one object per line with ``image`` (or ``path``; relative to the manifest's folder),
  optional ``id``, ``category`` and any other fields (kept in ``meta``).
* ``hfds:`` sources, Hub snapshots, TSVs and releases are read by the dataset layer (``vlmcheck.datasets``).

Every item records the folder its image must stay inside (``root``).  Loading a dataset never opens the images:
a broken file becomes that sample's error when it is used, not a crash at start-up.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .dataset_files import within_window
from .files import iter_jsonl_objects
from .printable import printable
from . import remote
from .images import IMAGE_SUFFIXES, iter_image_files
from .inputs import dataset_path


@dataclass(slots=True)
class ImageItem:
    """One dataset image (slotted: a run of a million images holds a million of these)."""

    id: str
    path: str
    category: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    #: The folder the image must stay inside (its manifest's or image folder's); see core/inputs.py.
    root: str | None = None


log = logging.getLogger("vlmcheck.data")


class DatasetError(ValueError):
    pass


def dataset_name(source: str | Path) -> str | None:
    """The name a dataset declares: ``name`` in a ``dataset.json`` in its folder (or beside its manifest), or a
    Hugging Face dataset's name (``hfds:lmms-lab/MME`` -> ``MME``); None when it declares none."""
    text = str(source)
    if text.startswith("hfds:"):
        return text[5:].split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1] or None
    path = Path(text)
    folder = path if path.is_dir() else path.parent
    try:
        name = json.loads((folder / "dataset.json").read_text(encoding="utf-8")).get("name")
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) and name.strip() else None


def load_image_dataset(source: str | Path) -> list[ImageItem]:
    if isinstance(source, str) and source.startswith("hfds:"):
        raise DatasetError(f"{source}: hfds: sources are read by the dataset layer (vlmcheck.methods.records."
                           "load_images)")
    if remote.is_url(source):  # s3://, gs://, https://, memory://...: read where it is (core/remote.py)
        return _load_url(str(source))
    src = Path(source)
    if src.is_dir() and (src / "manifest.jsonl").is_file():
        return _load_jsonl(src / "manifest.jsonl")
    if src.is_dir():
        outputs = genception_outputs(src)
        items = _folder_items(str(src), src, ((p.relative_to(src).as_posix(), str(p)) for p in iter_image_files(src)
                                              if not (outputs and any(d in outputs for d in p.parents))))
        if outputs:
            log.warning(
                "%s: left out %s: images the GenCeption authors' code generated, not seeds", src,
                ", ".join(sorted(str(d.relative_to(src)) for d in outputs)))
        return items
    if src.is_file() and src.suffix.lower() in (".jsonl", ".ndjson"):
        return _load_jsonl(src)
    if not src.exists():  # a mistyped path is missing, not of the wrong kind
        if src.is_symlink():
            raise DatasetError(f"{src}: a symbolic link to {os.readlink(src)}, which does not exist")
        raise DatasetError(f"{src}: no such file or folder")
    raise DatasetError(f"{src}: expected an image folder or a .jsonl manifest")


def genception_outputs(folder: Path) -> set[Path]:
    """The ``results_<model>/`` folders that the GenCeption authors' code (genception/experiment.py) writes
    inside a dataset's category folder: their images are the chains' generated ``<seed>_<t>.<ext>``, beside a
    ``<seed>_result.pkl``.  A ``results_*`` folder is one of them when it holds such a pickle, or when every image
    in it is named ``<stem>_<number>`` after an image of the folder above it."""
    out = set()
    for d in folder.rglob("results_*"):
        if not d.is_dir():
            continue
        images = [p for p in d.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES]
        seeds = {p.stem for p in d.parent.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES}
        named = [re.fullmatch(r"(.+)_\d+", p.stem) for p in images]
        if any(d.glob("*_result.pkl")) or (images and all(m and m.group(1) in seeds for m in named)):
            out.add(d)
    return out


def _load_url(url: str) -> list[ImageItem]:
    if posixpath.splitext(url.rstrip("/"))[1].lower() in (".jsonl", ".ndjson"):
        return _load_jsonl(url)
    root = url.rstrip("/")
    return _folder_items(root, url, ((image[len(root):].lstrip("/"), image)
                                     for image in remote.image_urls(root, IMAGE_SUFFIXES)))


def _folder_items(root: str, name: Any, found: Iterable[tuple[str, str]]) -> list[ImageItem]:
    """The items of the image folder ``root`` (named ``name``) from its (path relative to it, path) pairs: ids
    are the relative paths, the first sub-folder is the category."""
    items = [ImageItem(id=printable(rel), path=path, category=rel.split("/")[0] if "/" in rel else None, root=root)
             for rel, path in found]
    if not items:
        raise DatasetError(f"{name}: no image files found")
    return items


_NO_META: dict[str, Any] = {}  # one shared empty dict for the rows with no other fields (never written to)


def _load_jsonl(path: Path | str) -> list[ImageItem]:
    items: list[ImageItem] = []
    seen: set[str] = set()
    if remote.is_url(path):
        root = remote.parent(str(path))
        rows = iter_jsonl_objects(path, "manifest", text=remote.read_text(str(path), "manifest"))
    else:
        root = str(path.parent)  # one string for every item
        rows = iter_jsonl_objects(path, "manifest")
    warned: set[str] = set()
    for lineno, row in within_window(rows):  # --limit N: the first N rows (dataset_files.first_rows)
        if "image" in row and "path" in row and "both" not in warned:
            warned.add("both")  # the path would be kept as metadata, unread
            log.warning("%s:%d: both 'image' and 'path' are given; the image read is 'image' (%s), 'path' is "
                        "ignored", path, lineno, row["image"])
        _warn_unknown_fields(path, lineno, row, warned)
        image = row.pop("image", None) or row.pop("path", None)
        if not isinstance(image, str):
            raise DatasetError(f"{path}:{lineno}: missing 'image' (or 'path') field")
        full = dataset_path(root, image)
        raw_id = row.pop("id", image)
        if not isinstance(raw_id, (str, int)) or isinstance(raw_id, bool):
            raise DatasetError(f"{path}:{lineno}: 'id' must be a string or an integer, not a {type(raw_id).__name__}")
        if isinstance(raw_id, str) and not raw_id.strip():
            raise DatasetError(f"{path}:{lineno}: 'id' is empty; give each row a name, or leave 'id' out to name "
                               "it by its image")
        item_id = str(raw_id)
        if item_id in seen:
            raise DatasetError(f"{path}:{lineno}: duplicate id {item_id!r}")
        seen.add(item_id)
        category = row.pop("category", None)
        if category is not None and not isinstance(category, (str, int)):
            raise DatasetError(f"{path}:{lineno}: 'category' must be a string, not a {type(category).__name__}")
        if isinstance(category, str) and not category.strip():
            raise DatasetError(f"{path}:{lineno}: 'category' is empty; leave it out for a row without a category")
        category = None if category is None else str(category)
        prompt = row.get("prompt")
        if prompt is not None and (not isinstance(prompt, str) or not prompt.strip()):
            raise DatasetError(f"{path}:{lineno}: 'prompt' must be a non-empty string (the question put to the "
                               f"model), not {prompt!r}")
        keywords = row.get("keywords")
        if keywords is not None and (not isinstance(keywords, list)
                                     or not all(isinstance(k, str) and k.strip() for k in keywords)):
            raise DatasetError(f"{path}:{lineno}: 'keywords' must be a list of words (strings), e.g. "
                               "[\"cat|kitten\", \"mat\"]")
        items.append(ImageItem(id=item_id, path=full, category=category, meta=row or _NO_META, root=root))
    return items  # never empty: iter_jsonl_objects refuses a manifest without a row


#: the fields of a manifest row that vlmcheck reads; any other is kept as the item's metadata, unread
KNOWN_FIELDS = ("id", "image", "path", "category", "prompt", "keywords", "description", "questions", "scene",
                "objects", "captions", "group")


#: other datasets' usual fields, close in spelling to one of ours but no misspelling of it (VQA rows, MMBench)
_COMMON_FIELDS = frozenset({"question", "answer", "options", "hint", "label", "index"})


def _warn_unknown_fields(path: Any, lineno: int, row: dict[str, Any], warned: set[str]) -> None:
    """One warning per manifest and field for a field that looks like a misspelt known one (``promt``,
    ``catgory``, ``keyword``): it would be kept as metadata and never read, silently."""
    import difflib

    for key in row:
        if key in KNOWN_FIELDS or key in warned or not isinstance(key, str) or len(key) < 4 \
                or key.lower() in _COMMON_FIELDS:
            continue
        close = difflib.get_close_matches(key.lower(), KNOWN_FIELDS, n=1, cutoff=0.8)
        if close:
            warned.add(key)
            log.warning("%s:%d: field %r is not one vlmcheck reads (did you mean %r?); it is kept as metadata, "
                        "unread", path, lineno, key, close[0])


def hfds_cache_root() -> Path:
    """Where ``hfds:`` images are written (``$VLMCHECK_CACHE/hfds``, by default ``~/.cache/vlmcheck/hfds``)."""
    return Path(os.environ.get("VLMCHECK_CACHE", Path.home() / ".cache" / "vlmcheck")) / "hfds"
