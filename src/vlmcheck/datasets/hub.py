"""Hugging Face forms (docs/datasets.md, "Generic forms"): a Hub snapshot folder, a ``save_to_disk`` folder, and
``hfds:ORG/NAME`` from the local Hugging Face cache, offline (or ``hfds:PATH``, a local folder in either form).

Their shards (:mod:`.shards`) are read with pyarrow a batch at a time; an Image column (``struct<bytes, path>``) or
a list of them is found from the arrow type, so ``datasets`` need not be installed.  Embedded image bytes go to the
content store (:mod:`.imagestore`) as they are; an image cell holding only a path stays in the dataset's folder,
confined to it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from ..core import dataset_files
from ..core.inputs import active_policy
from .base import (Dataset, DatasetFormError, _check_options, detect, forms, item_rules, items_rule, recognise,
                   register_form, register_scheme)
from .columns import Columns, Refused, check_unique, record
from .imagestore import ImageStore
from .shards import choose, iter_rows, saved_splits, shard_files, shard_schema, snapshot_splits

SCHEMA_SNAPSHOT = "Hub dataset repository layout: README.md YAML `configs` + data/<split>-*.parquet " \
                  "(huggingface.co/docs/hub/datasets-manual-configuration)"
SCHEMA_SAVED = "datasets.Dataset.save_to_disk: state.json, dataset_info.json, data-*.arrow (dataset_dict.json " \
               "for a DatasetDict)"


def is_snapshot(path: Path) -> bool:
    return path.is_dir() and ((path / "README.md").is_file() or (path / "dataset_infos.json").is_file()) \
        and not is_saved(path) and bool(shard_files(path))


def is_saved(path: Path) -> bool:
    return path.is_dir() and ((path / "dataset_dict.json").is_file()
                              or ((path / "state.json").is_file() and (path / "dataset_info.json").is_file()))


def image_columns(schema: Any) -> tuple[list[str], list[str]]:
    """(Image columns, list-of-Image columns) of an arrow schema (an Image is ``struct<bytes, path>``)."""
    import pyarrow as pa

    def is_image(t: Any) -> bool:
        return isinstance(t, pa.StructType) and {f.name for f in t} == {"bytes", "path"}

    return ([f.name for f in schema if is_image(f.type)],
            [f.name for f in schema if isinstance(f.type, (pa.ListType, pa.LargeListType))
             and is_image(f.type.value_type)])


def class_names(schema: Any) -> dict[str, list[str]]:
    """column -> its ClassLabel names, from the ``huggingface`` features kept in the shards' schema."""
    try:
        meta = json.loads((schema.metadata or {}).get(b"huggingface", b"{}"))
        feats = meta.get("info", {}).get("features", {})
    except (ValueError, AttributeError):
        return {}
    return {c: [str(n) for n in f["names"]] for c, f in feats.items()
            if isinstance(f, dict) and f.get("_type") == "ClassLabel" and isinstance(f.get("names"), list)}


def _cell_images(cell: Any, folder: Path, store: ImageStore) -> tuple[list[str], bool]:
    """(paths, from_paths) of one Image cell or list of them; ``from_paths``: a cell held a path, not bytes."""
    cells = cell if isinstance(cell, list) else [cell]
    limits, max_image = dataset_files.limits(), active_policy.get().max_file_bytes
    if len(cells) > limits.images_per_item:  # refused before any is stored
        raise Refused(f"lists {len(cells)} images, more than the {limits.images_per_item} an item may hold "
                       f"(raise it with {dataset_files.ENV['images_per_item'][0]})")
    parts = [(c.get("bytes"), c.get("path")) if isinstance(c, dict) else (c, None) if isinstance(c, (bytes, bytearray))
             else (None, str(c)) for c in cells if c is not None]
    big = next((len(data) for data, _ in parts if data and len(data) > max_image), None)
    if big is not None:
        raise Refused(f"image of {big} bytes exceeds the image file size limit of {max_image} bytes (--max-image-mb)")
    out, from_paths = [], False
    for data, path in parts:
        if data:
            out.append(store.put(bytes(data)))
        elif path:
            out.append(str(folder / path))  # an absolute path stays itself
            from_paths = True
    if from_paths and len(out) != len(cells):
        raise Refused("mixes embedded images and image paths")
    return out, from_paths


