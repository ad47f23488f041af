"""OmniBenchmark (Zhang et al., ECCV 2022) as released, the layout ChEF prepares its scenario from
(github.com/OpenGVLab/LAMM ``src/ChEF/data_process/Omnibenchmark.py``; files: docs/datasets.md).  One record per
image of the split (``test`` by default, ChEF's), answer the class, category the realm, ``meta["chain"]`` the
categories ChEF's hierarchical scenario asks down: with ``tree=`` (Bamboo's label tree) the class and its
``levels - 1`` ancestors, coarse to fine, as ChEF builds it (a class Bamboo cannot climb that far is left out and
counted, as ChEF does); without one, realm then class.  ``meta["tree"]``: the tree, for the wrong options."""

from __future__ import annotations

from pathlib import Path

from ._release import json_file, named_file, once, refuse, text
from .base import Dataset, Record, register_form

NAMES = ("trainid2name.json", "trainid2name_v2.json")
SPLITS = ("train", "val", "test")


def detect(path: Path) -> bool:
    f = named_file(path, NAMES)
    return f is not None and (f.parent / "annotation").is_dir()


class _Bamboo:
    """Ancestors of a class in Bamboo's label tree (ids, their names, fathers and children)."""

    def __init__(self, data: dict) -> None:
        self.id2name: dict[str, list[str]] = data["id2name"]
        self.father2child: dict[str, list[str]] = data["father2child"]
        self.child2father: dict[str, list[str]] = data["child2father"]
        for part in (self.id2name, self.father2child, self.child2father):
            bad = next((k for k, v in part.items() if not (isinstance(v, list) and all(isinstance(x, str) for x in v))),
                       None)
            if bad is not None:
                raise TypeError(f"{bad!r} maps to {type(part[bad]).__name__}, not a list of strings")
        self.name2id = {n: k for k, names in self.id2name.items() for n in names}

    def _canonical(self, cid: str) -> bool:  # an id whose first name leads back to it
        names = self.id2name.get(cid) or []
        return bool(names) and self.name2id.get(names[0]) == cid

    def _father(self, cid: str) -> str | None:  # the first listed father that lists it as a child
        return next((f for f in self.child2father.get(cid, []) if cid in self.father2child.get(f, [])), None)

    def chain(self, name: str, levels: int) -> list[str] | None:
        """``levels`` names, coarse to fine, ending with ``name``; None where the tree stops short."""
        ids, cid = [], self.name2id.get(name)
        while cid is not None and self._canonical(cid) and len(ids) < levels:
            if cid in ids:  # a cycle: the tree is broken here, no chain (and no end to the climb)
                return None
            ids.append(cid)
            cid = self._father(cid)
        if len(ids) < levels or cid is None:  # ChEF wants a father above the top level too
            return None
        return [self.id2name[i][0] for i in reversed(ids)]


@register_form("omnibenchmark", detect=detect, benchmarks=("omnibenchmark",),
               schema="github.com/ZhangYuanhan-AI/OmniBenchmark (trainid2name.json, annotation/<realm>/meta/"
                      "<split>.txt, data/<realm>/images/); ChEF's use: github.com/OpenGVLab/LAMM "
                      "src/ChEF/data_process/Omnibenchmark.py",
               carries=('images', 'classes', 'hierarchy'))
def read(path: Path, *, benchmark: str | None = None, split: str = "test", tree: str | Path | None = None,
         levels: int | str = 4, **_) -> Dataset:
    names_file = named_file(path, NAMES)
    if names_file is None:
        raise refuse(path, f"OmniBenchmark's {' or '.join(NAMES)} beside annotation/ and data/")
    folder = names_file.parent
    if split not in SPLITS:
        raise refuse(folder, f"a split among {', '.join(SPLITS)} (got {split!r})")
    realms = json_file(names_file, "OmniBenchmark's {realm: {trainid: name}}")
    if not isinstance(realms, dict) or not all(isinstance(v, dict) for v in realms.values()):
        raise refuse(names_file, "OmniBenchmark's {realm: {trainid: name}}")
    if not str(levels).strip().isdigit() or int(levels) < 1:
        raise refuse(folder, f"levels a whole number of at least 1 (got {levels!r})")
    bamboo, n_levels = None, int(levels)
    if tree is not None:
        tree_file = Path(tree).expanduser()
        # a file the user named in an option: read where it is, under the rule's other checks
        data = json_file(tree_file, "Bamboo's label tree (id2name, father2child, child2father)", confined=False)
        if not isinstance(data, dict) or not all(isinstance(data.get(k), dict) for k in
                                                 ("id2name", "father2child", "child2father")):
            raise refuse(tree_file, "Bamboo's label tree (id2name, father2child, child2father)")
        try:
            bamboo = _Bamboo(data)
        except TypeError as exc:
            raise refuse(tree_file, f"Bamboo's label tree of lists of ids and names ({exc})") from None
        tree = str(tree_file.resolve())
    ds = Dataset("omnibenchmark", "omnibenchmark", str(folder), [])
    no_chain: dict[str, int] = {}
    for realm, classes in realms.items():
        meta_file = folder / "annotation" / realm / "meta" / f"{split}.txt"
        if not meta_file.is_file():
            ds.skipped.append((realm, f"no annotation/{realm}/meta/{split}.txt"))
            continue
        lines = text(meta_file, "OmniBenchmark's meta file ('<image path> <trainid>' per line)").splitlines()
        unique = once(meta_file, "one line per image")
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"{meta_file.relative_to(folder)}:{n}"
            fields = line.split()
            if len(fields) != 2:
                ds.skipped.append((where, "not '<image path> <trainid>'"))
                continue
            image, trainid = fields
            label = classes.get(trainid)
            if label is None:
                ds.skipped.append((where, f"trainid {trainid} not in {names_file.name}[{realm!r}]"))
                continue
            rid = f"{realm}/{Path(image).name}"
            unique(rid, Path(image).name, f" at line {n}")
            base = folder / "data" / realm
            img = next((p for p in (base / "images" / Path(image).name, base / image) if p.is_file()), None)
            if img is None:
                ds.skipped.append((where, f"image {Path(image).name} not in data/{realm}/images"))
                continue
            if bamboo is not None:
                chain = bamboo.chain(label, n_levels)
                if chain is None:
                    no_chain[realm] = no_chain.get(realm, 0) + 1
                    continue
            else:
                chain = [realm, label]
            ds.records.append(Record(id=rid, images=[str(img)], answer=label, category=realm, split=split,
                                     root=str(folder), meta={"chain": chain, "realm_name": realm, "label": label,
                                                             "label_id": trainid,
                                                             **({"tree": tree} if tree else {})}))
    ds.notes.append(f"split {split!r}; chain: " + (f"{n_levels} Bamboo levels from {tree}" if bamboo else
                                                   "realm, then class (pass tree=BAMBOO.json for Bamboo's levels)"))
    if no_chain:
        ds.notes.append(f"left out, class with no {n_levels}-level Bamboo chain: "
                        + ", ".join(f"{k} {v}" for k, v in sorted(no_chain.items())))
    if not ds.records:
        no = (f"; {sum(no_chain.values())} with no {n_levels}-level chain in {tree}" if no_chain else "")
        raise refuse(folder, f"OmniBenchmark images of split {split!r} that exist under data/<realm>/images "
                             f"({len(ds.skipped)} left out, e.g. {ds.skipped[0][1] if ds.skipped else 'none'}{no})")
    return ds

