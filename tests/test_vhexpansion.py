"""VHExpansion: symmetric accuracy, Theorems 1-2, POPE builder, attacks, the task end to end, export."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli

from vlmcheck.methods.pope import build_pope, load_annotations, question
from vlmcheck.methods.vhexpansion import VHExpansionTask, VHXSpec, export_expanded, load_cases
from vlmcheck.metrics.stats import symmetric_accuracy
from vlmcheck.run.runner import RunOptions, run_task
from vlmcheck.methods.vhx_negation import NEGATION_PROMPT


def test_symmetric_accuracy_by_hand():
    pairs = [(True, True), (True, False), (False, True), (True, True)]
    assert symmetric_accuracy(pairs) == 0.5
    assert symmetric_accuracy([(False, False)]) == 0.0


@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_random_guessers_theorems(p):
    """Theorem 2: E[symmetric accuracy] = p(1-p) whatever q; Theorem 1: accuracy = pq + (1-p)(1-q)."""
    rng = np.random.default_rng(0)
    n = 200_000
    for q in (0.1, 0.5, 0.9):
        truth = rng.random(n) < q
        guess, guess_neg = rng.random(n) < p, rng.random(n) < p
        acc = np.mean(guess == truth)
        sym = np.mean((guess == truth) & (guess_neg == ~truth))
        assert sym == pytest.approx(p * (1 - p), abs=0.005)
        assert acc == pytest.approx(p * q + (1 - p) * (1 - q), abs=0.005)


def _annotations(n=40, seed=0):
    rng = np.random.default_rng(seed)
    vocab = ["person", "apple", "car", "dog", "umbrella", "cup", "chair", "orange", "bus", "elephant", "kite"]
    rows = []
    for i in range(n):
        k = int(rng.integers(3, 6))
        objs = [str(o) for o in rng.choice(vocab[:8], size=k, replace=False)]
        rows.append({"image": f"img{i}.jpg", "objects": objs})
    return rows


@pytest.mark.parametrize("split", ["random", "popular", "adversarial"])
def test_pope_builder(split, tmp_path):
    ann = _annotations()
    cases = build_pope(ann, split, n_images=30, seed=1)
    assert len(cases) == 30 * 6
    assert sum(c["answer"] == "yes" for c in cases) == 90
    by_image: dict[str, list] = {}
    for c in cases:
        by_image.setdefault(c["image"], []).append(c)
    objects = {a["image"]: a["objects"] for a in ann}
    for img, cs in by_image.items():
        pos = [c["object"] for c in cs if c["answer"] == "yes"]
        assert pos == objects[img][:3]  # the first three annotated objects
        for c in cs:
            if c["answer"] == "no":
                assert c["object"] not in objects[img]  # never a present object as a negative
    assert question("apple") == "Is there an apple in the image?"
    assert question("umbrella") == "Is there an umbrella in the image?"
    assert question("car") == "Is there a car in the image?"
    assert build_pope(ann, split, n_images=30, seed=1) == cases
    # COCO instances JSON gives the same annotations
    coco = {"images": [{"id": i, "file_name": a["image"]} for i, a in enumerate(ann)],
            "categories": [{"id": j, "name": n} for j, n in enumerate(sorted({o for a in ann for o in a["objects"]}))]}
    ids = {c["name"]: c["id"] for c in coco["categories"]}
    coco["annotations"] = [{"image_id": i, "category_id": ids[o]} for i, a in enumerate(ann) for o in a["objects"]]
    (tmp_path / "inst.json").write_text(json.dumps(coco))
    assert load_annotations(tmp_path / "inst.json") == ann


def test_popular_and_adversarial_negatives():
    ann = _annotations()
    pop = build_pope(ann, "popular", n_images=40, seed=0)
    adv = build_pope(ann, "adversarial", n_images=40, seed=0)
    rnd = build_pope(ann, "random", n_images=40, seed=0)
    from collections import Counter

    # all 40 images are sampled, so the counts are over all of them; objects never annotated (bus, elephant,
    # kite) are not in POPE's vocabulary; ties may fall either way (seeded random)
    freq = Counter(o for a in ann for o in a["objects"])
    objects = {a["image"]: a["objects"] for a in ann}
    for img in {c["image"] for c in pop}:
        negs = [c["object"] for c in pop if c["image"] == img and c["answer"] == "no"]
        absent = sorted((o for o in freq if o not in objects[img]), key=lambda o: -freq[o])
        assert [freq[o] for o in negs] == [freq[o] for o in absent[:3]]  # the most popular absent, in order
        assert not set(negs) & {"bus", "elephant", "kite"}
    assert [c["object"] for c in adv] != [c["object"] for c in rnd]


@pytest.mark.slow  # a tiny HF model attacked: ~20 s of CPU each
@pytest.mark.parametrize("family", ["llava", "idefics3"])
def test_attack_on_tiny_hf_vlm(tmp_path, family, monkeypatch, capsys):
    monkeypatch.setenv("VLMCHECK_PROGRESS_EVERY", "0")  # a progress line for every attack step
    torch = pytest.importorskip("torch")
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    import hf_tiny
    from PIL import Image
    from skimage import data

    from vlmcheck.core.spec import load_model
    from vlmcheck.perturb.adversarial import AttackConfig, attack, expand_to_square

    model = load_model(f"hf:{getattr(hf_tiny, 'build_tiny_' + family)(tmp_path / family)}", "vlm")
    imgs = [Image.fromarray(data.astronaut()), Image.fromarray(data.chelsea()), Image.fromarray(data.coffee())]
    for method in ("ifgsm", "pgd"):
        res = attack(model, imgs, [False, True, False], AttackConfig(method=method, steps_clean=40,
                                                                     steps_hallucinated=20))
        colour = model.vision_pad_colour()
        for r, img in zip(res, imgs):
            # padded to a square with the processor's mean colour before resizing (expand2square)
            ref = np.asarray(expand_to_square(img.convert("RGB"), colour).resize(r.image.size, Image.BICUBIC),
                             dtype=np.int32)
            diff = np.abs(np.asarray(r.image, dtype=np.int32) - ref).max()
            assert diff <= 8 and r.linf == pytest.approx(diff / 255)  # the L-inf bound, exactly
        # chelsea is 451x300: its top rows are padding, within the budget of the mean colour
        top = np.asarray(res[1].image, dtype=np.int32)[0]
        assert np.abs(top - np.array(colour)).max() <= 8
        assert res[0].cosine_final < 0.95 and res[2].cosine_final < 0.95  # minimised
        assert res[1].cosine_final >= res[1].cosine_start - 1e-3 and res[1].cosine_final > 0.98  # maximised
        lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith(f"[attack {method}, 3 images]")]
        assert lines and lines[-1].split()[4].split("/")[1] == "60"  # 40 clean + 20 hallucinated steps in all
    del torch


@pytest.fixture(scope="module")
def world(world_of):
    return world_of(n=16, seed=4)


def _run(world, tmp_path, vlm, **kw):
    spec = VHXSpec(vlm=vlm, cases=str(world), perturb=["vhx_jpeg", "vhx_brightness", "fog:2"], **kw)
    return run_task(VHExpansionTask(spec), tmp_path, RunOptions(progress=False)).results


@pytest.mark.slow  # ~9 s of CPU
def test_vhexpansion_on_the_world(world, tmp_path):
    cases = load_cases(world)
    assert len(cases) == 32 and {c.answer for c in cases} == {"yes", "no"}
    res = _run(world, tmp_path / "clean", "ref:describer")
    m = res["metrics"]
    assert m["negation"] == {"ok": 32, "failed": 0}
    orig = m["variants"]["original"]
    assert orig["accuracy"] == 1.0 and orig["symmetric_accuracy"] == 1.0 and orig["new_vh_cases"] == 0
    assert set(m["variants"]) == {"original", "vhx_jpeg", "vhx_brightness", "fog:2"}
    assert m["variants"]["vhx_brightness"]["accuracy"] < 1.0  # brightened colours fool it sometimes
    biased = _run(world, tmp_path / "yes", "ref:describer?yes_bias=1")["metrics"]["variants"]["original"]
    assert biased["yes_ratio"] == 1.0
    assert biased["accuracy"] == pytest.approx(0.5)  # balanced cases
    assert biased["symmetric_accuracy"] == 0.0  # says yes to both a question and its negation
    rec = json.loads((tmp_path / "clean" / "samples.jsonl").read_text().splitlines()[0])["result"]
    assert rec["negation"]["ok"] and rec["variants"]["vhx_jpeg"]["image"].startswith("artifacts/")
    manifest = export_expanded(tmp_path / "clean", tmp_path / "export")
    rows = [json.loads(x) for x in manifest.read_text().splitlines()]
    assert len(rows) == 32 * (1 + 3 * 2)  # negated original + both questions on 3 perturbations
    assert all((tmp_path / "export" / r["image"]).is_file() for r in rows)
    assert {r["provenance"]["transformation"] for r in rows} == {"original", "vhx_jpeg", "vhx_brightness", "fog:2"}
    assert (tmp_path / "export" / "negations.csv").read_text().count("\n") == 33


def test_transfer_attack_with_a_surrogate_encoder(world, tmp_path):
    res = run_task(VHExpansionTask(VHXSpec(
        vlm="ref:describer", cases=str(world), perturb=[], attack="ifgsm", attack_target="ref:effnet",
        attack_config={"steps_clean": 3, "steps_hallucinated": 2})), tmp_path, RunOptions(progress=False,
                                                                                        limit=4)).results
    adv = res["metrics"]["variants"]["adv_ifgsm"]
    assert adv["linf_max"] <= 8 / 255 + 1e-9 and adv["cosine_final_mean"] < 1.0


def test_negation_prompt_is_the_papers():
    assert NEGATION_PROMPT.startswith("Rephrase the following question to be a negated question")
    assert "DO NOT CHANGE OR ADD ANY INFORMATION" in NEGATION_PROMPT
    assert NEGATION_PROMPT.endswith("The question is: {question}.")


def test_mmvp_questions_become_binary_cases(tmp_path):
    from PIL import Image

    (tmp_path / "MMVP Images").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "MMVP Images" / "1.jpg")
    (tmp_path / "Questions.csv").write_text(
        "Index,Question,Options,Correct Answer\n1,Is the dog facing left or right?,(a) Left (b) Right,(b)\n")
    cases = load_cases(tmp_path / "Questions.csv")
    # one case per question, as VHExpansion counts MMVP (300 questions, 300 cases): asked about option (a)
    assert [(c.question, c.answer) for c in cases] == [("Is the dog facing left or right? Is the answer 'Left'?", "no")]
    assert Path(cases[0].image).is_file()


def test_pope_counts_come_from_the_sampled_images_only():
    # "kite" is the most frequent object of all annotations but appears in no sampled image (images with fewer
    # than 3 objects are never sampled): POPE's code counts popularity and co-occurrence over the sampled
    # images, so it is never a negative.
    ann = [{"image": "a.jpg", "objects": ["dog", "cat", "cup"]},
           {"image": "b.jpg", "objects": ["dog", "cat", "car"]},
           {"image": "c.jpg", "objects": ["dog", "bus", "car"]},
           {"image": "d.jpg", "objects": ["tree", "bench", "car"]}]
    ann += [{"image": f"k{i}.jpg", "objects": ["kite", "bird"]} for i in range(10)]
    popular = build_pope(ann, "popular", n_images=4, seed=0)
    adversarial = build_pope(ann, "adversarial", n_images=4, seed=0)
    negs = {c["object"] for c in popular + adversarial if c["answer"] == "no"}
    assert not negs & {"kite", "bird"}
    # By hand: counts over a-d: dog 3, car 3, cat 2, cup, bus, tree, bench 1.  For a.jpg (dog, cat, cup) the
    # absent objects are car (3) and bus, tree, bench (1 each): popular takes car, then one of the tied three.
    first = [c["object"] for c in popular if c["image"] == "a.jpg" and c["answer"] == "no"]
    assert first[0] == "car" and len(set(first)) == 3 and set(first[1:]) <= {"bus", "tree", "bench"}
    # Adversarial, c.jpg (dog, bus, car): absent cat (co-occurs with dog in a and b: 2), cup (1), tree and
    # bench (0) -> cat for "dog".
    adv_c = [c for c in adversarial if c["image"] == "c.jpg" and c["answer"] == "no"]
    assert adv_c[0]["positive"] == "dog" and adv_c[0]["object"] == "cat"


def test_pope_ties_fall_back_to_a_seeded_random_choice():
    ann = [{"image": f"i{i}.jpg", "objects": ["dog", "cat", "cup"]} for i in range(3)]
    ann += [{"image": "j.jpg", "objects": ["car", "bus", "kite"]}]
    picks = set()
    for seed in range(12):
        cases = build_pope(ann, "popular", n_images=4, seed=seed)
        first = next(c for c in cases if c["image"] == "i0.jpg" and c["answer"] == "no")
        picks.add(first["object"])
        assert build_pope(ann, "popular", n_images=4, seed=seed) == cases  # seeded
    assert picks == {"car", "bus", "kite"}  # car, bus and kite tie at 1: each is chosen under some seed


def test_pope_then_vhx_run_on_a_coco_layout_folder(tmp_path):
    # The documented two-step on COCO's layout: annotations/instances_val2014.json and val2014/*.jpg.
    from PIL import Image

    coco = tmp_path / "coco"
    (coco / "annotations").mkdir(parents=True)
    (coco / "val2014").mkdir()
    ann = _annotations(n=12)
    for a in ann:
        Image.new("RGB", (16, 16), (len(a["objects"]) * 40, 90, 10)).save(coco / "val2014" / a["image"])
    cats = sorted({o for a in ann for o in a["objects"]})
    inst = {"images": [{"id": i, "file_name": a["image"]} for i, a in enumerate(ann)],
            "categories": [{"id": j, "name": n} for j, n in enumerate(cats)],
            "annotations": [{"image_id": i, "category_id": cats.index(o)} for i, a in enumerate(ann)
                            for o in a["objects"]]}
    (coco / "annotations" / "instances_val2014.json").write_text(json.dumps(inst))
    no_images = run_cli("vhx", "pope", "--annotations", str(coco / "annotations" / "instances_val2014.json"),
                        "--n-images", "4", "--out", str(coco / "p.jsonl"))
    assert no_images.returncode == 2 and "--images" in no_images.stderr
    p = run_cli("vhx", "pope", "--annotations", str(coco / "annotations" / "instances_val2014.json"), "--images",
                str(coco / "val2014"), "--n-images", "4", "--out", str(coco / "pope.jsonl"))
    assert p.returncode == 0, p.stderr
    rows = [json.loads(x) for x in (coco / "pope.jsonl").read_text().splitlines()]
    assert all(r["image"].startswith("val2014/") for r in rows)
    run = run_cli("vhx", "run", "--vlm", "ref:describer", "--cases", str(coco / "pope.jsonl"), "--perturb", "vhx_jpeg",
                  "--out", str(tmp_path / "run"), "--no-progress", "--max-failures", "1")
    assert run.returncode == 0, run.stderr
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    assert res["counts"]["done"] == 4 * 6 and not res["counts"]["errors_by_type"]  # every image was found


def test_an_attack_never_stalls_and_never_depends_on_its_batch():
    # A toy "vision embedding" whose gradient at the clean image is exactly zero (a squared distance from the
    # clean pixels, so cos(e0, e) sits at its maximum with zero slope): I-FGSM's sign(0) = 0 would never move.
    torch = pytest.importorskip("torch")
    from PIL import Image

    from vlmcheck.perturb.adversarial import AttackConfig, attack

    class Toy:
        device = "cpu"

        def __init__(self):
            self.ref = None

        def vision_input_size(self):
            return (8, 8)

        def vision_embedding(self, x):
            if self.ref is None:
                self.ref = x.detach().clone()
            d = (x - self.ref[: x.shape[0]]).flatten(1)
            return torch.cat([torch.ones(x.shape[0], 1), (d ** 2)], dim=1).to(torch.bfloat16)

    imgs = [Image.new("RGB", (8, 8), (10 * i, 100, 200)) for i in range(3)]
    cfg = AttackConfig(method="ifgsm", steps_clean=5, steps_hallucinated=3, epsilon=8 / 255)
    res = attack(Toy(), imgs, [False, False, False], cfg)
    assert all(r.random_start for r in res)  # the zero gradient was seen and recorded
    assert all(r.linf > 0 for r in res)  # and the attack moved
    # the middle image alone gives the same adversarial image as in its batch of three
    alone = attack(Toy(), imgs[1:2], [False], cfg)[0]
    assert np.array_equal(np.asarray(alone.image), np.asarray(res[1].image))


def test_repeats_give_mean_and_spread_and_the_export_marks_wrong_rows(tmp_path):
    # A VLM that answers "yes" on even seeds and "no" on odd ones: with 4 repetitions at temperature 1 the
    # accuracy per repetition alternates 1, 0, 1, 0 on a "yes" case (mean 0.5, std 0.5), and the negated
    # question ("no" expected) the other way round, so symmetric accuracy is 0 every time.
    from PIL import Image

    from vlmcheck.core.roles import Capabilities, Generation
    from vlmcheck.methods.vhexpansion import VHExpansionTask, VHXSpec, export_expanded
    from vlmcheck.run.runner import RunOptions, run_task

    class Flip:
        model_id = "test:flip"
        capabilities = Capabilities()
        temps = set()

        async def generate(self, messages, config):
            Flip.temps.add(config.temperature)
            return Generation(text="Yes." if (config.seed or 0) % 2 == 0 else "No.", finish_reason="stop")

    Image.new("RGB", (12, 12), "blue").save(tmp_path / "a.png")
    (tmp_path / "cases.jsonl").write_text(json.dumps({"id": "c", "image": "a.png", "question": "Is there a cat?",
                                                      "answer": "yes"}) + "\n")
    task = VHExpansionTask(VHXSpec(vlm="test:flip", cases=str(tmp_path / "cases.jsonl"), perturb=["vhx_jpeg"],
                                   repeats=4, temperature=1.0), vlm=Flip())
    res = run_task(task, tmp_path / "run", RunOptions(progress=False, report=False))
    rep = res.results["metrics"]["variants"]["original"]["repeats"]
    assert rep["accuracy"]["values"] == [1.0, 0.0, 1.0, 0.0]
    assert rep["accuracy"]["mean"] == 0.5 and rep["accuracy"]["std"] == 0.5
    assert rep["symmetric_accuracy"]["values"] == [0.0] * 4 and Flip.temps == {1.0}
    export_expanded(tmp_path / "run", tmp_path / "x")
    rows = [json.loads(x) for x in (tmp_path / "x" / "expanded.jsonl").read_text().splitlines()]
    neg_rows = [r for r in rows if r["provenance"]["question"] == "negated question"]
    # repetition 0 answered "yes": wrong on every negated question, which the export marks
    assert neg_rows and all(r["model_answer"] == "yes" and r["model_correct"] is False for r in neg_rows)
    jpeg = [r for r in rows if r["provenance"]["transformation"] == "vhx_jpeg" and
            r["provenance"]["question"] == "original question"]
    assert jpeg and all(r["model_correct"] is True for r in jpeg)


def test_expand_to_square_by_hand():
    from PIL import Image

    from vlmcheck.perturb.adversarial import expand_to_square

    img = Image.new("RGB", (4, 2), (255, 0, 0))
    sq = np.asarray(expand_to_square(img, (1, 2, 3)))
    assert sq.shape == (4, 4, 3)
    assert (sq[0] == (1, 2, 3)).all() and (sq[3] == (1, 2, 3)).all()  # one padding row above, one below
    assert (sq[1:3] == (255, 0, 0)).all()
    tall = np.asarray(expand_to_square(Image.new("RGB", (1, 3), (9, 9, 9)), (0, 0, 0)))
    assert (tall[:, 1] == 9).all() and (tall[:, 0] == 0).all() and (tall[:, 2] == 0).all()