def read_table(folder: Path, form: str, benchmark: str | None, params: dict[str, str],
               chosen: tuple[str, str, list[Path], list[str]]) -> Dataset:
    """Records from the shards of the split :func:`~.shards.choose` chose (shared by both Hugging Face forms)."""
    config, split, files, notes = chosen
    if config != "default":
        notes.insert(0, f"config {config!r}")
    source, store = str(folder), ImageStore()
    schema = shard_schema(files[0])
    names = list(schema.names)
    single, lists = image_columns(schema)
    image_col = params.get("image_column")
    if image_col is not None and image_col not in names:
        raise DatasetFormError(f"{source}: image_column={image_col!r}: no such column (columns: {', '.join(names)})")
    if image_col is None:
        image_col = (single or lists or [None])[0]
        if len(single) + len(lists) > 1:
            notes.append(f"image column {image_col!r} used (others: "
                         f"{', '.join(c for c in single + lists if c != image_col)}; pass ?image_column=NAME)")
    cols = Columns(names, params, skip=tuple(c for c in (image_col, *single, *lists) if c))  # never meta
    notes.append(f"columns: {cols.describe()}" + (f", image={image_col}" if image_col else ", no image column"))
    id_col, explicit_id = cols.role["id"], "id_column" in params
    labels = class_names(schema)
    if labels:
        notes.append("class labels named: " + ", ".join(f"{c} ({len(n)} classes)" for c, n in labels.items()))
    records, skipped, ids = [], [], []
    window = dataset_files.row_window.get()
    for i, row in enumerate(iter_rows(files)):
        if window is not None and window.full(len(records)):
            notes.append(f"the first {len(records)} rows read, the rest not")
            break
        for c, names_ in labels.items():
            v = row.get(c)
            if isinstance(v, int) and 0 <= v < len(names_):
                row[c] = names_[v]
        where = f"{split} row {i}"
        try:
            images, from_paths = _cell_images(row.get(image_col), folder, store) if image_col else ([], False)
        except Refused as exc:
            skipped.append((where, str(exc)))
            continue
        except OSError as exc:
            skipped.append((where, f"image not stored ({exc.strerror or exc})"))
            continue
        root = str(folder) if from_paths else str(store.root)
        ids.append(str(row.get(id_col)))
        records.append(record(row, cols, str(i), images, root, split=split))
    if id_col and (explicit_id or len(set(ids)) == len(ids)):
        for r, v in zip(records, ids):
            r.id = v
        check_unique(records, source, id_col)
    elif id_col:
        notes.append(f"ids: row numbers ({id_col!r} repeats: {len(ids)} rows, {len(set(ids))} values)")
        for r, v in zip(records, ids):
            r.meta[id_col] = v
    if not records:
        raise DatasetFormError(f"{source}: split {split!r} has no rows" + (
            f" that could be read ({len(skipped)} skipped: {skipped[0][1]})" if skipped else ""))
    no_image = sum(1 for r in records if not r.images)
    if no_image:
        notes.append(f"{no_image} rows without an image (text-only)")
    ds = Dataset(form=form, benchmark=benchmark, source=source, records=records, skipped=skipped, notes=notes,
                 splits=[split], columns=names, config=None if config == "default" else config)
    # what a benchmark's Hub copies need beyond this reader: the benchmark named, else one its columns or rows show
    rule = items_rule(benchmark) if benchmark else next((r for r in item_rules().values() if r.hub_copy is not None
                                                         and r.recognise is not None and r.recognise(ds)), None)
    if rule is not None and rule.hub_copy is not None:
        ds.benchmark = rule.benchmark
        rule.hub_copy(ds)
    return ds


def _recognised(splits: dict[str, dict[str, list[Path]]], source: str) -> Any:
    """The rule of the benchmark a snapshot is a copy of, from its first shard's columns, or None."""
    first = next((f[0] for s in splits.values() for f in s.values() if f), None)
    try:
        names = list(shard_schema(first).names) if first is not None else []
    except Exception:  # an unreadable shard is said where it is read, with its file's name
        return None
    return recognise(Dataset("hf-snapshot", None, source, [], columns=names))


