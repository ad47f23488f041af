"""``vlmcheck chef list|run|aggregate``: ChEF recipes and desiderata (methods/chef/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..core.files import write_text_atomic
from . import _common as C

chef_app = typer.Typer(no_args_is_help=True, help="ChEF: recipes and desiderata.")


#: the scenario loaders (methods/chef/scenarios.py LOADERS), named here so `--help` imports no method;
#: tests/test_first_hour.py checks the two lists agree
SCENARIO_NAMES = ("mc", "scienceqa", "pope", "classification", "retrieval", "mmbench", "world", "counting",
                  "detection", "hierarchical", "turns")


@chef_app.command("list")
def chef_list(long: bool = typer.Option(False, "--long", "-l",
                                        help="What each recipe measures and the other inferencers it takes")) -> None:
    """Shipped recipes (ChEF Tables 5 and 7, and world recipes)."""
    from ..methods.chef import Recipe, shipped_recipes, usable_inferencers

    rows = []
    for name, path in shipped_recipes().items():
        r = Recipe.from_yaml(path)
        others = [i for i in usable_inferencers(r) if i != r.inferencer.type]
        rows.append([name, r.desideratum, r.scenario.type,
                     r.inferencer.type + (f" (or {', '.join(others)})" if others else ""), r.description])
    C.terminal.recipes(rows, long)


@chef_app.command("run")
@C.run_command
def chef_run(
    recipe: str = typer.Option(..., "--recipe", metavar="RECIPE",
                               help="Recipe YAML file or shipped recipe name (chef list)"),
    vlm: str = C.VLM,
    out: Path = C.RUN_FOLDER,
    data: Optional[str] = C.source("--data", "Scenario data (overrides the recipe's path; JSONL kinds also at an "
                                             "fsspec URL)", None),
    benchmark: Optional[str] = C.BENCHMARK,
    scenario: Optional[str] = typer.Option(None, "--scenario", metavar="NAME",
                                           help="How --data is read, overriding the recipe's: " + ", ".join(
                                               SCENARIO_NAMES) + " (world: a `vlmcheck world make` folder)"),
    judge: Optional[str] = typer.Option(None, "--judge", metavar="SPEC",
                                        help="TextModel spec for language performance"),
    judge2: Optional[str] = typer.Option(None, "--judge2", metavar="SPEC",
                                         help="A second judge of the same answers: judge-to-judge agreement"),
    repeats: int = C.REPEATS,
    temperature: float = C.TEMPERATURE,
    rewriter: Optional[str] = typer.Option(None, "--rewriter", metavar="SPEC",
                                           help="TextModel spec for sentence-level text corruptions (robustness)"),
    extractor: Optional[str] = typer.Option(None, "--extractor", metavar="SPEC",
                                            help="TextModel spec: second-step answer extraction (MMBench style)"),
    inferencer: Optional[str] = typer.Option(
        None, "--inferencer", metavar="NAME",
        help="ChEF inferencer (supplementary B.3): direct, cot, ppl, cot_ppl or multiturn_ppl; default the "
             "recipe's (chef list shows the ones each recipe allows). direct and cot need no likelihoods, so they "
             "run on any server, at a cost to fidelity: no confidence (no ECE) and unreadable answers count wrong"),
    blind: bool = C.BLIND,
    run: C.RunArgs = None,
) -> None:
    """Run a ChEF recipe; the metric follows its desideratum."""
    from ..core.roles import CapabilityError
    from ..methods.chef import INFERENCERS, ChefTask, resolve_recipe

    C.setup_logging()
    data = C.with_benchmark(data, benchmark)
    with C.user_errors(FileNotFoundError, CapabilityError):
        r = resolve_recipe(recipe)
        if scenario:
            r.scenario.type = scenario
        elif data and r.scenario.type != "world" and Path(data).is_dir() and (Path(data) / "manifest.jsonl").is_file():
            C.fail(f"{data}: a folder, where a file was expected (recipe {recipe!r} reads {r.scenario.type!r} "
                   "data from a file); it is a world folder: add --scenario world to ask the world's questions")
        for key, value in (("judge", judge), ("judge2", judge2), ("rewriter", rewriter), ("extractor", extractor)):
            if value:
                setattr(r.metric, key, value)
        if inferencer:  # the refusal as one sentence, before the spec's validation wraps it
            from ..methods.chef.recipe import inferencer_refusal

            why = inferencer_refusal(r, inferencer) if inferencer in INFERENCERS else (
                f"no inferencer {inferencer!r}; ChEF's are {', '.join(INFERENCERS)}")
            if why:
                raise ValueError(why)
    C.run_method(C.method_task(ChefTask, vlm, run, CapabilityError, recipe=r, data=str(data) if data else None,
                               blind=blind, repeats=repeats, temperature=temperature, inferencer=inferencer), out, run)


@chef_app.command("aggregate")
def chef_aggregate(
    runs: list[Path] = typer.Argument(..., metavar="RUN...", help="ChEF run folders of one desideratum"),
    out: Optional[Path] = typer.Option(None, "--out", metavar="FILE", help="Write the table as JSON here"),
) -> None:
    """Cross-scenario Avg. (weighted by items, Tables 9 and 10), Table 8's overall calibration, seed deviations."""
    from ..methods.chef.aggregate import aggregate

    with C.user_errors():
        agg = aggregate(runs)
    C.terminal.chef_aggregate(agg)
    if out is not None:
        write_text_atomic(out, json.dumps(agg, indent=2) + "\n")
        C.console.print(f"[green]wrote[/green] {out}", highlight=False)
