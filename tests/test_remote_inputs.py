"""Datasets at a URL (issue 37 item 5): a manifest or an image folder read through fsspec, tested with fsspec's
memory:// filesystem and a local HTTP server, never the network."""

import functools
import http.server
import json
import threading

import fsspec
import numpy as np
import pytest
from PIL import Image

from vlmcheck import RunOptions, run_task
from vlmcheck.core.data import load_image_dataset
from vlmcheck.methods.describe import DescribeSpec, DescribeTask


def _png(seed: int) -> bytes:
    import io

    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (24, 32, 3), dtype=np.uint8)).save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture
def memfs():
    fs = fsspec.filesystem("memory")
    root = f"/vlmcheck-test-{id(fs)}-{np.random.default_rng().integers(1 << 30)}"
    yield fs, root
    fs.rm(root, recursive=True)


def _rows(folder):
    return {r["sample_id"]: r for r in map(json.loads, (folder / "samples.jsonl").read_text().splitlines())}


def test_a_manifest_in_memory_runs_like_a_local_one(memfs, tmp_path, fake_server):
    fs, root = memfs
    fs.pipe(f"{root}/data/img/a.png", _png(1))
    fs.pipe(f"{root}/data/img/b.png", _png(2))
    fs.pipe(f"{root}/secret.png", _png(3))
    fs.pipe(f"{root}/data/manifest.jsonl", b"".join(json.dumps(r).encode() + b"\n" for r in [
        {"id": "a", "image": "img/a.png"}, {"id": "b", "image": "img/b.png"},
        {"id": "missing", "image": "img/none.png"}, {"id": "escape", "image": "../secret.png"}]))
    url = f"memory://{root}/data/manifest.jsonl"
    items = load_image_dataset(url)
    assert [i.path for i in items] == [f"memory://{root}/data/img/a.png", f"memory://{root}/data/img/b.png",
                                       f"memory://{root}/data/img/none.png", f"memory://{root}/secret.png"]
    res = run_task(DescribeTask(DescribeSpec(vlm=f"openai:fake@{fake_server.base_url}", data=url)),
                   tmp_path / "run", RunOptions(progress=False, report=False, preflight=False))
    rows = _rows(tmp_path / "run")
    assert res.results["counts"]["done"] == 2 and rows["a"]["status"] == rows["b"]["status"] == "done"
    # the key is the bytes read from the URL, as for a local file
    import hashlib

    assert rows["a"]["result"]["image_sha256"] == hashlib.sha256(_png(1)).hexdigest()
    assert "file not found" in rows["missing"]["error"]["message"]
    assert "outside the dataset folder" in rows["escape"]["error"]["message"]  # ../ leaves the manifest's folder


def test_an_image_folder_in_memory_with_categories(memfs):
    fs, root = memfs
    fs.pipe(f"{root}/photos/cats/1.png", _png(4))
    fs.pipe(f"{root}/photos/dogs/2.jpg", _png(5))
    fs.pipe(f"{root}/photos/notes.txt", b"not an image")
    items = load_image_dataset(f"memory://{root}/photos")
    assert [(i.id, i.category) for i in items] == [("cats/1.png", "cats"), ("dogs/2.jpg", "dogs")]


def test_a_manifest_served_over_http(tmp_path, fake_server):
    site = tmp_path / "site"
    (site / "img").mkdir(parents=True)
    (site / "img" / "a.png").write_bytes(_png(6))
    (site / "manifest.jsonl").write_text(json.dumps({"id": "a", "image": "img/a.png"}) + "\n")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/manifest.jsonl"
        res = run_task(DescribeTask(DescribeSpec(vlm=f"openai:fake@{fake_server.base_url}", data=url)),
                       tmp_path / "run", RunOptions(progress=False, report=False, preflight=False))
        assert res.results["counts"]["done"] == 1
    finally:
        server.shutdown()


