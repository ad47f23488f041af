"""Hugging Face forms (docs/datasets.md, "Generic forms"): a Hub snapshot folder, a ``save_to_disk`` folder, and
``hfds:ORG/NAME`` from the local Hugging Face cache, offline (or ``hfds:PATH``, a local folder in either form).

Shards are read with pyarrow a batch at a time; an Image column (``struct<bytes, path>``) or a list of them is
found from the arrow type, so ``datasets`` need not be installed.  Embedded image bytes go to the content store
(:mod:`.imagestore`) as they are; an image cell holding only a path stays in the dataset's folder, confined to
it.  Every shard and JSON file is opened under the rule for dataset files (core/dataset_files.py).

Why this module is long: both Hugging Face forms and the ``hfds:`` scheme share one table reader (splits,
image columns, the caps on rows and images), which would otherwise be split from the forms that call it.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import re
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qsl

from ..core import dataset_files
from ..core.files import InputFileError
from ..core.inputs import active_policy
from .base import (Dataset, DatasetFormError, _check_options, detect, forms, item_rules, items_rule, recognise,
                   register_form, register_scheme)
from .columns import Columns, Refused, check_unique, record
from .imagestore import ImageStore
from .splits import choose

SCHEMA_SNAPSHOT = "Hub dataset repository layout: README.md YAML `configs` + data/<split>-*.parquet " \
                  "(huggingface.co/docs/hub/datasets-manual-configuration)"
SCHEMA_SAVED = "datasets.Dataset.save_to_disk: state.json, dataset_info.json, data-*.arrow (dataset_dict.json " \
               "for a DatasetDict)"
_SHARD = re.compile(r"^(?P<split>[A-Za-z0-9_.]+?)(-\d{5}-of-\d{5}.*)?$")


def _shards(folder: Path) -> list[Path]:
    return sorted(p for pattern in ("*.parquet", "*.arrow") for p in folder.rglob(pattern)
                  if ".cache" not in p.parts and ".git" not in p.parts)


def is_snapshot(path: Path) -> bool:
    return path.is_dir() and ((path / "README.md").is_file() or (path / "dataset_infos.json").is_file()) \
        and not is_saved(path) and bool(_shards(path))


def is_saved(path: Path) -> bool:
    return path.is_dir() and ((path / "dataset_dict.json").is_file()
                              or ((path / "state.json").is_file() and (path / "dataset_info.json").is_file()))


def _readme_configs(folder: Path) -> dict[str, dict[str, list[str]]]:
    """config -> split -> file patterns, from the README's YAML front matter (empty when it names none)."""
    readme = folder / "README.md"
    try:
        text = dataset_files.read_text(readme, _repo_root(folder), "dataset card")
    except (OSError, InputFileError):
        return {}
    if not text.startswith("---"):
        return {}
    front = text[3:].split("\n---", 1)[0]
    try:
        import yaml

        meta = yaml.safe_load(front) or {}
    except Exception:  # a damaged card: the files' names still say the splits
        return {}
    out: dict[str, dict[str, list[str]]] = {}
    for cfg in meta.get("configs") or [] if isinstance(meta, dict) else []:
        if not isinstance(cfg, dict):
            continue
        files = cfg.get("data_files")
        if isinstance(files, dict):  # {split: pattern(s)}, the short form of [{split, path}, ...]
            files = [{"split": k, "path": v} for k, v in files.items()]
        splits: dict[str, list[str]] = {}
        for f in [files] if isinstance(files, str) else files if isinstance(files, list) else []:
            if isinstance(f, dict) and "split" in f:
                p = f.get("path")
                splits[str(f["split"])] = [p] if isinstance(p, str) else [str(x) for x in p or []]
            elif isinstance(f, str):
                splits.setdefault("train", []).append(f)
        out[str(cfg.get("config_name", "default"))] = splits
    return out


def _repo_root(folder: Path) -> Path:
    """The folder a Hub dataset's files must stay inside: the repository's folder for a snapshot in the Hugging
    Face cache (whose files link to ``../../blobs/``), else the folder itself."""
    return folder.parent.parent if folder.parent.name == "snapshots" else folder


