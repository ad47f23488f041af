"""``vlmcheck vhx run|pope|export|dataset|finetune|compare``: VHExpansion and its fine-tuning (finetune/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..core.files import write_text_atomic
from ..core.spec import load_model
from . import _common as C

vhx_app = typer.Typer(no_args_is_help=True, help="VHExpansion: expand yes/no hallucination test cases.")


@vhx_app.command("run")
@C.run_command
def vhx_run(
    vlm: str = C.VLM,
    cases: str = C.source("--cases", "JSONL/CSV (image, question, answer; a path or an fsspec URL) or a world folder"),
    benchmark: Optional[str] = C.BENCHMARK,
    out: Path = C.RUN_FOLDER,
    negator: str = typer.Option("ref:negator", "--negator", metavar="SPEC",
                                help="TextModel spec for negation (paper prompt)"),
    perturb: str = typer.Option("vhx_gaussian_noise,vhx_brightness,vhx_defocus_blur,vhx_jpeg", "--perturb",
                                metavar="NAMES", help="Comma-separated corruptions (name or name:severity); '' for "
                                                      "none",
                                show_default="the paper's four, vhx_gaussian_noise, vhx_brightness, "
                                             "vhx_defocus_blur and vhx_jpeg"),
    attack: Optional[str] = typer.Option(None, "--attack", metavar="ifgsm|pgd", help="ifgsm or pgd"),
    attack_target: Optional[str] = typer.Option(None, "--attack-target", metavar="SPEC",
                                                help="Encoder spec to attack instead of the VLM (transfer)"),
    epsilon: float = typer.Option(8 / 255, "--epsilon", metavar="EPS", parser=C.fraction, show_default="8/255",
                                  help="The attack's L-inf radius in pixel intensity on a 0-1 scale: 8/255 moves "
                                       "each channel at most 8 of its 255 levels (a fraction or a decimal)"),
    steps_clean: int = typer.Option(500, "--steps-clean", min=0, metavar="N",
                                    help="Attack iterations on a case answered right: the image's embedding "
                                         "pushed away from the original's (least cosine; paper: 500)"),
    steps_hallucinated: int = typer.Option(100, "--steps-hallucinated", min=0, metavar="N",
                                           help="Attack iterations on a case answered wrong: from random noise "
                                                "back towards the original's embedding (most cosine, stopping "
                                                "early; paper: 100)"),
    repeats: int = typer.Option(1, "--repeats", min=1, metavar="N",
                                help="Ask every question N times (Table 6e): mean and std"),
    temperature: float = typer.Option(0.0, "--temperature", min=0.0, metavar="T",
                                      help="Decoding temperature (Table 6f)"),
    blind: bool = C.BLIND,
    run: C.RunArgs = None,
) -> None:
    """Negation, common and adversarial perturbations; accuracy and symmetric accuracy per variant."""
    from ..methods.vhexpansion import VHExpansionTask

    C.run_method(C.method_task(
        VHExpansionTask, vlm, run, cases=str(C.with_benchmark(cases, benchmark)), negator=negator or None,
        perturb=[p.strip() for p in perturb.split(",") if p.strip()], attack=attack, attack_target=attack_target,
        attack_config={"epsilon": epsilon, "steps_clean": steps_clean, "steps_hallucinated": steps_hallucinated,
                       "seed": run.seed}, repeats=repeats, temperature=temperature, blind=blind), out, run)


@vhx_app.command("pope")
def vhx_pope(
    annotations: Path = typer.Option(..., "--annotations", metavar="PATH",
                                     help="COCO instances JSON or JSONL image,objects"),
    split: str = typer.Option("random", "--split", metavar="SPLIT", help="random, popular or adversarial"),
    n_images: int = typer.Option(500, "--n-images", min=1, metavar="N",
                                 help="Images sampled from the annotations (POPE: 500)"),
    seed: int = C.SEED,
    images: Optional[Path] = typer.Option(None, "--images", metavar="DIR",
                                          help="Folder of the images (COCO: val2014/); default: beside the "
                                               "annotations"),
    out: Path = typer.Option(..., "--out", metavar="FILE", help="Output JSONL of cases"),
) -> None:
    """Build a POPE split (3 positives + 3 negatives per image) as VHExpansion cases."""
    from ..methods.pope import write_pope_cases

    with C.user_errors(KeyError):
        n, outside = write_pope_cases(annotations, split, out, n_images=n_images, seed=seed, images=images)
    C.console.print(f"[green]wrote[/green] {n} cases ({split}) to {out}", highlight=False)
    if outside:
        C.console.print(f"[yellow]note:[/yellow] the images lie outside {out.parent}; `vhx run` reads them only "
                        "with --allow-outside (or write the cases inside the dataset's folder)", highlight=False)


@vhx_app.command("export")
def vhx_export(
    run: Path = typer.Argument(..., metavar="RUN", help="A finished vhx run folder"),
    out: Path = typer.Option(..., "--out", metavar="DIR", help="Folder for expanded.jsonl, images/, negations.csv"),
) -> None:
    """Export the expanded dataset with provenance, and the negations for human review."""
    from ..methods.vhexpansion import export_expanded

    with C.user_errors():
        manifest = export_expanded(run, out)
    C.console.print(f"[green]wrote[/green] {manifest} and {out / 'negations.csv'}", highlight=False)


@vhx_app.command("dataset")
def vhx_dataset(
    runs: list[Path] = typer.Argument(..., metavar="RUN...", help="Finished vhx run folders"),
    out: Path = typer.Option(..., "--out", metavar="DIR", help="Folder for the training data"),
    rephraser: str = typer.Option("ref:paraphraser", "--rephraser", metavar="SPEC",
                                  help="TextModel spec that rephrases each question k times"),
    k: int = typer.Option(4, "--k", min=0, metavar="K", help="Rephrasings per question (paper: 4); 0 for none"),
    train_fraction: float = typer.Option(0.5, "--train-fraction", metavar="F",
                                         help="Share of source images trained on; the rest is held out"),
    vqa: Optional[Path] = typer.Option(None, "--vqa", metavar="FILE",
                                       help="General VQA data in LLaVA's JSON format to mix in"),
    vqa_n: int = typer.Option(4000, "--vqa-n", min=1, metavar="N", help="Records sampled from --vqa (paper: 4,000)"),
    variants: str = typer.Option("original,adversarial", "--variants", metavar="NAMES",
                                 help="Image variants trained on (paper: original,adversarial); add common "
                                      "perturbations by name, e.g. vhx_jpeg"),
    api_key: Optional[str] = C.API_KEY,
    seed: int = C.SEED,
) -> None:
    """Training data from expanded cases, split by image (held-out cases for `vhx run` before and after)."""
    from ..finetune.data import build_dataset

    C.setup_logging()
    with C.user_errors(FileNotFoundError):
        model = load_model(C.spec_with_key(rephraser, api_key), "text") if k else None
        build = build_dataset(runs, out, rephraser=model, k=k, train_fraction=train_fraction, seed=seed, vqa=vqa,
                              vqa_n=vqa_n, variants=[v.strip() for v in variants.split(",") if v.strip()])
    c = build["counts"]
    left = c["rephrasings_left_out"]
    C.console.print(f"[green]wrote[/green] {c['train_rows']} training rows ({c['expanded_rows']} expanded cases + "
                    f"{c['rephrased_rows']} rephrasings) from {c['train_images']} images, {c['vqa_rows']} VQA "
                    f"records, and {c['heldout_cases']} held-out cases on {c['heldout_images']} other images to "
                    f"{out}", highlight=False)
    if left["failed"] or left["unchanged_or_repeated"]:
        C.console.print(f"[yellow]note:[/yellow] rephrasings left out: {left['failed']} failed (first: "
                        f"{left['first_error']}), {left['unchanged_or_repeated']} unchanged or repeated")
    C.console.print(f"next: vlmcheck vhx finetune --model hf:MODEL --data {out} --out ADAPTER; evaluate with "
                    f"vlmcheck vhx run --cases {out / 'heldout.jsonl'}", highlight=False)


@vhx_app.command("finetune")
def vhx_finetune(
    model: str = typer.Option(..., "--model", metavar="SPEC", help="hf:REPO_OR_PATH of the base model"),
    data: Path = typer.Option(..., "--data", metavar="PATH", help="A `vhx dataset` folder (or a LLaVA JSON file)"),
    out: Path = typer.Option(..., "--out", metavar="DIR", help="Folder for the LoRA adapter; re-run to resume"),
    learning_rate: float = typer.Option(1.8e-6, "--learning-rate", metavar="LR", help="Paper: 1.8e-6"),
    epochs: float = typer.Option(1.0, "--epochs", metavar="E",
                                 help="Passes over the training data (fractions allowed)"),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", min=1, metavar="N",
                                            help="Stop after N optimiser steps (overrides --epochs)"),
    lora_r: int = typer.Option(128, "--lora-r", min=1, metavar="R", help="LLaVA-1.5 LoRA recipe: 128"),
    lora_alpha: int = typer.Option(256, "--lora-alpha", min=1, metavar="A", help="LLaVA-1.5 LoRA recipe: 256"),
    batch_size: int = typer.Option(16, "--batch-size", min=1, metavar="N", help="Conversations per device step"),
    grad_accum: int = typer.Option(1, "--grad-accum", min=1, metavar="N",
                                   help="Device steps per optimiser step (effective batch: N x --batch-size)"),
    save_steps: int = typer.Option(50, "--save-steps", min=1, metavar="N",
                                   help="Write a checkpoint every N optimiser steps (a re-run resumes from the last)"),
    gradient_checkpointing: bool = typer.Option(True, "--gradient-checkpointing/--no-gradient-checkpointing",
                                                help="Recompute activations in the backward pass: less memory, about "
                                                     "a third slower"),
    projector_lr: Optional[float] = typer.Option(
        None, "--projector-lr", min=0.0, metavar="LR",
        help="Learning rate of the multimodal projector (default: 2e-5 for LLaVA-family models, as LLaVA-1.5's LoRA "
             "recipe; 0 freezes it)"),
    model_max_length: int = typer.Option(2048, "--model-max-length", min=16, metavar="N",
                                         help="Tokens per conversation (LLaVA-1.5: 2048)"),
    seed: int = C.SEED,
    progress: bool = C.PROGRESS,
) -> None:
    """LoRA fine-tuning (peft + transformers Trainer), loss on the answers only; resumes from checkpoints."""
    from ..finetune.train import FinetuneConfig, finetune

    C.setup_logging()
    with C.user_errors(FileNotFoundError):
        cfg = FinetuneConfig(model=model, data=str(data), out=str(out), learning_rate=learning_rate, epochs=epochs,
                             max_steps=max_steps, lora_r=lora_r, lora_alpha=lora_alpha, batch_size=batch_size,
                             grad_accum=grad_accum, save_steps=save_steps,
                             gradient_checkpointing=gradient_checkpointing, seed=seed, projector_lr=projector_lr,
                             model_max_length=model_max_length)
        rec = finetune(cfg, progress=progress)
    probe = ""
    if rec.get("probe_loss_before") is not None:
        probe = (f"; answer loss on {min(cfg.probe_rows, rec['train_rows'])} training rows "
                 f"{rec['probe_loss_before']:.4f} -> {rec['probe_loss_after']:.4f}")
    resumed = f" (resumed from {rec['resumed_from']})" if rec.get("resumed_from") else ""
    C.console.print(f"[green]done[/green] {rec['global_step']} steps{resumed} on {rec['device']} ({rec['dtype']}), "
                    f"{rec['seconds_per_step']} s/step{probe}. Adapter: {out}; use hf:MODEL?adapter={out}",
                    highlight=False)


@vhx_app.command("compare")
def vhx_compare(
    before: Path = typer.Argument(..., metavar="BEFORE", help="VHExpansion run of the base model"),
    after: Path = typer.Argument(..., metavar="AFTER", help="VHExpansion run of the fine-tuned model, same cases"),
    general: Optional[list[str]] = typer.Option(None, "--general", metavar="BEFORE_RUN,AFTER_RUN",
                                                help="BEFORE_RUN,AFTER_RUN of a general-ability run (e.g. a ChEF "
                                                     "MMBench recipe); repeat"),
    out: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help="Folder for compare.json and report.html"),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as one JSON object"),
) -> None:
    """Accuracy and symmetric accuracy before and after fine-tuning, per dataset and variant (Tables 7, 8)."""
    from ..finetune.compare import compare_vhx

    pairs = []
    for g in general or []:
        parts = [x.strip() for x in g.split(",")]
        if len(parts) != 2 or not all(parts):
            C.fail(f"--general {g!r}: give two run folders as BEFORE_RUN,AFTER_RUN")
        pairs.append((Path(parts[0]), Path(parts[1])))
    with C.user_errors():
        cmp = compare_vhx(before, after, pairs)
    if as_json:
        typer.echo(json.dumps(cmp, default=str))
    else:
        C.terminal.vhx_compare(cmp)
    if out is not None:
        from ..report.html import build_report

        out.mkdir(parents=True, exist_ok=True)
        write_text_atomic(out / "compare.json", json.dumps(cmp, indent=2) + "\n")
        runs = [before, after] + [p for pair in pairs for p in pair]
        build_report(runs, out / "report.html", title="vlmcheck: before and after fine-tuning", before_after=cmp)
        C.console.print(f"[green]wrote[/green] {out / 'compare.json'} and {out / 'report.html'}", highlight=False)