@register_form("hf-snapshot", detect=is_snapshot, schema=SCHEMA_SNAPSHOT,
               options=("split", "config", "name", "*_column"))
def read_snapshot(path: Path, *, benchmark: str | None = None, **params: Any) -> Dataset:
    params = {k: str(v) for k, v in params.items() if v is not None}
    splits = snapshot_splits(path)
    rule = items_rule(benchmark) if benchmark else _recognised(splits, str(path))
    config, split = params.pop("config", None) or params.pop("name", None), params.pop("split", None)
    return read_table(path, "hf-snapshot", benchmark, params, choose(splits, config, split, str(path), rule))


@register_form("hf-saved", detect=is_saved, schema=SCHEMA_SAVED, options=("split", "*_column"))
def read_saved(path: Path, *, benchmark: str | None = None, **params: Any) -> Dataset:
    params = {k: str(v) for k, v in params.items() if v is not None}
    params.pop("config", None)
    chosen = choose(saved_splits(path), None, params.pop("split", None), str(path), items_rule(benchmark))
    if not chosen[2]:
        raise DatasetFormError(f"{path}: split {chosen[1]!r} has no data-*.arrow shards")
    return read_table(path, "hf-saved", benchmark, params, chosen)


def hub_cache_snapshot(repo: str) -> Path:
    """The local snapshot of Hub dataset ``repo`` (offline: the Hugging Face cache only)."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo, repo_type="dataset", local_files_only=True,
                                      cache_dir=_hub_cache()))
    except ImportError:
        pass
    except Exception:  # not in the cache (LocalEntryNotFoundError and friends)
        raise DatasetFormError(f"hfds:{repo}: not in the local Hugging Face cache ({_hub_cache()}); download it "
                               f"first: huggingface-cli download --repo-type dataset {repo}") from None
    folder = _hub_cache() / f"datasets--{repo.replace('/', '--')}"
    try:
        rev = (folder / "refs" / "main").read_text().strip()
    except OSError:
        raise DatasetFormError(f"hfds:{repo}: not in the local Hugging Face cache ({_hub_cache()})") from None
    return folder / "snapshots" / rev


def _hub_cache() -> Path:
    env = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    return Path(env) if env else Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"


@register_scheme("hfds")
def read_hfds(source: str, *, benchmark: str | None = None, **options: Any) -> Dataset:
    """``hfds:`` as a local folder in either form, or a Hub id from the local cache."""
    name, _, query = source[len("hfds:"):].partition("?")
    name, given = name.rstrip("/"), dict(parse_qsl(query))
    params = {**given, **{k: str(v) for k, v in options.items() if v is not None}}
    if not name:
        raise DatasetFormError(f"{source}: name a dataset (hfds:ORG/NAME or hfds:PATH)")
    folder = Path(name).expanduser()
    if not folder.exists():
        if name.startswith(("/", ".", "~")) or name.count("/") != 1:
            raise DatasetFormError(f"{source}: no such folder, and not a Hub id ORG/NAME")
        folder = hub_cache_snapshot(name)
        if benchmark is None:  # a benchmark's Hub copy: its item rule (config, split, items) holds
            rule = items_rule(hub=name)
            benchmark = rule.benchmark if rule is not None else None
    folder = folder.absolute()  # a relative hfds:./folder names its image paths as the absolute one does
    if is_saved(folder) or shard_files(folder):
        f = forms()["hf-saved" if is_saved(folder) else "hf-snapshot"]
        _check_options(f, source, given)  # a misspelt ?option is refused, never ignored
        with dataset_files.reading(folder):
            ds = f.read(folder, benchmark=benchmark, **params)
    else:  # a repository of a benchmark's release files rather than shards: read by that release's own form
        try:
            f = detect(folder, benchmark)
        except DatasetFormError:
            raise DatasetFormError(f"{folder}: neither a Hub snapshot (parquet/arrow shards), a save_to_disk folder "
                                   "(state.json or dataset_dict.json) nor a benchmark's release files") from None
        _check_options(f, source, given)
        ds = f.read(folder, benchmark=benchmark, **given)
        ds.notes.append(f"{source}: the repository holds {f.name}'s release files, read as that release")
    ds.source = source
    return ds