def _json(path: Path) -> Any:
    """A JSON file of the dataset under the rule for dataset files (core/dataset_files.py)."""
    try:
        return dataset_files.parse_json(dataset_files.read_text(path, _repo_root(path.parent), "JSON file"),
                                        str(path))
    except InputFileError as exc:
        raise DatasetFormError(str(exc)) from None


def snapshot_splits(folder: Path) -> dict[str, dict[str, list[Path]]]:
    """config -> split -> shard files of a Hub snapshot."""
    shards = _shards(folder)
    rel = {p: p.relative_to(folder).as_posix() for p in shards}
    configs = _readme_configs(folder)
    out: dict[str, dict[str, list[Path]]] = {}
    for cfg, splits in configs.items():
        for split, patterns in splits.items():
            files = [p for p in shards if any(fnmatch.fnmatch(rel[p], pat) for pat in patterns)]
            if files:
                out.setdefault(cfg, {})[split] = files
    if out:
        return out
    for p in shards:  # no configs in the card: <config>/<split>-NNNNN-of-NNNNN.parquet, "data/" for the default
        m = _SHARD.match(p.name.rsplit(".", 1)[0])
        split = m.group("split") if m else p.stem
        parent = p.parent.relative_to(folder).as_posix()
        cfg = "default" if parent in (".", "data") else parent.removeprefix("data/")
        out.setdefault(cfg, {}).setdefault(split, []).append(p)
    return out


