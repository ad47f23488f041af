"""The generic dataset forms (datasets/hub.py, datasets/vlmeval_tsv.py), one image one unit, and the wiring
(methods/records.py): small faithful replicas built from the published schemas, values checked by hand.

Schemas: lmms-lab/MME's dataset card (question_id, image, question, answer, category; 2 rows per image, test
split only), lmms-lab/SEED-Bench (choice_a..choice_d, image a list of images), derek-thomas/ScienceQA (image
None for text-only questions, choices, answer index, hint), VLMEvalKit's ImageMCQDataset TSV (index, image
base64 or another row's index, A..Z, hint, answer, category, l2-category)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from pathlib import Path

import pytest
from conftest import run_cli
from PIL import Image

from vlmcheck.core.images import BadImageError
from vlmcheck.datasets import DatasetFormError, load
from vlmcheck.methods.records import chef_items, image_items, vhx_cases

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def jpeg(color, size=(8, 8)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def png(color, size=(8, 8)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "PNG")
    return buf.getvalue()


CARD = """---
dataset_info:
  features:
  - name: question_id
    dtype: string
configs:
- config_name: default
  data_files:
  - split: test
    path: data/test-*
---
# a replica
"""


def hub_snapshot(folder: Path, rows: list[dict], card: str = CARD, name: str = "test-00000-of-00001.parquet") -> Path:
    (folder / "data").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / "data" / name)
    (folder / "README.md").write_text(card)
    return folder


def mme_rows(images: dict[str, bytes], category: str = "color") -> list[dict]:
    """lmms-lab/MME: two questions per image (Yes, then No), question_id the image's file name, repeated."""
    rows = []
    for name, data in images.items():
        for q, a in ((f"Is {name} red? Please answer yes or no.", "Yes"), (f"Is {name} blue? Please answer yes or no.",
                                                                          "No")):
            rows.append({"question_id": f"{category}/{name}", "image": {"bytes": data, "path": name},
                         "question": q, "answer": a, "category": category})
    return rows


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "hfds"


def test_hub_snapshot_one_file_per_distinct_image_in_its_own_bytes(tmp_path, cache):
    imgs = {f"{i}.jpg": jpeg(c) for i, c in enumerate(("red", "green", "blue"))}
    snap = hub_snapshot(tmp_path / "MME", mme_rows(imgs))
    ds = load(snap)
    assert ds.form == "hf-snapshot" and len(ds.records) == 6 and ds.distinct_images == 3
    assert "split 'test' read: the only one" in ds.notes
    # question_id repeats (2 rows per image): ids are row numbers, said in a note; the value kept in meta
    assert [r.id for r in ds.records] == ["0", "1", "2", "3", "4", "5"]
    assert any("question_id" in n and "repeats" in n for n in ds.notes)
    assert ds.records[0].images == ds.records[1].images != ds.records[2].images
    files = sorted(p for p in cache.rglob("*") if p.is_file())
    assert len(files) == 3 and all(p.suffix == ".jpg" for p in files)  # a JPEG stays a JPEG
    assert {p.read_bytes() for p in files} == set(imgs.values())  # byte for byte
    assert Path(ds.records[0].images[0]).name == hashlib.sha256(imgs["0.jpg"]).hexdigest() + ".jpg"
    r = ds.records[1]
    assert (r.question, r.answer, r.category, r.split) == ("Is 0.jpg blue? Please answer yes or no.", "No", "color",
                                                           "test")
    # GenCeption: one item per distinct image; VHExpansion: every question, clustered by its image's file
    assert [it.category for it in image_items(ds)] == ["color"] * 3
    from vlmcheck.methods.vhx_cases import Case

    cases = vhx_cases(ds)
    assert [c.answer for c in cases] == ["yes", "no"] * 3 and cases[0].image == cases[1].image
    # ChEF (MME runs the pope loader): Yes/No options, the answer's index
    items = chef_items(ds, "pope", turn_rows={}, retrieval_items=None)
    assert [(it["options"], it["answer"]) for it in items[:2]] == [(["Yes", "No"], 0), (["Yes", "No"], 1)]


