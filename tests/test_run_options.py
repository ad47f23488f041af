"""One table of run options (run/options.py) feeds every entry point that runs samples: each option is taken
by each of them, or refused there with a reason written in the table."""

from __future__ import annotations

import dataclasses

import pytest
import typer.main

from vlmcheck.cli import app
from vlmcheck.cli.runs import run_cmd
from vlmcheck.run import options as O
from vlmcheck.sweep import SweepOptions


def _commands(group, prefix=""):
    for name, cmd in getattr(group, "commands", {}).items():
        yield from _commands(cmd, f"{prefix}{name} ")
        if getattr(cmd, "callback", None) is not None:
            yield f"{prefix}{name}".strip(), cmd


def entry_points() -> dict[str, list[tuple[str, set[str]]]]:
    """Each entry point that runs samples, with the option names each of its ways in takes."""
    found: dict[str, list[tuple[str, set[str]]]] = {e: [] for e in O.ENTRY_POINTS}
    for name, cmd in _commands(typer.main.get_command(app)):
        entry = getattr(cmd.callback, "run_entry", None)
        if entry:
            found[entry].append((name, {p.name for p in cmd.params}))
    sweep = set(SweepOptions.model_fields) | {o.name for o in O.RUN_OPTIONS
                                               if o.shown and o.name in run_cmd.__code__.co_varnames}
    found[O.SWEEP].append(("sweep options", sweep))
    # a Ray worker gets the input policy's fields, the seed and its share of the concurrency (ray_executor.py)
    as_option = {"allow_outside": "allow_outside", "max_image_bytes": "max_image_mb", "pixel_budget": "pixel_budget_mb"}
    # (url_read_timeout_s and url_total_timeout_s are RunOptions fields of the library API, not run options)
    worker = {"seed", "max_concurrency"} | {as_option[f] for f in O.POLICY_FIELDS if f in as_option}
    found[O.WORKER].append(("ray worker", worker))
    return found


def problems(table, points) -> list[str]:
    out = []
    for entry, ways in points.items():
        for where, names in ways:
            for o in table:
                if o.takes(entry) and o.name not in names:
                    out.append(f"{where}: does not take {o.name}, and the table gives no reason")
                if not o.takes(entry) and o.name in names:
                    out.append(f"{where}: takes {o.name}, which the table says it refuses")
                if not o.takes(entry) and not o.why_not(entry):
                    out.append(f"{where}: refuses {o.name} without a reason")
    return out


def test_every_run_option_is_taken_by_every_entry_point_or_refused_with_a_reason():
    points = entry_points()
    assert len(points[O.METHOD]) >= 5  # describe, genception, vhx run, cast run, chef run
    assert [w for w, _ in points[O.RESUME]] == ["resume"] and [w for w, _ in points[O.RETRY]] == ["retry-failed"]
    assert problems(O.RUN_OPTIONS, points) == []
    # the drifted ones
    assert "max_cost" in dict(points[O.RETRY])["retry-failed"]
    assert "pixel_budget_mb" in SweepOptions.model_fields


def test_a_planted_omission_is_caught():
    points = entry_points()
    # the table says retry-failed takes --max-cost: a retry-failed without it is caught
    no_cost = [(w, names - {"max_cost"}) for w, names in points[O.RETRY]]
    assert problems(O.RUN_OPTIONS, {**points, O.RETRY: no_cost}) == [
        "retry-failed: does not take max_cost, and the table gives no reason"]
    # a refusal that loses its reason is caught
    limit = O.BY_NAME["limit"]
    silent = dataclasses.replace(limit, refused={**limit.refused, O.RESUME: ""})
    table = [silent if o is limit else o for o in O.RUN_OPTIONS]
    assert problems(table, points) == ["resume: refuses limit without a reason"]


def test_the_table_builds_run_options_and_the_input_policy():
    from vlmcheck.run.runner import run_options

    opts = run_options(pixel_budget_mb=3.0, max_image_mb=0.5, shard="1/4", allow_outside=True)
    assert (opts.pixel_budget, opts.max_image_bytes, opts.shard, opts.allow_outside) == (3_000_000, 500_000, (1, 4), True)
    policy = O.input_policy(opts)
    assert (policy.max_file_bytes, policy.allow_outside) == (500_000, True)
    assert O.input_policy(opts.model_dump(include=set(O.POLICY_FIELDS))).max_file_bytes == 500_000
    with pytest.raises(ValueError, match="executor"):
        run_options(executor="slurm")
    with pytest.raises(ValueError, match="unknown run option"):
        run_options(pixel_budget=3)


def test_a_sweep_passes_pixel_budget_and_image_size_to_its_runs():
    from vlmcheck.sweep import Sweep, options_of

    sweep = Sweep(out="x", models=["ref:photo"], methods=[{"method": "describe", "data": "d"}],
                  options={"pixel_budget_mb": 5, "max_image_mb": 2, "seed": 3, "max_failures": 0.5})
    opts = options_of(sweep, progress=False)
    assert (opts.pixel_budget, opts.max_image_bytes, opts.seed, opts.resume) == (5_000_000, 2_000_000, 3, True)