def saved_splits(folder: Path) -> dict[str, dict[str, list[Path]]]:
    if (folder / "dataset_dict.json").is_file():
        try:
            names = _json(folder / "dataset_dict.json")["splits"]
            names = list(names) if isinstance(names, list) else names["?"]
        except (OSError, ValueError, KeyError, TypeError):
            raise DatasetFormError(f"{folder / 'dataset_dict.json'}: expected {{\"splits\": [...]}} as "
                                   "datasets.DatasetDict.save_to_disk writes it") from None
        return {"default": {str(s): sorted((folder / str(s)).glob("data-*.arrow")) for s in names}}
    try:
        state = _json(folder / "state.json")
        files = [folder / f["filename"] for f in state["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise DatasetFormError(f"{folder / 'state.json'}: expected the _data_files list that "
                               "datasets.Dataset.save_to_disk writes") from None
    return {"default": {str(state.get("_split") or "train") if isinstance(state, dict) else "train": files}}


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


@contextlib.contextmanager
def _shard(path: Path) -> Iterator[None]:
    """Reading a shard under the rule for dataset files (a regular file inside the dataset; streamed, so no size
    cap), pyarrow's errors told with the file's name (a truncated shard: pyarrow's sentence names no file)."""
    import pyarrow as pa

    root = dataset_files.current_root.get()  # the folder being read (datasets.load, read_hfds)
    try:
        dataset_files.check_file(path, _repo_root(Path(root) if root is not None else path.parent), "shard")
    except InputFileError as exc:
        raise DatasetFormError(str(exc)) from None
    try:
        yield
    except (OSError, pa.ArrowException) as exc:
        raise DatasetFormError(f"{path}: not a readable {path.suffix[1:]} shard ({exc})") from None


def _schema(path: Path) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    with _shard(path):
        if path.suffix == ".parquet":
            return pq.read_schema(path)
        with pa.memory_map(str(path)) as src:
            return _arrow_reader(src).schema


def _arrow_reader(src: Any) -> Any:
    import pyarrow as pa

    try:
        return pa.ipc.open_stream(src)
    except pa.ArrowInvalid:
        src.seek(0)
        return pa.ipc.open_file(src)


def iter_rows(files: list[Path]) -> Iterator[dict[str, Any]]:
    """Rows of the shards, a batch at a time (never the whole table in memory)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cap = dataset_files.limits().rows
    for path in files:
        with _shard(path):
            if path.suffix == ".parquet":
                shard = pq.ParquetFile(path)
                if shard.metadata.num_rows > cap:  # the shard's own claim, told before a row is read
                    raise DatasetFormError(f"{path}: {shard.metadata.num_rows} rows, more than the {cap} a dataset "
                                           f"file may hold (raise it with {dataset_files.ENV['rows'][0]})")
                for batch in shard.iter_batches(batch_size=256):
                    yield from batch.to_pylist()
            else:
                with pa.memory_map(str(path)) as src:
                    reader = _arrow_reader(src)
                    if isinstance(reader, pa.ipc.RecordBatchFileReader):
                        batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
                    else:
                        batches = iter(reader)
                    rows = 0
                    for batch in batches:
                        rows += batch.num_rows
                        if rows > cap:
                            raise DatasetFormError(f"{path}: more than the {cap} rows a dataset file may hold "
                                                   f"(raise it with {dataset_files.ENV['rows'][0]})")
                        yield from batch.to_pylist()


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


def read_table(files: list[Path], *, source: str, folder: Path, form: str, benchmark: str | None, split: str,
               notes: list[str], params: dict[str, str]) -> Dataset:
    """Records from the shards of one split (shared by both Hugging Face forms)."""
    store = ImageStore()
    schema = _schema(files[0])
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
        ids.append(row.get(id_col) if id_col else None)
        records.append(record(row, cols, str(i), images, root, split=split))
    if id_col and ids:
        values = [str(v) for v in ids]
        if explicit_id or len(set(values)) == len(values):
            for r, v in zip(records, values):
                r.id = v
            if explicit_id:
                check_unique(records, source, id_col)
        else:
            notes.append(f"ids: row numbers ({id_col!r} repeats: {len(values)} rows, {len(set(values))} values)")
            for r, v in zip(records, values):
                r.meta[id_col] = v
    if not records:
        raise DatasetFormError(f"{source}: split {split!r} has no rows" + (
            f" that could be read ({len(skipped)} skipped: {skipped[0][1]})" if skipped else ""))
    no_image = sum(1 for r in records if not r.images)
    if no_image:
        notes.append(f"{no_image} rows without an image (text-only)")
    ds = Dataset(form=form, benchmark=benchmark, source=source, records=records, skipped=skipped, notes=notes,
                 splits=[split], columns=names)
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
        names = list(_schema(first).names) if first is not None else []
    except Exception:  # an unreadable shard is said where it is read, with its file's name
        return None
    return recognise(Dataset("hf-snapshot", None, source, [], columns=names))


@register_form("hf-snapshot", detect=is_snapshot, schema=SCHEMA_SNAPSHOT,
               options=("split", "config", "name", "*_column"))
def read_snapshot(path: Path, *, benchmark: str | None = None, **params: Any) -> Dataset:
    params = {k: str(v) for k, v in params.items() if v is not None}
    splits = snapshot_splits(path)
    rule = items_rule(benchmark) if benchmark else _recognised(splits, str(path))
    config, split, files, notes = choose(splits, params.pop("config", None) or params.pop("name", None),
                                         params.pop("split", None), str(path), rule)
    if config != "default":
        notes.insert(0, f"config {config!r}")
    ds = read_table(files, source=str(path), folder=path, form="hf-snapshot", benchmark=benchmark, split=split,
                    notes=notes, params=params)
    ds.config = None if config == "default" else config
    return ds


@register_form("hf-saved", detect=is_saved, schema=SCHEMA_SAVED, options=("split", "*_column"))
def read_saved(path: Path, *, benchmark: str | None = None, **params: Any) -> Dataset:
    params = {k: str(v) for k, v in params.items() if v is not None}
    params.pop("config", None)
    _, split, files, notes = choose(saved_splits(path), None, params.pop("split", None), str(path),
                                   items_rule(benchmark))
    if not files:
        raise DatasetFormError(f"{path}: split {split!r} has no data-*.arrow shards")
    return read_table(files, source=str(path), folder=path, form="hf-saved", benchmark=benchmark, split=split,
                      notes=notes, params=params)


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
    if is_saved(folder) or _shards(folder):
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
