"""One registry for every kind of thing a user adds (core/registry.py): a name taken twice is an error naming both
registrations unless replacing is asked for; ``module:attr`` targets are imported on first use; the listing says
where each entry came from; a name not found lists the known ones.  Benchmarks register themselves, and a
benchmark's Hub copy reaches its own module's hook, so that datasets/hub.py names no benchmark."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import isolate_registry as isolate
from conftest import run_cli

from vlmcheck.core import spec
from vlmcheck.core.registry import Registry
from vlmcheck.datasets import base, official
from vlmcheck.perturb import image as perturb_image
from vlmcheck.run import task as run_task
from vlmcheck.run import views as run_views
from vlmcheck.run.registry import TASKS, register_task, task_class, task_names

SRC = Path(__file__).resolve().parents[1] / "src" / "vlmcheck"


def _form(path, **_):
    raise AssertionError("never read")


#: kind -> (its registry, the built-in name taken, the module that registered it, a second registration of that
#: name through the kind's public function)
KINDS = {
    "provider": (lambda: spec.PROVIDERS, "openai", "vlmcheck.models",
                 lambda replace: spec.register("openai", "elsewhere:make", ("vlm",), replace=replace)),
    "task": (lambda: TASKS, "describe", "vlmcheck.methods",
             lambda replace: register_task("describe", "elsewhere:Task", replace=replace)),
    "view": (lambda: run_views.VIEWS, "describe", "vlmcheck.methods.views",
             lambda replace: run_views.register_view("describe", run_views.MethodView(label="x"), replace=replace)),
    "outcomes": (lambda: run_task.OUTCOMES, "describe", "vlmcheck.methods.outcomes",
                 lambda replace: run_task.register_outcomes("describe", lambda r, m: {}, replace=replace)),
    "form": (lambda: base.FORMS, "mmvp", "vlmcheck.datasets.mmvp",
             lambda replace: base.register_form("mmvp", detect=lambda p: False, replace=replace)(_form)),
    "scheme": (lambda: base.SCHEMES, "hfds", "vlmcheck.datasets.hub",
               lambda replace: base.register_scheme("hfds", replace=replace)(_form)),
    "benchmark": (lambda: base.BENCHMARKS, "mmvp", "vlmcheck.datasets.mmvp",
                  lambda replace: base.register_benchmark(base.Benchmark("mmvp"), replace=replace)),
    "official figure": (lambda: official.OFFICIAL, "mmvp", "vlmcheck.datasets.mmvp",
                        lambda replace: official.declare("mmvp", "x", "y", replace=replace)(_form)),
    "corruption": (lambda: perturb_image.CORRUPTIONS, "rotate", "vlmcheck.perturb.image",
                   lambda replace: perturb_image._register("rotate", "other", replace=replace)(_form)),
}


@pytest.fixture(autouse=True)
def _registered():
    import vlmcheck.methods.outcomes  # noqa: F401  (the built-in methods' views and outcomes)
    import vlmcheck.methods.views  # noqa: F401

    base.forms()  # every reader module imported: its forms and benchmarks registered


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_taken_name_is_an_error_naming_both_registrations_unless_replacing(kind, monkeypatch):
    get, name, origin, again = KINDS[kind]
    registry = get()
    isolate(monkeypatch, registry)
    before = registry._entries[name]
    assert registry.origins()[name] == origin
    with pytest.raises(ValueError, match=rf"'{name}' is already registered by {re.escape(origin)}; test_registry "
                                         r"registers it again \(pass replace=True"):
        again(False)
    assert registry._entries[name] is before  # the first one kept
    again(True)
    assert registry._entries[name] is not before and registry.origins()[name] == "test_registry"


def test_registering_the_same_entry_again_is_no_error(monkeypatch):
    isolate(monkeypatch, TASKS)
    cls = task_class("describe")  # resolved from "vlmcheck.methods.describe:DescribeTask"
    register_task("describe", cls)
    register_task("describe", "vlmcheck.methods.describe:DescribeTask")
    assert task_class("describe") is cls


def test_a_lazy_target_is_imported_on_first_use_only(tmp_path, monkeypatch):
    (tmp_path / "lazy_task_64.py").write_text("class Toy:\n    name = 'lazy64'\n")
    (tmp_path / "lazy_adapter_64.py").write_text("def make(spec, role):\n    raise RuntimeError('built')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    isolate(monkeypatch, TASKS)
    isolate(monkeypatch, spec.PROVIDERS)
    register_task("lazy64", "lazy_task_64:Toy")
    spec.register("lazy64", "lazy_adapter_64:make", ("vlm",))
    assert "lazy64" in task_names() and "lazy64" in TASKS and "lazy64" in spec.PROVIDERS
    assert spec.registration("lazy64").roles == ("vlm",)
    assert "lazy_task_64" not in sys.modules and "lazy_adapter_64" not in sys.modules
    assert task_class("lazy64").name == "lazy64" and "lazy_task_64" in sys.modules
    with pytest.raises(RuntimeError, match="built"):
        spec.load_model("lazy64:m")
    assert "lazy_adapter_64" in sys.modules


def test_the_listing_says_where_each_entry_came_from(monkeypatch):
    isolate(monkeypatch, spec.PROVIDERS, loaded=False)
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: [
        SimpleNamespace(name="Plug64", value="plug64.adapter:make", dist=SimpleNamespace(name="vlmcheck-plug64")),
        SimpleNamespace(name="openai", value="elsewhere:make", dist=SimpleNamespace(name="hijack"))])
    origins = spec.PROVIDERS.origins()
    assert origins["plug64"] == "plugin vlmcheck-plug64" and origins["openai"] == "vlmcheck.models"  # built-in kept
    assert spec.registration("plug64").target == "plug64.adapter:make"
    shown = " ".join(run_cli("models", env={"COLUMNS": "200"}).stdout.split())  # `vlmcheck models` says it too
    assert "plug64 │ vlm, text, generator, encoder │ plugin │ plugin vlmcheck-plug64" in shown
    assert "openai │ vlm, text │" in shown and "│ vlmcheck.models │" in shown
    assert TASKS.origins()["chef"] == "vlmcheck.methods"
    assert base.FORMS.origins()["hf-snapshot"] == "vlmcheck.datasets.hub"
    assert base.BENCHMARKS.origins()["mmbench"] == "vlmcheck.datasets.mmbench"
    assert perturb_image.CORRUPTIONS.origins()["fog"] == "vlmcheck.perturb.image"


def test_a_name_not_found_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown task 'nope'; known: cast, chef, describe, genception, (\w+, )*vhexpansion"):
        task_class("nope")
    with pytest.raises(spec.SpecError, match=r"unknown model provider 'nope'; known: .*anthropic, .*openai"):
        spec.load_model("nope:m")
    with pytest.raises(base.DatasetFormError, match=r"unknown dataset form 'nope'; known: .*hf-snapshot, .*mmvp"):
        base.load("x", form="nope")
    with pytest.raises(KeyError, match=r"unknown corruption 'nope'; known: brightness, "):
        perturb_image.CORRUPTIONS["nope"]
    assert spec.registration("nope") is None and base.items_rule("nope") is None


def test_a_benchmark_registers_itself_no_hand_list(monkeypatch):
    isolate(monkeypatch, base.BENCHMARKS)
    assert "toy64" not in base.benchmarks()
    base.register_benchmark(base.Benchmark("toy64"))
    assert "toy64" in base.benchmarks() and base.parse_source("toy64:./x") == ("toy64", None, "./x")
    assert isinstance(base.BENCHMARKS, Registry)  # no hand list beside it


def test_a_benchmarks_hfds_copy_reaches_its_own_hub_hook(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vlmcheck.datasets import hub

    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    isolate(monkeypatch, base.BENCHMARKS)
    seen = []

    def hook(ds):
        seen.append((ds.form, ds.benchmark, [r.id for r in ds.records]))
        ds.records[0].group = "tied"

    base.register_benchmark(base.Benchmark("toy64", hub=("ToyOrg/Toy64",), hub_copy=hook))
    folder = tmp_path / "toy"
    (folder / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"id": f"q{i}", "question": "Is it red?", "answer": "yes"} for i in range(2)]),
                   folder / "data" / "test-00000-of-00001.parquet")
    monkeypatch.setattr(hub, "hub_cache_snapshot", lambda repo: folder if repo == "toyorg/toy64" else None)
    ds = base.load("hfds:toyorg/toy64")
    assert seen == [("hf-snapshot", "toy64", ["q0", "q1"])]
    assert ds.benchmark == "toy64" and ds.records[0].group == "tied"
    base.load(f"hfds:{folder}")  # no Hub id, no column that says toy64: the hook is not reached
    assert len(seen) == 1


def test_the_generic_hub_reader_names_no_benchmark():
    names = set(base.benchmarks()) | {"mmvp", "mmbench", "scienceqa", "seed-bench", "cifar-10", "mme", "pope"}
    for module in ("hub.py", "shards.py"):
        text = (SRC / "datasets" / module).read_text().lower()
        found = sorted(n for n in names if re.search(rf"(?<![a-z0-9]){re.escape(n)}(?![a-z0-9])", text))
        assert not found, f"datasets/{module} names {found}: a benchmark's quirk belongs in its own module"


def test_a_provider_target_may_be_an_adapter_class_taking_the_spec_alone(tmp_path, monkeypatch):
    (tmp_path / "toy_adapter_64.py").write_text(
        "from vlmcheck.core.roles import Capabilities, Generation\n\n"
        "SEEN = []\n\n"
        "class Toy:\n"
        "    capabilities = Capabilities()\n\n"
        "    def __init__(self, spec):\n"
        "        self.model_id = spec.canonical()\n\n"
        "    async def generate(self, messages, config):\n"
        "        return Generation(text='')\n\n"
        "def make(spec, role):\n"
        "    SEEN.append(role)\n"
        "    return Toy(spec)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    isolate(monkeypatch, spec.PROVIDERS)
    spec.register("toycls", "toy_adapter_64:Toy", ("vlm",))
    spec.register("toyfn", "toy_adapter_64:make", ("vlm", "text"))
    assert spec.load_model("toycls:m").model_id == "toycls:m"
    assert spec.load_model("toyfn:m", "text").model_id == "toyfn:m"
    assert sys.modules["toy_adapter_64"].SEEN == ["text"]