def test_duplicate_ids_refused_in_one_sentence(tmp_path):
    snap = hub_snapshot(tmp_path / "MME", mme_rows({"0.jpg": jpeg("red")}))
    with pytest.raises(DatasetFormError, match=r"duplicate id 'color/0.jpg' \(rows 1 and 2 of column 'question_id'"):
        load(f"hfds:{snap}?id_column=question_id")


def test_cache_reuse_checks_the_bytes_and_columns_key_the_images(tmp_path, cache):
    rows = [{"id": "a", "image": {"bytes": png("red"), "path": None}, "mask": {"bytes": png("white"), "path": None},
             "question": "q?", "answer": "yes"}]
    snap = hub_snapshot(tmp_path / "S", rows)
    first = load(f"hfds:{snap}").records[0].images[0]
    Path(first).write_bytes(png("red")[:20])  # a truncated copy left by a crash
    again = load(f"hfds:{snap}").records[0].images[0]
    assert again == first and Path(first).read_bytes() == png("red")  # rewritten, never sent truncated
    masked = load(f"hfds:{snap}?image_column=mask").records[0].images[0]  # another column, another file
    assert masked != first and Path(masked).read_bytes() == png("white")


def test_save_to_disk_test_only_and_text_only_rows(tmp_path):
    datasets = pytest.importorskip("datasets")
    feats = datasets.Features({"image": datasets.Image(), "question": datasets.Value("string"),
                               "choices": datasets.Sequence(datasets.Value("string")),
                               "answer": datasets.Value("int64"), "hint": datasets.Value("string"),
                               "subject": datasets.Value("string")})
    ds = datasets.Dataset.from_dict(
        {"image": [Image.new("RGB", (8, 8), "red"), None],
         "question": ["Which colour?", "Which is a mammal?"], "choices": [["red", "blue"], ["cat", "trout", "ant"]],
         "answer": [0, 0], "hint": ["", "Mammals have fur."], "subject": ["natural science"] * 2}, features=feats)
    datasets.DatasetDict({"test": ds}).save_to_disk(str(tmp_path / "sqa"))
    read = load(f"hfds:{tmp_path / 'sqa'}")
    assert read.form == "hf-saved" and "split 'test' read: the only one" in read.notes
    r0, r1 = read.records
    assert r0.images and r1.images == [] and r1.options == ["cat", "trout", "ant"] and r1.answer == 0
    assert r0.hint is None and r1.hint == "Mammals have fur."
    items = chef_items(read, "scienceqa", turn_rows={}, retrieval_items=None)
    # the hint as context, as the JSONL route shows it; the text-only question has no image
    assert items[1]["question"] == "Context: Mammals have fur.\nWhich is a mammal?" and items[1]["image"] is None
    with pytest.raises(DatasetFormError, match=r"no split 'train' \(splits: test\)"):
        load(f"hfds:{tmp_path / 'sqa'}?split=train")


def test_seed_bench_image_lists_and_choice_columns(tmp_path):
    rows = [{"question_id": "q1", "data_id": "i1", "question": "What differs?", "choice_a": "x", "choice_b": "y",
             "choice_c": "z", "choice_d": "w", "answer": "C", "question_type_id": 10, "data_type": "image",
             "image": [{"bytes": jpeg("red"), "path": "f0.jpg"}, {"bytes": jpeg("blue"), "path": "f1.jpg"}]},
            {"question_id": "q2", "data_id": "i2", "question": "Colour?", "choice_a": "red", "choice_b": "blue",
             "choice_c": "green", "choice_d": "grey", "answer": "A", "question_type_id": 1, "data_type": "image",
             "image": [{"bytes": jpeg("red"), "path": "i2.jpg"}]},
            {"question_id": "q3", "data_id": "v3", "question": "What happens?", "choice_a": "x", "choice_b": "y",
             "choice_c": "z", "choice_d": "w", "answer": "B", "question_type_id": 10, "data_type": "video",
             "image": [{"bytes": jpeg("green"), "path": "v0.jpg"}, {"bytes": jpeg("grey"), "path": "v1.jpg"}]}]
    ds = load(hub_snapshot(tmp_path / "seed", rows))
    r1, r2 = ds.records
    assert (r1.id, len(r1.images), r1.options, r1.answer) == ("q1", 2, ["x", "y", "z", "w"], 2)
    assert r2.images == [r1.images[0]]  # the red picture is one file
    # the video question (its frames in the same image list) is no item: left out and counted
    assert ds.benchmark == "seedbench" and ds.skipped == [
        ("q3", "not an image question (data_type video): vlmcheck evaluates images")]


