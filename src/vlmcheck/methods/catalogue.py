"""What runs on what (``vlmcheck list``): the methods, what each reads and reports, ChEF's shipped recipes and
scenarios, and every benchmark with its forms, the methods that take it and its official figure.  Built from the
registries that drive the runs, nothing copied: a method takes a benchmark when it reads a kind of record the
benchmark's forms carry (``datasets.RECORD_KINDS``)."""

from __future__ import annotations

from typing import Any


def catalogue() -> dict[str, Any]:
    from ..datasets import benchmarks, forms
    from ..datasets.base import RECORD_KINDS, item_rules
    from ..datasets.official import declared
    from ..run.registry import task_class, task_names
    from .chef import Recipe, shipped_recipes
    from .chef.scenarios import LOADERS, READS
    from .views import view_for

    methods = {}
    for name in task_names():
        cls = task_class(name)
        methods[name] = {"method": name, "label": view_for(name).label or name,
                         "reads": list(getattr(cls, "reads", ())), "reports": getattr(cls, "reports", "")}
    recipes = []
    for name, path in shipped_recipes().items():
        r = Recipe.from_yaml(path)
        recipes.append({"recipe": name, "desideratum": r.desideratum, "scenario": r.scenario.type,
                        "reads": READS.get(r.scenario.type), "inferencer": r.inferencer.type})
    scenarios = [{"scenario": k, "reads": READS.get(k)} for k in LOADERS]
    recipe_method = next((m for m in methods if getattr(task_class(m), "recipes", False)), None)
    all_forms, rules, official = forms(), item_rules(), declared()
    generic = [f.name for f in all_forms.values() if not f.benchmarks]
    order = {k: i for i, k in enumerate(RECORD_KINDS)}
    rows = []
    names = benchmarks()
    squashed = {n for n in names if "-" not in n}
    for b in names:
        if "-" in b and b.replace("-", "") in squashed:  # an alias (seed-bench, cifar-10): listed once
            continue
        own = [f for f in all_forms.values() if b in f.benchmarks]
        rule = rules.get(b)
        carries = sorted(set().union(*(f.carries for f in own), rule.carries if rule else ()), key=order.get)
        rows.append({
            "benchmark": b, "forms": [f.name for f in own], "generic_forms": generic,
            "hub_copies": list(rule.hub) if rule else [], "carries": carries,
            "methods": [m for m, d in methods.items() if set(d["reads"]) & set(carries)
                        or (m == recipe_method and any(b in (r["recipe"], r["scenario"]) for r in recipes))],
            "recipes": [r["recipe"] for r in recipes if b in (r["recipe"], r["scenario"])],
            "official_figure": official[b].name if b in official else None,
            "official_source": official[b].source if b in official else None})
    return {"methods": list(methods.values()), "recipes": recipes, "scenarios": scenarios, "benchmarks": rows,
            "record_kinds": list(RECORD_KINDS)}