def test_vhx_cases_at_a_url_run_like_local_ones(memfs, tmp_path):
    """A VHExpansion cases file (JSONL or CSV) at a URL: images relative to its folder URL, confined to it, and
    the run's answers those of the same cases on disk."""
    from vlmcheck.methods.vhexpansion import VHExpansionTask, VHXSpec, load_cases

    fs, root = memfs
    rows = [{"id": "c1", "image": "img/a.png", "question": "Is there a cat?", "answer": "yes"},
            {"id": "c2", "image": "img/b.png", "question": "Is there a dog?", "answer": "no"},
            {"id": "c3", "image": "../secret.png", "question": "Is there a bird?", "answer": "no"}]
    local = tmp_path / "local"
    (local / "img").mkdir(parents=True)
    for name, seed in (("a", 1), ("b", 2)):
        fs.pipe(f"{root}/data/img/{name}.png", _png(seed))
        (local / "img" / f"{name}.png").write_bytes(_png(seed))
    fs.pipe(f"{root}/secret.png", _png(3))
    body = "".join(json.dumps(r) + "\n" for r in rows)
    fs.pipe(f"{root}/data/cases.jsonl", body.encode())
    fs.pipe(f"{root}/data/cases.csv", ("image,question,answer\n" + "".join(
        f"{r['image']},{r['question']},{r['answer']}\n" for r in rows)).encode())
    (local / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    url = f"memory://{root}/data/cases.jsonl"
    cases = load_cases(url)
    assert [c.image for c in cases] == [f"memory://{root}/data/img/a.png", f"memory://{root}/data/img/b.png",
                                        f"memory://{root}/secret.png"]
    assert {c.root for c in cases} == {f"memory://{root}/data"}
    assert [(c.image, c.answer) for c in load_cases(f"memory://{root}/data/cases.csv")] == \
        [(c.image, c.answer) for c in cases]

    def run(cases_src, out):
        return run_task(VHExpansionTask(VHXSpec(vlm="ref:describer?level=0.1", cases=cases_src, perturb=[])),
                        tmp_path / out, RunOptions(progress=False, report=False, preflight=False))

    remote_run, local_run = run(url, "r"), run(str(local / "cases.jsonl"), "l")
    assert remote_run.results["counts"]["done"] == 2 and local_run.results["counts"]["done"] == 2
    r, l = _rows(tmp_path / "r"), _rows(tmp_path / "l")
    assert [r[k]["result"]["variants"] for k in ("c1", "c2")] == [l[k]["result"]["variants"] for k in ("c1", "c2")]
    assert "outside the dataset folder" in r["c3"]["error"]["message"]  # ../ leaves the cases file's folder
    with pytest.raises(Exception, match="file not found"):
        load_cases(f"memory://{root}/data/none.jsonl")


def test_cast_pairs_at_a_url_name_images_relative_to_their_folder(memfs):
    from vlmcheck.methods.cast import load_pairs

    fs, root = memfs
    pair = {"a": {"image": "img/a.png", "description": "a red square"},
            "b": {"image": "https://example.org/b.png", "description": "a blue circle"}}
    fs.pipe(f"{root}/cast/pairs.jsonl", (json.dumps(pair) + "\n").encode())
    (row,) = load_pairs(f"memory://{root}/cast/pairs.jsonl")
    assert row["a"]["image"] == f"memory://{root}/cast/img/a.png"
    assert row["b"]["image"] == "https://example.org/b.png"  # an absolute URL stays (and must pass the root check)
    assert row["a"]["root"] == row["b"]["root"] == f"memory://{root}/cast"
    with pytest.raises(Exception, match="file not found"):
        load_pairs(f"memory://{root}/cast/none.jsonl")


def test_chef_scenarios_at_a_url_for_the_jsonl_kinds(memfs, tmp_path):
    from vlmcheck.methods.chef import ChefSpec, ChefTask, resolve_recipe
    from vlmcheck.methods.chef.scenarios import load_scenario

    fs, root = memfs
    fs.pipe(f"{root}/pope/img/a.png", _png(1))
    rows = [{"id": "q1", "image": "img/a.png", "question": "Is there a cat in the image?", "answer": "yes"},
            {"id": "q2", "image": "img/a.png", "question": "Is there a dog in the image?", "answer": "no"}]
    fs.pipe(f"{root}/pope/pope.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())
    url = f"memory://{root}/pope/pope.jsonl"
    items = load_scenario("pope", url)
    assert [(i["image"], i["root"], i["answer"]) for i in items] == \
        [(f"memory://{root}/pope/img/a.png", f"memory://{root}/pope", 0),
         (f"memory://{root}/pope/img/a.png", f"memory://{root}/pope", 1)]
    res = run_task(ChefTask(ChefSpec(vlm="ref:describer", recipe=resolve_recipe("hallucination"), data=url)),
                   tmp_path / "run", RunOptions(progress=False, report=False, preflight=False))
    assert res.results["counts"]["done"] == 2
    with pytest.raises(ValueError, match="reads local files"):
        load_scenario("world", f"memory://{root}/world")