def test_hub_id_from_the_local_cache_offline(tmp_path, monkeypatch):
    hub = tmp_path / "hf" / "hub"
    repo = hub / "datasets--lmms-lab--MME"
    rev = "0123456789abcdef0123456789abcdef01234567"
    hub_snapshot(repo / "snapshots" / rev, mme_rows({"0.jpg": jpeg("red")}))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(rev)
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ds = load("hfds:lmms-lab/MME")
    assert len(ds.records) == 2 and ds.distinct_images == 1 and ds.source == "hfds:lmms-lab/MME"
    with pytest.raises(DatasetFormError, match="not in the local Hugging Face cache"):
        load("hfds:lmms-lab/POPE")


def test_an_image_path_cell_outside_the_dataset_is_confined(tmp_path):
    import asyncio

    from vlmcheck.core.inputs import read_image

    secret = tmp_path / "secret.png"
    secret.write_bytes(png("red"))
    (tmp_path / "ds" / "imgs").mkdir(parents=True)
    (tmp_path / "ds" / "imgs" / "in.png").write_bytes(png("blue"))
    rows = [{"id": "in", "image": {"bytes": None, "path": "imgs/in.png"}, "question": "q", "answer": "no"},
            {"id": "out", "image": {"bytes": None, "path": str(secret)}, "question": "q", "answer": "no"},
            {"id": "bad", "image": {"bytes": b"not an image at all", "path": None}, "question": "q", "answer": "no"}]
    ds = load(hub_snapshot(tmp_path / "ds", rows))
    inside, outside, bad = ds.records
    assert asyncio.run(read_image(inside.images[0], root=inside.root)).getpixel((0, 0)) == (0, 0, 255)
    with pytest.raises(BadImageError, match="outside the dataset folder"):
        asyncio.run(read_image(outside.images[0], root=outside.root))
    with pytest.raises(BadImageError):  # a bad row fails its own sample, at read time, with one sentence
        asyncio.run(read_image(bad.images[0], root=bad.root))


# ----------------------------------------------------------------------------- VLMEvalKit TSV


def tsv(path: Path, header: list[str], rows: list[list]) -> Path:
    path.write_text("\n".join("\t".join(map(str, r)) for r in [header, *rows]) + "\n", encoding="utf-8")
    return path


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_tsv_any_options_hint_index_references_and_big_fields(tmp_path, cache):
    import os

    big = os.urandom(200_000)  # a 200 kB "JPEG" (beyond the csv module's 128 kB field limit)
    big = b"\xff\xd8\xff\xe0" + big
    head = ["index", "question", "hint", "A", "B", "C", "D", "E", "answer", "image", "category", "l2-category"]
    rows = [[1, "Which one?", "Look closely.", "a", "b", "c", "d", "e", "E", b64(jpeg("red")), "sci", "physics"],
            [2, "How many?", "nan", "1", "2", "", "", "", "B", "1", "count", "nan"],  # image: row 1's
            [3, "Big?", "nan", "yes", "no", "", "", "", "A", b64(big), "size", "nan"]]
    ds = load(tsv(tmp_path / "ScienceQA_TEST.tsv", head, rows))
    r1, r2, r3 = ds.records
    assert ds.form == "vlmeval-tsv"
    assert (r1.options, r1.answer, r1.hint, r1.category, r1.meta["l2-category"]) == (
        ["a", "b", "c", "d", "e"], 4, "Look closely.", "sci", "physics")  # option E kept, answer E answerable
    assert (r2.options, r2.answer, r2.hint, r2.images) == (["1", "2"], 1, None, r1.images)
    assert Path(r3.images[0]).read_bytes() == big and Path(r3.images[0]).suffix == ".jpg"
    assert ds.distinct_images == 2 and len([p for p in cache.rglob("*") if p.is_file()]) == 2
    items = chef_items(ds, "scienceqa", turn_rows={}, retrieval_items=None)
    assert items[0]["question"] == "Context: Look closely.\nWhich one?" and items[0]["answer"] == 4


