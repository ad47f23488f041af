"""The offline demo (``vlmcheck demo``, ``make demo``): every method end to end on real photographs and the
reference world, one report over all runs, and a screenshot of each of its sections.

It resumes from its own store: every run goes into ``OUT/<method>/<run>`` and is resumed there, so a second
demo makes no model call; when no run's results changed, the report and the screenshots are kept as they are.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .api import results_state, run_task
from .core.files import JsonlRecords, write_text_atomic
from .report import terminal
from .run.runner import RunFolderExists, RunOptions
from .run.task import Task

LEVELS = (0.0, 0.1, 0.3)
STAMP = ".demo-results.sha256"  # a digest of every run's results.json when the report was last written

console = terminal.console


@dataclass
class DemoResult:
    out: Path
    report: Path
    screenshots: list[Path]
    model_calls: int
    seconds: float
    report_reused: bool


@dataclass
class _Runner:
    """Runs the demo's tasks: each resumed in its folder (made anew when the task changed), its report written,
    its results table printed titled by its VLM spec (``table``)."""

    progress: bool
    calls: int = 0

    def __call__(self, task: Task, folder: Path, table: bool = True) -> dict[str, Any]:
        try:
            result = run_task(task, folder, RunOptions(resume=True, progress=self.progress))
        except RunFolderExists:  # a run of another version of the demo: start it again
            result = run_task(task, folder, RunOptions(overwrite=True, progress=self.progress))
        self.calls += result.results.get("session", {}).get("model_calls", 0)
        terminal.run_done(folder, result.results)
        if table:
            terminal.results(result.results, task.cfg.vlm)
        return result.results


def run_demo(out: str | Path = "demo-run", n: int = 24, progress: bool = True,
             screenshots: bool = True) -> DemoResult:
    """Describe real photos with ``ref:photo``, then GenCeption, CAST, ChEF and VHExpansion on the reference
    world with describers of known error, the GenCeption leaderboard and one report."""
    from .methods.cast import CastSpec, CastTask
    from .methods.chef import ChefSpec, ChefTask, resolve_recipe
    from .methods.describe import DescribeSpec, DescribeTask
    from .methods.genception import GenCeptionSpec, GenCeptionTask
    from .methods.leaderboard import write_leaderboard
    from .methods.pope import build_pope, load_annotations
    from .methods.vhexpansion import VHExpansionTask, VHXSpec
    from .perturb.adversarial import AttackConfig
    from .world.make import make_world, make_world_pairs
    from .world.perceive import ocr_backend
    from .world.photos import make_photo_dataset

    out = Path(out)
    started = time.perf_counter()
    run = _Runner(progress)

    # two broken files show per-sample errors
    manifest = make_photo_dataset(out / "data", include_broken=True)
    console.rule("[bold]1. describe: scikit-image photos with ref:photo (EfficientNet-Lite0)")
    console.print(f"reference OCR: {ocr_backend()}")
    run(DescribeTask(DescribeSpec(vlm="ref:photo", data=str(manifest))), out / "describe", table=False)
    for r in JsonlRecords(out / "describe" / "samples.jsonl"):
        if r["status"] == "done":
            console.print(f"  {r['sample_id']:<11} recall={r['result'].get('keyword_recall', 0):.2f}  "
                          f"{r['result']['answer']}", highlight=False)
        else:
            console.print(f"  {r['sample_id']:<11} [yellow]error[/yellow] {r['error']['type']}: "
                          f"{r['error']['message']}", highlight=False)

    console.rule(f"[bold]2. GenCeption (T=3) on {n} world scenes: ref:describer at error levels {LEVELS}")
    world = out / "world"
    make_world(world, n=n, seed=0)
    # ChEF's POPE cases live in the world folder; written now, before any run pins the folder's content (a run's
    # data fingerprint, run/data_pin.py), so that a second demo finds the same world and resumes every run
    pope = build_pope(load_annotations(world / "objects.jsonl"), "adversarial", n_images=n, per_image=2)
    write_text_atomic(world / "pope-adversarial.jsonl", "".join(json.dumps(c) + "\n" for c in pope))
    folders = []
    for lv in LEVELS:
        folders.append(out / "genception" / f"level-{lv}")
        run(GenCeptionTask(GenCeptionSpec(vlm=f"ref:describer?level={lv}", generator="ref:renderer",
                                          encoder="ref:effnet", data=str(world), T=3)), folders[-1])
    terminal.leaderboard(write_leaderboard(folders, out / "genception" / "leaderboard.json"))

    console.rule("[bold]3. CAST: similarities in 3 modalities, each validated in 3 modalities x 3 prompt formats")
    pairs = make_world_pairs(out / "world-pairs", n=8, seed=0)
    for lv in LEVELS:
        run(CastTask(CastSpec(vlm=f"ref:describer?level={lv}", pairs=str(pairs))), out / "cast" / f"level-{lv}")

    console.rule("[bold]4. ChEF on the world: calibration, robustness, hallucination (POPE), and FSC147 counting, "
                 "VOC2012 detection and Omnibenchmark chains by multi-turn PPL")
    # robustness: RRM is a ratio of accuracies over one question per scene; 24 scenes leave it to chance,
    # so its recipe gets a world of its own with 80 scenes
    robust_world = out / "world-robustness"
    make_world(robust_world, n=max(n, 80), seed=1)
    for lv in (LEVELS[0], LEVELS[2]):
        spec = f"ref:describer?level={lv}"
        for name in ("calibration", "robustness", "hallucination"):
            # robustness: a describer that also reads corrupted scenes (robust=1), so that RRM measures how its
            # answers degrade rather than how often it gives up
            r = resolve_recipe(name)
            data = (world / "pope-adversarial.jsonl" if name == "hallucination" else
                    robust_world if name == "robustness" else world)
            if name != "hallucination":
                r.scenario.type = "world"
            vlm = f"{spec}&robust=1" if name == "robustness" else spec
            # POPE with the blind control: how much of its accuracy needs the image
            run(ChefTask(ChefSpec(vlm=vlm, recipe=r, data=str(data), blind=name == "hallucination")),
                out / "chef" / f"{name}-{lv}")
        # Table 5's turn scenarios on the world's counting, detection and category-chain data
        for name, data in (("fsc147", world / "counting.jsonl"), ("voc2012", world / "detection.jsonl"),
                           ("omnibenchmark", world / "hierarchy")):
            run(ChefTask(ChefSpec(vlm=spec, recipe=resolve_recipe(name), data=str(data))),
                out / "chef" / f"{name}-{lv}")

    console.rule("[bold]5. VHExpansion: negation (ref:negator), 4 common perturbations, I-FGSM transfer attack "
                 "from ref:effnet, and the blind control (the questions without the image)")
    for lv in LEVELS:
        spec = f"ref:describer?level={lv}"
        attack = lv == LEVELS[1]  # the attack is the slow part: one model shows it
        task = VHExpansionTask(VHXSpec(vlm=spec, cases=str(world), attack="ifgsm" if attack else None,
                                       attack_target="ref:effnet" if attack else None,
                                       attack_config=AttackConfig(steps_clean=5, steps_hallucinated=3),
                                       blind=True))  # the blind control: the vision gain drops with the error
        run(task, out / "vhexpansion" / f"level-{lv}")

    report, shots, reused = _report(out, screenshots)
    seconds = time.perf_counter() - started
    console.print(f"[green]demo finished[/green] in {seconds:.0f} s ({run.calls} model calls). Run folders under "
                  f"{out}: describe/, genception/level-*/, cast/level-*/, chef/*/, vhexpansion/level-*/ (each with "
                  "results.json, samples.jsonl, report.html, store.sqlite, artifacts/), genception/leaderboard.json",
                  highlight=False)
    return DemoResult(out, report, shots, run.calls, seconds, reused)


def _report(out: Path, screenshots: bool) -> tuple[Path, list[Path], bool]:
    """The report over every run (and its screenshots), kept when no run's results changed since it was made."""
    from .report.html import build_report
    from .report.screens import screenshot_sections

    runs = sorted(p.parent for p in out.glob("*/*/results.json")) + [out / "describe"]
    page, shots_dir = out / "report.html", out / "screenshots"
    digest = hashlib.sha256(b"".join(f"{run}\0{results_state(run)}\0".encode() for run in runs)).hexdigest()
    stamp = out / STAMP
    reused = page.is_file() and stamp.is_file() and stamp.read_text().strip() == digest
    if reused:
        console.print(f"Report: {page} (no run changed since it was written; kept)", highlight=False)
    else:
        stamp.unlink(missing_ok=True)
        for old in shots_dir.glob("*.png"):  # screenshots of the report this one replaces
            old.unlink()
        page = build_report(runs, page, title="vlmcheck offline demo",
                            gallery_image=out / "data" / "images" / "astronaut.png")
        write_text_atomic(stamp, digest + "\n")
        console.print(f"Report: {page}", highlight=False)
    shots = sorted(shots_dir.glob("*.png"))
    if screenshots and not shots:
        shots, why = screenshot_sections(page, shots_dir)
        if not shots:
            console.print(f"[yellow]note:[/yellow] no screenshots of the report: {why}")
    if shots:
        console.print(f"Screenshots of the report (first screen, samples, chains; desktop and phone): {shots_dir} "
                      f"({len(shots)} files)", highlight=False)
    return page, shots, reused
