"""VHExpansion's fine-tuning loop (paper section 5.4): training data from expanded cases, LoRA through peft,
``hf:...?adapter=``, and before/after comparison.  Tiny randomly initialised models built from configs and
loaded back with ``from_pretrained`` (tests/hf_tiny.py); no download."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from conftest import run_cli
from PIL import Image

from hf_tiny import build_tiny_idefics3, build_tiny_llava

pytest.importorskip("peft")

from vlmcheck.core.files import InputFileError  # noqa: E402
from vlmcheck.core.spec import load_model  # noqa: E402
from vlmcheck.finetune.compare import compare_vhx  # noqa: E402
from vlmcheck.finetune.data import build_dataset, split_images  # noqa: E402
from vlmcheck.finetune.train import IGNORE, AnswerOnlyCollator, FinetuneConfig, finetune, lora_targets  # noqa: E402
from vlmcheck.world.paraphraser import paraphrase  # noqa: E402

WORDS = tuple("Yes No Is is there no red green blue circle square star in the image ? picture Looking at "
              "Please answer yes or no . Based on what you can see , Is it false that".split())


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def vhx_run(tmp_path_factory):
    """A world of 6 scenes (12 yes/no cases) and a VHExpansion run of ref:describer with one perturbation."""
    root = tmp_path_factory.mktemp("vhxft")
    run_cli("world", "make", str(root / "w"), "--n", "6", check=True)
    run_cli("vhx", "run", "--vlm", "ref:describer", "--cases", str(root / "w"), "--out", str(root / "run"), "--perturb",
            "vhx_jpeg", "--no-progress", check=True)
    return root / "run"


@pytest.fixture(scope="module")
def tiny_llava(tmp_path_factory):
    return build_tiny_llava(tmp_path_factory.mktemp("llava"), words=WORDS)


# ------------------------------------------------------------------------------------------------ the data

def test_the_reference_paraphraser_keeps_the_question(tmp_path):
    q = "Is there a red circle in the image?"
    assert paraphrase(q, 1) == "Looking at the image, is there a red circle in the image?"
    assert paraphrase(q, 2) == "Based on what you can see, is there a red circle in the image?"
    assert paraphrase(q, 3) == "Is there a red circle in the picture?"
    assert paraphrase(q, 4) == "Please answer yes or no. Is there a red circle in the image?"
    assert paraphrase("Does the dog run?", 3) == "In this picture, does the dog run?"  # no word to swap
    assert len({paraphrase(q, v) for v in range(1, 9)}) == 8


def test_split_is_by_image_seeded_and_sized():
    digests = [f"{i:02d}" for i in range(10)] * 3  # 10 images, 3 cases each
    train, held = split_images(digests, 0.3, seed=1)
    assert len(train) == 3 and len(held) == 7 and not set(train) & set(held)
    assert split_images(digests, 0.3, seed=1) == (train, held)
    assert any(split_images(digests, 0.3, seed=s)[0] != train for s in range(2, 8))
    assert split_images(["a", "b"], 0.99, seed=0)[1]  # always one image held out
    assert split_images(["a", "b"], 0.01, seed=0)[0]  # and one trained on


@pytest.mark.slow
def test_dataset_from_expanded_cases_never_trains_on_a_held_out_image(vhx_run, tmp_path):
    out = tmp_path / "ds"
    build = build_dataset([vhx_run], out, rephraser=load_model("ref:paraphraser", "text"), k=2, seed=0,
                          variants=["original", "adversarial", "vhx_jpeg"])
    records = [json.loads(x) for x in (vhx_run / "samples.jsonl").read_text().splitlines()]
    by_digest: dict[str, list[dict]] = {}
    for rec in records:
        by_digest.setdefault(_sha(Path(rec["result"]["image"])), []).append(rec)
    train_d, held_d = set(build["split"]["train_images"]), set(build["split"]["heldout_images"])
    assert train_d | held_d == set(by_digest) and not train_d & held_d
    assert len(train_d) == 3  # round(0.5 * 6 images)

    # by hand: each training case gives (original + 1 perturbation) x (question + its negation if checked),
    # and each such row k = 2 rephrased rows
    expanded = sum(2 * (1 + bool(r["result"]["negation"]["ok"])) for d in train_d for r in by_digest[d])
    rows = [json.loads(x) for x in (out / "train.jsonl").read_text().splitlines()]
    assert build["counts"]["expanded_rows"] == expanded == sum(r["rephrase_of"] is None for r in rows)
    left = build["counts"]["rephrasings_left_out"]
    assert build["counts"]["rephrased_rows"] == 2 * expanded - left["failed"] - left["unchanged_or_repeated"]
    assert {r["variant"] for r in rows} == {"original", "vhx_jpeg"}

    # no training image is a held-out image or any version of one
    held_cases = {r["sample_id"] for d in held_d for r in by_digest[d]}
    assert not {r["source_case"] for r in rows} & held_cases
    held_files = {_sha(out / json.loads(x)["image"]) for x in (out / "heldout.jsonl").read_text().splitlines()}
    assert held_files == held_d
    assert not {_sha(out / r["image"]) for r in rows} & held_d

    # a negated question carries the flipped answer; a rephrasing keeps its row's answer
    for r in rows:
        src = next(rec["result"] for rec in records if rec["sample_id"] == r["source_case"])
        flip = {"yes": "no", "no": "yes"}[src["answer"]]
        assert r["answer"] == (src["answer"] if r["question_kind"].startswith("original") else flip)
    llava = json.loads((out / "llava.json").read_text())
    assert len(llava) == len(rows)
    one = next(x for x in llava if x["id"] == rows[0]["id"])
    assert one["conversations"] == [{"from": "human", "value": "<image>\n" + rows[0]["question"]},
                                    {"from": "gpt", "value": rows[0]["answer"].capitalize()}]
    # the held-out cases are a cases file for `vhx run`
    from vlmcheck.methods.vhexpansion import load_cases

    assert len(load_cases(out / "heldout.jsonl")) == build["counts"]["heldout_cases"] == len(held_cases)
    datasets = pytest.importorskip("datasets")
    d = datasets.load_from_disk(str(out / "hf"))
    assert d["train"].num_rows == len(rows) and d["heldout"].num_rows == len(held_cases)
    assert d["train"][0]["image"].size == Image.open(out / rows[0]["image"]).size
    assert json.loads((out / "build.json").read_text())["seed"] == 0


@pytest.mark.slow
def test_the_default_expansion_is_negation_x_original_and_adversarial(tmp_path):
    # paper 5.4: each case gives (original, adversarial image) x (question, negated question), each rephrased
    # k times: 2 x 2 x (1 + k) rows.  A run with one common perturbation and an attack: the common one is left
    # out unless named.
    root = tmp_path
    run_cli("world", "make", str(root / "w"), "--n", "2", "--size", "96", check=True)
    run_cli("vhx", "run", "--vlm", "ref:describer", "--cases", str(root / "w"), "--out", str(root / "run"), "--perturb",
            "vhx_jpeg", "--attack", "ifgsm", "--attack-target", "ref:effnet", "--steps-clean", "2",
            "--steps-hallucinated", "2", "--no-progress", check=True)
    records = [json.loads(x)["result"] for x in (root / "run" / "samples.jsonl").read_text().splitlines()]
    assert all(set(r["variants"]) == {"original", "vhx_jpeg", "adv_ifgsm"} for r in records)
    paper = build_dataset([root / "run"], root / "paper", k=0, train_fraction=0.5, seed=0)
    more = build_dataset([root / "run"], root / "more", k=0, train_fraction=0.5, seed=0,
                         variants=["original", "adversarial", "vhx_jpeg"])
    trained = [r for r in records if _sha(Path(r["image"])) in set(paper["split"]["train_images"])]
    by_hand = sum(2 * (1 + bool(r["negation"]["ok"])) for r in trained)  # 2 variants x questions
    assert paper["counts"]["expanded_rows"] == by_hand and paper["variants"] == ["original", "adversarial"]
    assert more["counts"]["expanded_rows"] == by_hand * 3 // 2  # 3 variants
    rows = [json.loads(x) for x in (root / "paper" / "train.jsonl").read_text().splitlines()]
    assert {r["variant"] for r in rows} == {"original", "adv_ifgsm"}
    assert json.loads((root / "paper" / "build.json").read_text())["variants"] == ["original", "adversarial"]


@pytest.mark.slow
def test_vqa_mix_is_sampled_and_confined(vhx_run, tmp_path):
    vqa = tmp_path / "vqa"
    vqa.mkdir()
    for i in range(5):
        Image.new("RGB", (8, 8), (i, 0, 0)).save(vqa / f"{i}.png")
    recs = [{"id": str(i), "image": f"{i}.png", "conversations": [{"from": "human", "value": "<image>\nWhat?"},
                                                                    {"from": "gpt", "value": "red"}]}
            for i in range(5)]
    (vqa / "llava.json").write_text(json.dumps(recs))
    build = build_dataset([vhx_run], tmp_path / "ds", k=0, vqa=vqa / "llava.json", vqa_n=3)
    llava = json.loads((tmp_path / "ds" / "llava.json").read_text())
    mixed = [x for x in llava if x["id"].startswith("vqa-")]
    assert build["counts"]["vqa_rows"] == len(mixed) == 3
    assert all((tmp_path / "ds" / x["image"]).is_file() for x in mixed)
    recs[0]["image"] = "../../etc/passwd"
    (vqa / "llava.json").write_text(json.dumps(recs))
    with pytest.raises(Exception, match="outside"):
        build_dataset([vhx_run], tmp_path / "ds2", k=0, vqa=vqa / "llava.json", vqa_n=5)


# ------------------------------------------------------------------------------------------- the loss mask

def _row(question="Is there a red circle in the image ?", answer="Yes", image="x.png"):
    return {"id": "r", "image": image, "conversations": [{"from": "human", "value": "<image>\n" + question},
                                                          {"from": "gpt", "value": answer}]}


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llava", "idefics3"])
def test_loss_is_on_the_answer_tokens_only(family, tiny_llava, tmp_path):
    from transformers import AutoProcessor

    folder = tiny_llava if family == "llava" else build_tiny_idefics3(tmp_path / "idefics3", words=WORDS)
    Image.new("RGB", (40, 30), (200, 10, 10)).save(tmp_path / "x.png")
    processor = AutoProcessor.from_pretrained(folder)
    tok = processor.tokenizer
    collator = AnswerOnlyCollator(processor, tmp_path)
    _, ids, labels = collator.encode(_row())
    # the tiny chat template renders "... </s> assistant: Yes </s> ": the supervised tokens are the answer and
    # its end-of-turn </s>, and nothing else - not the prompt, not the image tokens
    assert tok.convert_ids_to_tokens(ids[-4:]) == ["assistant", ":", "Yes", "</s>"]
    expected = [IGNORE] * (len(ids) - 2) + tok.convert_tokens_to_ids(["Yes", "</s>"])
    assert labels == expected
    # two turns: both answers are supervised, the second question is not
    two = _row()
    two["conversations"] += [{"from": "human", "value": "Is it blue ?"}, {"from": "gpt", "value": "No"}]
    _, ids2, labels2 = collator.encode(two)
    kept = [tok.convert_ids_to_tokens(i) for i in labels2 if i != IGNORE]
    assert kept == ["Yes", "</s>", "No", "</s>"]
    # a batch pads on the right with ignored labels and keeps each row's labels
    batch = collator([two, _row(answer="No")])
    assert batch["labels"].shape == batch["input_ids"].shape
    assert batch["labels"][0].tolist() == labels2
    n = len(ids)
    assert batch["labels"][1, :n].tolist() == expected[:-2] + tok.convert_tokens_to_ids(["No", "</s>"])
    assert set(batch["labels"][1, n:].tolist()) <= {IGNORE}
    # model_max_length cuts a conversation at its end, labels with it; never through the image tokens
    short = AnswerOnlyCollator(processor, tmp_path, max_length=len(ids2) - 3)
    cut = short([two])
    assert cut["input_ids"].shape[1] == len(ids2) - 3 and cut["labels"][0].tolist() == labels2[:len(ids2) - 3]
    if family == "llava":
        with pytest.raises(ValueError, match="model_max_length"):
            AnswerOnlyCollator(processor, tmp_path, max_length=2)([two])


@pytest.mark.slow
def test_lora_targets_are_the_language_model_linears_only(tiny_llava):
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(tiny_llava)
    targets = lora_targets(model)
    assert targets and all(".language_model." in t for t in targets)
    # 2 layers x (q, k, v, o, gate, up, down)
    assert len(targets) == 14


# ---------------------------------------------------------------------------------------- training itself

def _data(tmp_path: Path, n: int = 8) -> Path:
    data = tmp_path / "data"
    (data / "images").mkdir(parents=True)
    rows = []
    for i in range(n):
        colour, red = ((200, 10, 10), True) if i % 2 == 0 else ((10, 10, 200), False)
        Image.new("RGB", (32, 32), colour).save(data / "images" / f"{i}.png")
        rows.append({**_row(answer="Yes" if red else "No", image=f"images/{i}.png"), "id": f"r{i}"})
    (data / "llava.json").write_text(json.dumps(rows))
    return data


def _cfg(model: Path, data: Path, out: Path, **kw) -> FinetuneConfig:
    base = dict(model=f"hf:{model}?device=cpu", data=str(data), out=str(out), learning_rate=1e-2, max_steps=6,
                lora_r=4, lora_alpha=8, batch_size=4, save_steps=3, probe_rows=8)
    return FinetuneConfig(**{**base, **kw})


@pytest.mark.slow
def test_lora_steps_change_only_adapter_weights_and_lower_the_loss(tiny_llava, tmp_path):
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForImageTextToText, TrainerCallback

    seen = {}

    class Grab(TrainerCallback):
        def on_train_end(self, args, state, control, model=None, **kw):
            seen["params"] = {n: p.detach().clone() for n, p in model.named_parameters()}

    rec = finetune(_cfg(tiny_llava, _data(tmp_path), tmp_path / "adapter"), callbacks=[Grab()], progress=False)
    assert rec["global_step"] == 6 and rec["finished"]
    assert rec["probe_loss_after"] < rec["probe_loss_before"]
    base = dict(AutoModelForImageTextToText.from_pretrained(tiny_llava).named_parameters())
    changed_lora = changed_projector = 0
    for name, value in seen["params"].items():
        if "lora_" in name:
            changed_lora += bool(("lora_B" in name) and value.abs().sum() > 0)  # B starts at zero
            continue
        if ".modules_to_save.default." in name:  # the projector's trained copy (LLaVA-1.5: mm_projector_lr)
            plain = name.replace("base_model.model.", "").replace(".modules_to_save.default", "")
            changed_projector += not torch.equal(value, base[plain])
            continue
        plain = name.replace("base_model.model.", "").replace(".base_layer", "").replace(".original_module", "")
        assert torch.equal(value, base[plain]), name  # every base weight is untouched
    assert changed_lora == 14
    assert rec["projector_lr"] == 2e-5 and rec["projector_modules"] == ["model.multi_modal_projector"]
    assert changed_projector == 4  # linear_1 and linear_2, weight and bias
    saved = load_file(str(tmp_path / "adapter" / "adapter_model.safetensors"))
    assert saved and all("lora_" in k or "multi_modal_projector" in k for k in saved)
    assert rec["trainable_parameters"] == sum(v.numel() for v in saved.values())
    # 0 freezes the projector: only the adapter trains
    frozen = finetune(_cfg(tiny_llava, _data(tmp_path / "f"), tmp_path / "frozen", projector_lr=0.0, max_steps=1),
                      progress=False)
    assert frozen["projector_modules"] == [] and frozen["projector_lr"] == 0.0
    saved = load_file(str(tmp_path / "frozen" / "adapter_model.safetensors"))
    assert all("lora_" in k for k in saved)
    # the paper's defaults are the defaults
    d = FinetuneConfig(model="hf:x", data="d", out="o")
    assert (d.learning_rate, d.epochs, d.lora_r, d.lora_alpha) == (1.8e-6, 1.0, 128, 256)
    assert (d.projector_lr, d.model_max_length) == (None, 2048)  # None: 2e-5 for LLaVA-family models


@pytest.mark.slow
def test_the_adapter_loads_through_the_spec_and_changes_answers(tiny_llava, tmp_path):
    import asyncio

    from vlmcheck.core.messages import Message
    from vlmcheck.core.roles import GenerationConfig

    data = _data(tmp_path)
    finetune(_cfg(tiny_llava, data, tmp_path / "adapter", max_steps=30), progress=False)
    red, blue = Image.open(data / "images" / "0.png"), Image.open(data / "images" / "1.png")

    def answer(spec: str, img=red) -> tuple[str, str]:
        m = load_model(spec, "vlm")
        ask = [Message.user(img, "Is there a red circle in the image ?")]
        return m.model_id, asyncio.run(m.generate(ask, GenerationConfig(max_tokens=3))).text

    base_id, base_text = answer(f"hf:{tiny_llava}?device=cpu")
    ad_id, ad_text = answer(f"hf:{tiny_llava}?device=cpu&adapter={tmp_path / 'adapter'}")
    merged_id, merged_text = answer(f"hf:{tiny_llava}?device=cpu&adapter={tmp_path / 'adapter'}&merge=1")
    # the training data answer "Yes" for the red images and "No" for the blue ones; the base model does not
    assert base_text != "Yes" and ad_text == "Yes"
    assert answer(f"hf:{tiny_llava}?device=cpu&adapter={tmp_path / 'adapter'}", blue)[1] == "No"
    assert merged_text == ad_text
    assert "adapter_sha256=" in ad_id and ad_id != base_id
    # another adapter at the same path is another model in the cache
    finetune(_cfg(tiny_llava, data, tmp_path / "adapter2", max_steps=2), progress=False)
    import shutil

    shutil.rmtree(tmp_path / "adapter")
    shutil.copytree(tmp_path / "adapter2", tmp_path / "adapter")
    assert answer(f"hf:{tiny_llava}?device=cpu&adapter={tmp_path / 'adapter'}")[0] != ad_id
    with pytest.raises(Exception, match="adapter_config.json"):
        load_model(f"hf:{tiny_llava}?device=cpu&adapter={tmp_path}", "vlm")


@pytest.mark.slow
def test_a_killed_finetune_resumes_from_its_checkpoint(tiny_llava, tmp_path):
    import torch
    from safetensors.torch import load_file
    from transformers import TrainerCallback

    class Kill(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == 4:
                raise KeyboardInterrupt("killed")

    data = _data(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        finetune(_cfg(tiny_llava, data, tmp_path / "a"), callbacks=[Kill()], progress=False)
    assert (tmp_path / "a" / "checkpoints" / "checkpoint-3").is_dir()
    assert not (tmp_path / "a" / "adapter_model.safetensors").exists()
    rec = finetune(_cfg(tiny_llava, data, tmp_path / "a"), progress=False)
    assert rec["resumed_from"] == "checkpoint-3" and rec["global_step"] == 6
    straight = finetune(_cfg(tiny_llava, data, tmp_path / "b"), progress=False)
    assert straight["resumed_from"] is None
    a = load_file(str(tmp_path / "a" / "adapter_model.safetensors"))
    b = load_file(str(tmp_path / "b" / "adapter_model.safetensors"))
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)  # the same training, interrupted or not
    # other data in the same folder is refused, not silently mixed
    rows = json.loads((data / "llava.json").read_text())
    (data / "llava.json").write_text(json.dumps(rows[:4]))
    with pytest.raises(Exception, match="other data or settings"):
        finetune(_cfg(tiny_llava, data, tmp_path / "a"), progress=False)


@pytest.mark.slow
def test_a_second_family_trains_through_the_same_path(tmp_path):
    folder = build_tiny_idefics3(tmp_path / "idefics3", words=WORDS)
    rec = finetune(_cfg(folder, _data(tmp_path), tmp_path / "adapter", max_steps=4), progress=False)
    assert rec["global_step"] == 4 and rec["probe_loss_after"] < rec["probe_loss_before"]
    assert rec["lora_target_layers"] == 14  # the text model's linears, not the vision model's or connector's


# ------------------------------------------------------------------------------------------ before / after

def _fake_run(folder: Path, task: str, rows: list[tuple[str, str, dict[str, tuple[bool, bool]]]],
              vlm: str = "m") -> Path:
    """A finished run folder: rows of (case id, dataset, variant -> (correct, negation correct))."""
    folder.mkdir()
    recs = []
    for sid, ds, variants in rows:
        recs.append({"sample_id": sid, "status": "done", "result": {
            "meta": {"dataset": ds}, "variants": {v: {"correct": c, "neg_correct": n} for v, (c, n) in variants.items()}}})
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (folder / "results.json").write_text(json.dumps({"task": task, "spec": {"task_spec": {"vlm": vlm}},
                                                     "metrics": {}, "counts": {}}))
    return folder


@pytest.mark.slow
def test_compare_gives_accuracy_and_symmetric_accuracy_before_and_after(tmp_path):
    before = _fake_run(tmp_path / "before", "vhexpansion", [
        ("a", "mmvp", {"original": (True, False), "adv": (False, False)}),
        ("b", "mmvp", {"original": (True, True), "adv": (True, False)}),
        ("c", "pope", {"original": (False, True), "adv": (False, True)}),
        ("gone", "pope", {"original": (True, True)})], vlm="base")
    after = _fake_run(tmp_path / "after", "vhexpansion", [
        ("a", "mmvp", {"original": (True, True), "adv": (True, True)}),
        ("b", "mmvp", {"original": (True, True), "adv": (True, False)}),
        ("c", "pope", {"original": (True, True), "adv": (False, True)})], vlm="tuned")
    cmp = compare_vhx(before, after)
    assert cmp["cases"] == {"compared": 3, "only_before": 1, "only_after": 0}
    rows = {(r["dataset"], r["variant"]): r for r in cmp["rows"]}
    # by hand: mmvp original: accuracy 2/2 -> 2/2; symmetric (a: T,F; b: T,T) 1/2 -> 2/2
    def pick(cell):  # the three numbers; the paired test beside them is checked in test_decisions.py
        return {k: cell[k] for k in ("before", "after", "delta")}

    assert pick(rows["mmvp", "original"]["accuracy"]) == {"before": 1.0, "after": 1.0, "delta": 0.0}
    assert pick(rows["mmvp", "original"]["symmetric_accuracy"]) == {"before": 0.5, "after": 1.0, "delta": 0.5}
    # one case changed (a: right after only): McNemar's exact p = 1 on one discordant pair
    assert rows["mmvp", "original"]["symmetric_accuracy"]["p_value"] == 1.0
    # mmvp adv: accuracy 1/2 -> 2/2; symmetric 0/2 -> 1/2
    assert rows["mmvp", "adv"]["accuracy"]["before"] == 0.5 and rows["mmvp", "adv"]["accuracy"]["after"] == 1.0
    assert pick(rows["mmvp", "adv"]["symmetric_accuracy"]) == {"before": 0.0, "after": 0.5, "delta": 0.5}
    # all, original: accuracy 2/3 -> 3/3; symmetric 1/3 -> 3/3 ("gone" is left out: not in both runs)
    assert rows["all", "original"]["accuracy"]["before"] == pytest.approx(2 / 3)
    assert rows["all", "original"]["symmetric_accuracy"]["after"] == 1.0
    assert rows["all", "original"]["n"] == 3
    assert [r["dataset"] for r in cmp["rows"]][-1] == "all"
    # the general-ability pair: headline metrics side by side
    gb = _fake_run(tmp_path / "gb", "vhexpansion", [("a", "x", {"original": (True, True)})])
    ga = _fake_run(tmp_path / "ga", "vhexpansion", [("a", "x", {"original": (True, True)})])
    for f, acc in ((gb, 0.25), (ga, 0.75)):
        res = json.loads((f / "results.json").read_text())
        res["metrics"] = {"variants": {"original": {"accuracy": acc, "symmetric_accuracy": acc}},
                          "headline": {"name": "symmetric accuracy", "value": acc, "ci95": None, "interval": None}}
        (f / "results.json").write_text(json.dumps(res))
    g = compare_vhx(before, after, [(gb, ga)])["general"][0]
    assert (g["before"], g["after"], g["delta"]) == (0.25, 0.75, 0.5)
    # a run whose results.json records no headline: one sentence naming the version that wrote it
    res = json.loads((gb / "results.json").read_text())
    del res["metrics"]["headline"]
    (gb / "results.json").write_text(json.dumps({**res, "spec": {**(res.get("spec") or {}), "vlmcheck_version": "0.0.9"}}))
    with pytest.raises(InputFileError, match=r"--general .*written by vlmcheck 0\.0\.9\) records no headline"):
        compare_vhx(before, after, [(gb, ga)])

    proc = run_cli("vhx", "compare", str(before), str(after), "--out", str(tmp_path / "cmp"))
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "cmp" / "report.html").read_text()
    assert "Before and after fine-tuning" in page and "tuned" in page
    assert json.loads((tmp_path / "cmp" / "compare.json").read_text())["rows"] == json.loads(json.dumps(cmp["rows"]))
    chef = _fake_run(tmp_path / "chef", "chef", [])
    proc = run_cli("vhx", "compare", str(chef), str(after))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "--general" in proc.stderr