def test_tsv_image_path_column_and_bad_rows(tmp_path):
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "x.png").write_bytes(png("red"))
    head = ["index", "question", "answer", "image_path", "image"]
    rows = [[0, "Red?", "Yes", "imgs/x.png", ""], [1, "Blue?", "No", "", "%%%not base64 and long enough to not be "
                                                                          "an index reference, surely%%%"],
            [2, "Green?", "No", "", "99"]]
    ds = load(tsv(tmp_path / "MME.tsv", head, rows))
    assert [r.id for r in ds.records] == ["0"]  # the two bad rows left out, each with its reason
    assert ("line 3", "image field is neither base64 nor another row's index") in ds.skipped
    assert ds.records[0].images == [str(tmp_path / "imgs" / "x.png")] and ds.records[0].root == str(tmp_path)
    assert ("line 4", "image names row '99', which has no image") in ds.skipped
    with pytest.raises(DatasetFormError, match=r"duplicate id '0'"):
        load(tsv(tmp_path / "dup.tsv", head, [rows[0], rows[0]]))


# ----------------------------------------------------------------------------- data inspect


def test_data_inspect_reads_and_never_writes(tmp_path, cache):
    snap = hub_snapshot(tmp_path / "MME", mme_rows({"0.jpg": jpeg("red"), "1.jpg": jpeg("blue")}))
    proc = run_cli("data", "inspect", f"hfds:{snap}", "--benchmark", "mme", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert (info["form"], info["benchmark"], info["items"], info["distinct_images"]) == ("hf-snapshot", "mme", 4, 2)
    assert info["categories"] == {"color": 4} and info["splits"] == {"test": 4}
    assert info["rows"][0]["text"] == "Is 0.jpg red? Please answer yes or no." and info["rows"][0]["answer"] == "Yes"
    assert not cache.exists()  # reads, never writes
    proc = run_cli("data", "inspect", str(tmp_path / "nothing"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr + proc.stdout


# ----------------------------------------------------------------------------- MME in three forms


def mme_three_forms(tmp_path: Path, world: Path) -> dict[str, str]:
    """One MME replica written as the Hub copy (lmms-lab/MME), the release folder (MME_Benchmark_release_version:
    <category>/images/*.png + questions_answers_YN/*.txt) and VLMEvalKit's MME.tsv (the second question of an
    image names the first's index), from the same image files."""
    rows = [json.loads(x) for x in (world / "manifest.jsonl").read_text().splitlines()]
    hub_rows, tsv_rows, index = [], [], 0
    release = tmp_path / "MME_Benchmark_release_version"
    for r in rows:
        data = (world / r["image"]).read_bytes()
        name, cat = Path(r["image"]).name, r["category"]
        (release / cat / "images").mkdir(parents=True, exist_ok=True)
        (release / cat / "questions_answers_YN").mkdir(parents=True, exist_ok=True)
        (release / cat / "images" / name).write_bytes(data)
        qa = [(f"Is there a {cat} here? Please answer yes or no.", "Yes"), ("Is this a photo? Please answer yes or no.",
                                                                          "No")]
        (release / cat / "questions_answers_YN" / (Path(name).stem + ".txt")).write_text(
            "".join(f"{q}\t{a}\n" for q, a in qa))
        first = index
        for k, (q, a) in enumerate(qa):
            hub_rows.append({"question_id": f"{cat}/{name}", "image": {"bytes": data, "path": name}, "question": q,
                             "answer": a, "category": cat})
            tsv_rows.append([index, b64(data) if k == 0 else str(first), q, a, cat])
            index += 1
    snap = hub_snapshot(tmp_path / "lmms-lab-MME", hub_rows)
    t = tsv(tmp_path / "MME.tsv", ["index", "image", "question", "answer", "category"], tsv_rows)
    return {"hub": f"hfds:{snap}", "release": str(release), "tsv": f"mme:{t}"}


@pytest.mark.slow
def test_genception_on_mme_gives_the_same_chains_from_hub_release_and_tsv(tmp_path):
    from vlmcheck.methods.genception import GenCeptionSpec, GenCeptionTask
    from vlmcheck.run.runner import RunOptions, run_task
    from vlmcheck.world.make import make_world

    world = tmp_path / "world"
    make_world(world, n=8, seed=2)
    out = {}
    for form, source in mme_three_forms(tmp_path, world).items():
        task = GenCeptionTask(GenCeptionSpec(vlm="ref:describer?level=0.3", generator="ref:renderer",
                                             encoder="ref:pixels", data=source, T=2))
        assert len(task.items) == 8  # one chain per distinct image, not per question row (16 rows)
        res = run_task(task, tmp_path / f"run-{form}", RunOptions(progress=False))
        rows = [json.loads(x)["result"] for x in (tmp_path / f"run-{form}" / "samples.jsonl").read_text().splitlines()]
        out[form] = ({r["image_sha256"]: (r["category"], r["s"]) for r in rows}, res.results["metrics"])
    chains, metrics = out["hub"]
    assert metrics["chains"]["total"] == 8
    for form in ("release", "tsv"):
        assert out[form][0] == chains
        for key in ("GC@1", "GC@2"):
            assert out[form][1][key]["score"] == pytest.approx(metrics[key]["score"])
            assert out[form][1][key]["ci95"] == pytest.approx(metrics[key]["ci95"])


def test_class_label_ids_become_class_names(tmp_path):
    """uoft-cs/cifar10 on the Hub: img (Image), label (ClassLabel 0..9): ChEF's classification pool is names."""
    datasets = pytest.importorskip("datasets")
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    ds = datasets.Dataset.from_dict({"img": [Image.new("RGB", (8, 8), c) for c in ("red", "blue", "red")],
                                     "label": [3, 9, 0]},
                                    features=datasets.Features({"img": datasets.Image(),
                                                                "label": datasets.ClassLabel(names=names)}))
    ds.save_to_disk(str(tmp_path / "cifar"))
    read = load(f"hfds:{tmp_path / 'cifar'}")
    assert [r.answer for r in read.records] == ["cat", "truck", "airplane"]
    items = chef_items(read, "classification", turn_rows={}, retrieval_items=None)
    assert items[0]["options"] == ["airplane", "cat", "truck"] and items[1]["answer"] == 2
    assert items[0]["image"] == items[2]["image"]  # the two red images are one file, one cluster


def test_a_decompression_bomb_row_fails_its_own_sample(tmp_path):
    import asyncio

    from vlmcheck.core.inputs import read_image

    buf = io.BytesIO()
    Image.new("1", (10_000, 10_000)).save(buf, "PNG")  # 100 M pixels in a few kB: over the 89 M pixel limit
    rows = [{"id": "ok", "image": {"bytes": png("red"), "path": None}, "question": "q", "answer": "no"},
            {"id": "bomb", "image": {"bytes": buf.getvalue(), "path": None}, "question": "q", "answer": "no"}]
    ok, bomb = load(hub_snapshot(tmp_path / "ds", rows)).records  # the load itself goes on
    assert asyncio.run(read_image(ok.images[0], root=ok.root)).size == (8, 8)
    with pytest.raises(BadImageError, match="pixels"):
        asyncio.run(read_image(bomb.images[0], root=bomb.root))


@pytest.mark.slow
def test_the_cli_takes_any_form_with_benchmark(tmp_path):
    """describe on VLMEvalKit's MME.tsv named with --benchmark: one sample per distinct image, the spec keeps
    mme:PATH; a --benchmark that contradicts the source's NAME: is one sentence, exit 2."""
    head = ["index", "image", "question", "answer", "category"]
    rows = [[0, b64(png("red")), "Red?", "Yes", "color"], [1, "0", "Blue?", "No", "color"],
            [2, b64(png("blue")), "Blue?", "Yes", "color"], [3, "2", "Red?", "No", "color"]]
    t = tsv(tmp_path / "MME.tsv", head, rows)
    env = {**__import__("os").environ, "VLMCHECK_CACHE": str(tmp_path / "cache"), "COLUMNS": "500"}
    p = run_cli("describe", "--vlm", "ref:describer", "--data", str(t), "--benchmark", "mme", "--out",
                str(tmp_path / "run"), env=env)
    assert p.returncode == 0, p.stderr
    samples = (tmp_path / "run" / "samples.jsonl").read_text().splitlines()
    assert len(samples) == 2  # two distinct images, four question rows
    assert f"mme:{t}" in (tmp_path / "run" / "results.json").read_text()
    p = run_cli("describe", "--vlm", "ref:describer", "--data", f"pope:{t}", "--benchmark", "mme", "--out",
                str(tmp_path / "run2"), env=env)
    assert p.returncode == 2 and "Traceback" not in p.stderr and "--benchmark mme but the source names 'pope'" in \
        p.stderr + p.stdout


def test_a_sweep_resolves_name_path_relative_to_its_file(tmp_path):
    from vlmcheck.sweep import Sweep, plan

    sweep = Sweep.model_validate({"out": "runs", "models": ["ref:describer"], "methods": [
        {"method": "describe", "data": "mme:data/MME.tsv"}, {"method": "describe", "name": "hub",
                                                             "data": "hfds:lmms-lab/MME"}]})
    (_, _, spec1), (_, _, spec2) = plan(sweep, tmp_path)
    assert spec1["data"] == f"mme:{tmp_path / 'data' / 'MME.tsv'}" and spec2["data"] == "hfds:lmms-lab/MME"


def test_configs_and_splits_of_a_hub_snapshot(tmp_path):
    """lmms-lab/MMBench: configs en and cn, splits dev and test (test without answers), letter columns A..D."""
    card = ("---\nconfigs:\n- config_name: cn\n  data_files:\n  - split: dev\n    path: cn/dev-*\n"
            "- config_name: en\n  data_files:\n  - split: dev\n    path: en/dev-*\n  - split: test\n"
            "    path: en/test-*\n---\n")
    snap = tmp_path / "MMBench"

    def rows(lang, answer):
        return [{"index": i, "question": f"{lang} q{i}", "hint": None if i else "h", "A": "x", "B": "y", "C": None,
                 "D": None, "answer": answer, "category": "c", "l2-category": "l2", "source": "s", "split": "dev",
                 "image": {"bytes": png("red"), "path": None}} for i in range(2)]

    for lang, split, answer in (("cn", "dev", "B"), ("en", "dev", "A"), ("en", "test", None)):
        (snap / lang).mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows(lang, answer)), snap / lang / f"{split}-00000-of-00001.parquet")
    (snap / "README.md").write_text(card)
    ds = load(f"hfds:{snap}?config=en")
    assert "split 'test' read: 2 of 4 rows (splits: dev 2, test 2; pass ?split=NAME)" in ds.notes
    assert all(r.answer is None for r in ds.records)
    ds = load(f"hfds:{snap}?config=en&split=dev")
    assert [(r.question, r.options, r.answer, r.hint) for r in ds.records] == [
        ("en q0", ["x", "y"], 0, "h"), ("en q1", ["x", "y"], 0, None)]
    # several configs and none named: refused with the configs listed, as datasets.load_dataset refuses it ...
    with pytest.raises(DatasetFormError, match=r"config name is missing: pick one of its configs with \?config=NAME "
                                               r"\(cn, en\)"):
        load(f"hfds:{snap}?split=dev")
    # ... unless the benchmark defines its own: MMBench's en, dev
    ds = load(f"mmbench:hfds:{snap}")
    assert (ds.config, ds.splits, ds.benchmark) == ("en", ["dev"], "mmbench")
    assert "config 'en' read: mmbench's (configs: cn, en; pass ?config=NAME)" in ds.notes
    with pytest.raises(DatasetFormError, match=r"no config 'fr' \(configs: cn, en\)"):
        load(f"hfds:{snap}?config=fr")
    # a misspelt option in an hfds: query is refused in one sentence, never silently ignored
    with pytest.raises(DatasetFormError, match=r"the hf-snapshot form takes no option 'spilt'"):
        load(f"hfds:{snap}?spilt=dev")


def test_an_unwritable_cache_is_one_sentence(tmp_path, monkeypatch):
    snap = hub_snapshot(tmp_path / "ds", mme_rows({"0.jpg": jpeg("red")}))
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "file"))
    with pytest.raises(DatasetFormError, match=r"has no rows that could be read \(2 skipped: image not stored"):
        load(f"hfds:{snap}")


