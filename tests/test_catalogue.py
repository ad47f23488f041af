"""`vlmcheck list`: what runs on what, checked against the registries that drive the runs (tasks, forms, item
rules, official figures, recipes, scenario loaders), at 80 columns and as JSON."""

from __future__ import annotations

import json

from conftest import run_cli
from vlmcheck.datasets import benchmarks, forms
from vlmcheck.datasets.base import RECORD_KINDS, item_rules
from vlmcheck.datasets.official import declared
from vlmcheck.methods.catalogue import catalogue
from vlmcheck.methods.chef import shipped_recipes
from vlmcheck.methods.chef.scenarios import LOADERS, READS
from vlmcheck.run.registry import task_class, task_names


def test_the_listing_is_the_registries():
    cat = catalogue()
    assert [m["method"] for m in cat["methods"]] == list(task_names())
    from vlmcheck.methods import TASK_NAMES

    for m in cat["methods"]:  # the built-in methods declare what they read and report (a test's toy task may not)
        assert set(m["reads"]) <= set(RECORD_KINDS)
        assert (m["reads"] and m["reports"]) or m["method"] not in TASK_NAMES, m
    assert [r["recipe"] for r in cat["recipes"]] == list(shipped_recipes())
    assert [s["scenario"] for s in cat["scenarios"]] == list(LOADERS) and set(READS) == set(LOADERS)
    listed = {b["benchmark"]: b for b in cat["benchmarks"]}
    aliases = {b for b in benchmarks() if "-" in b and b.replace("-", "") in benchmarks()}
    assert set(listed) == set(benchmarks()) - aliases
    for f in forms().values():  # every form is listed: under its benchmarks, or as a generic form of every one
        assert all(f.name in listed[b]["forms"] for b in f.benchmarks if b in listed) if f.benchmarks else \
            all(f.name in b["generic_forms"] for b in listed.values())
    for name, off in declared().items():
        assert listed[name]["official_figure"] == off.name
    # a method takes a benchmark when it reads a kind its forms (or its item rule) carry, worked out here again
    for b, row in listed.items():
        carries = set().union(*(f.carries for f in forms().values() if b in f.benchmarks),
                              item_rules()[b].carries if b in item_rules() else ())
        by_kind = {m for m in task_names() if set(getattr(task_class(m), "reads", ())) & carries}
        by_recipe = {"chef"} if any(b in (r["recipe"], r["scenario"]) for r in cat["recipes"]) else set()
        assert set(row["methods"]) == by_kind | by_recipe, b
    assert {"genception", "chef", "vhexpansion"} <= set(listed["mmbench"]["methods"])
    assert "cast" in listed["docci"]["methods"] and "vhexpansion" not in listed["docci"]["methods"]


def test_list_at_80_columns_and_as_json(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    proc = run_cli("list")
    assert proc.returncode == 0 and proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert max(len(x) for x in lines) <= 80 and not any(x != x.rstrip() for x in lines)
    assert any(x.startswith("│ mmbench ") and "MMBench circular" in x for x in lines)
    out = run_cli("list", "--json")
    assert json.loads(out.stdout) == json.loads(json.dumps(catalogue()))