def test_pope_flickr30k_and_docci_hub_copies(tmp_path):
    """lmms-lab/POPE (id, question_id, question, answer, image_source, image, category), lmms-lab/flickr30k
    (image, caption: five, sentids, img_id, filename), google/docci (example_id, image, description)."""
    from vlmcheck.methods.chef.scenarios import retrieval_items
    from vlmcheck.methods.records import cast_corpus
    from vlmcheck.methods.vhx_cases import Case

    coco = {"COCO_val2014_000000310196": jpeg("red"), "COCO_val2014_000000210789": jpeg("blue")}
    pope = [{"id": str(i), "question_id": str(i + 1), "question": f"Is there a {o} in the image?", "answer": a,
             "image_source": src, "image": {"bytes": coco[src], "path": None}, "category": "adversarial"}
            for i, (src, o, a) in enumerate([(s, o, a) for s in coco for o, a in (("dog", "yes"), ("cat", "no"),
                                                                                   ("car", "no"))])]
    ds = load(hub_snapshot(tmp_path / "POPE", pope))
    assert len(ds.records) == 6 and ds.distinct_images == 2 and [r.id for r in ds.records] == list("123456")
    cases = vhx_cases(ds)
    assert [c.answer for c in cases] == ["yes", "no", "no"] * 2 and len({c.image for c in cases}) == 2
    flickr = [{"image": {"bytes": jpeg(c), "path": f"{n}.jpg"}, "caption": [f"{c} one", f"{c} two"],
               "sentids": ["1", "2"], "img_id": str(n), "filename": f"{n}.jpg"}
              for n, c in enumerate(("red", "green", "blue"))]
    ds = load(hub_snapshot(tmp_path / "flickr", flickr))
    assert [r.description for r in ds.records] == ["red one", "green one", "blue one"]
    assert ds.records[0].meta["captions"] == ["red one", "red two"]
    items = chef_items(ds, "retrieval", turn_rows={}, retrieval_items=retrieval_items, k=2)
    assert all(it["options"][it["answer"]] == d for it, d in zip(items, ["red one", "green one", "blue one"]))
    docci = [{"example_id": f"train_{i:05d}", "image": {"bytes": jpeg(c), "path": None},
              "description": f"A long description of a {c} square."} for i, c in enumerate(("red", "blue"))]
    scenes = cast_corpus(load(hub_snapshot(tmp_path / "docci", docci)))
    assert [(s["id"], s["description"]) for s in scenes] == [("train_00000", "A long description of a red square."),
                                                             ("train_00001", "A long description of a blue square.")]


def test_mmvp_hub_copy_options_in_one_string(tmp_path):
    """MMVP/MMVP on the Hub: Index, Question, Options "(a) Open (b) Closed", Correct Answer "(a)", image."""
    rows = [{"Index": 1, "Question": "Are the butterfly's wings closer to being open or closed?",
             "Options": "(a) Open (b) Closed", "Correct Answer": "(a)", "image": {"bytes": jpeg("red"), "path": None}},
            {"Index": 2, "Question": "Are the butterfly's wings closer to being open or closed?",
             "Options": "(a) Open (b) Closed", "Correct Answer": "(b)", "image": {"bytes": jpeg("blue"), "path": None}}]
    ds = load(hub_snapshot(tmp_path / "MMVP", rows))
    assert [(r.id, r.options, r.answer) for r in ds.records] == [("1", ["Open", "Closed"], 0),
                                                                 ("2", ["Open", "Closed"], 1)]
    cases = vhx_cases(ds)
    assert [c.answer for c in cases] == ["yes", "no"] and len(cases) == 2  # one case per question
