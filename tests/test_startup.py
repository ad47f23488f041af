"""Start-up stays cheap (issue 51, item 3): ``vlmcheck --help`` and ``vlmcheck version`` load none of the heavy
libraries nor any method; the commands load them when they run. A new eager import anywhere under ``vlmcheck.cli``
(or in ``vlmcheck/__init__.py``) that pulls one of these in fails here."""
import json
import subprocess
import sys

import pytest

#: never loaded by --help or version (a module counts once its code ran: LazyLoader's placeholders do not)
DENY = ("torch", "transformers", "pandas", "pyarrow", "ray", "matplotlib", "scipy", "datasets", "numpy", "PIL",
        "aiohttp", "openai", "asyncio", "vlmcheck.methods.", "vlmcheck.run.runner", "vlmcheck.run.task",
        "vlmcheck.store.db", "vlmcheck.core.images", "vlmcheck.api", "rich", "jinja2")

PROBE = """
import json, sys
sys.argv = ["vlmcheck", *json.loads(sys.argv[1])]
import vlmcheck.cli
try:
    vlmcheck.cli.main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m, v in sys.modules.items() if type(v).__name__ != "_LazyModule")), file=sys.stderr)
"""


#: never loaded by a one-image ``describe`` run against an OpenAI-compatible server, the default command with its
#: preflight, store, results and report (issue 51: each of these cost the run's start-up CPU once; numpy ~0.1 s,
#: Pillow ~30 ms: a PNG or JPEG sent as it is is never decoded)
DENY_ONE_IMAGE_RUN = ("torch", "transformers", "pandas", "pyarrow", "ray", "matplotlib", "scipy", "datasets",
                      "numpy", "PIL.Image", "openai", "sklearn", "skimage", "vlmcheck.methods.genception",
                      "vlmcheck.methods.cast", "vlmcheck.methods.chef", "vlmcheck.methods.vhexpansion", "vlmcheck.models.hf",
                      "vlmcheck.world", "vlmcheck.run.merge", "vlmcheck.export", "vlmcheck.sweep",
                      "rich",  # its lines are messages to a pipe: written as rich would write them there
                      "vlmcheck.cli.runs", "vlmcheck.cli.chef", "vlmcheck.cli.vhx", "vlmcheck.cli.cast",
                      "vlmcheck.cli.outputs", "vlmcheck.cli.world", "vlmcheck.cli.genception")  # nor other commands


def _loaded(argv: list[str]) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stderr.strip().splitlines()[-1])


def _denied(modules: list[str], deny: tuple[str, ...] = DENY) -> list[str]:
    return [m for m in modules if any(m == d or m.startswith(d if d.endswith(".") else d + ".") for d in deny)]


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["--help"], ["version"], ["describe", "--help"], ["genception", "--help"]])
def test_help_and_version_load_no_heavy_module(argv):
    loaded = _loaded(argv)
    assert "vlmcheck.cli" in loaded  # the probe did load the CLI
    assert _denied(loaded) == []


def test_deny_list_matches_what_it_should():
    # the check itself: a heavy module or a method's module is caught, a light one with a similar name is not
    assert _denied(["numpy", "numpy.linalg", "vlmcheck.methods.describe", "torch"]) == [
        "numpy", "numpy.linalg", "vlmcheck.methods.describe", "torch"]
    assert _denied(["numpyish", "vlmcheck.methods", "vlmcheck.run.registry", "vlmcheck.apix"]) == []


def test_a_command_that_runs_still_loads_what_it_needs(tmp_path):
    # lazy, not missing: `vlmcheck models` prints the providers through the terminal module
    loaded = _loaded(["models"])
    assert "vlmcheck.report.terminal" in loaded


@pytest.mark.slow
def test_a_one_image_describe_run_loads_no_heavy_module(tmp_path, fake_server):
    from PIL import Image

    Image.new("RGB", (32, 24), (200, 40, 90)).save(tmp_path / "one.png")
    (tmp_path / "one.jsonl").write_text(json.dumps({"id": "one", "image": "one.png"}) + "\n")
    out = tmp_path / "out"
    loaded = _loaded(["describe", "--vlm", f"openai:fake@{fake_server.base_url}", "--data",
                      str(tmp_path / "one.jsonl"), "--out", str(out), "--no-progress"])
    # the run did run, to the end: one answer, its results and its report
    assert json.loads((out / "results.json").read_text())["metrics"]["n"] == 1
    assert (out / "report.html").exists()
    assert "vlmcheck.methods.describe" in loaded and "aiohttp" in loaded
    assert _denied(loaded, DENY_ONE_IMAGE_RUN) == []


def test_the_cli_builds_only_the_command_it_runs():
    # typer builds every registered command's options on each call; main() hands it the one argv names
    from typer.main import get_command

    from vlmcheck.cli import app, only

    names = set(get_command(app).commands)
    assert {"describe", "chef", "report", "version"} <= names
    assert set(get_command(only(["describe", "--vlm", "x"])).commands) == {"describe"}
    assert set(get_command(only(["chef", "list"])).commands) == {"chef"}
    for argv in ([], ["--help"], ["-h", "describe"], ["--version"], ["descrbe"]):  # the whole app: help, suggestions
        assert set(get_command(only(argv)).commands) == names, argv
    assert app.registered_commands and only(["describe"]) is not app  # a copy: the app itself is untouched
    assert len(get_command(app).commands) == len(names)


def test_the_command_table_is_the_help_and_each_command_runs_with_its_own_module():
    # cli.COMMANDS is the one place a command is named: --help lists it, in its order, and a run imports the
    # module it names
    from typer.main import get_command

    import vlmcheck.cli as cli

    assert list(get_command(cli.app).commands) == list(cli.COMMANDS)
    for name, target in cli.COMMANDS.items():
        module = target.partition(":")[0]
        cmd = get_command(cli.only([name])).commands[name]
        subs = getattr(cmd, "commands", None)
        callback = next(iter(subs.values())).callback if subs else cmd.callback
        assert callback.__module__ == f"vlmcheck.cli.{module}", name


def test_a_built_in_provider_needs_no_entry_point_scan_and_a_plugin_is_still_found(monkeypatch):
    # scanning every installed package's entry points cost a one-image run ~30 ms twice; a built-in provider never
    # needs it (a plugin cannot replace a built-in name), a plugin's name still triggers it, once
    from types import SimpleNamespace

    from conftest import isolate_registry
    from vlmcheck.core import spec
    from vlmcheck.run.runner import _map_model_strings

    def _model_strings(task_spec):  # the model spec strings a run records
        found: set[str] = set()
        _map_model_strings(task_spec, lambda x: found.add(x) or x)
        return found

    scans = []

    def fake_entry_points(group):
        scans.append(group)
        return [SimpleNamespace(name="myplug", value="myplug.adapter:build"),
                SimpleNamespace(name="openai", value="elsewhere:build")]

    monkeypatch.setattr("importlib.metadata.entry_points", fake_entry_points)
    isolate_registry(monkeypatch, spec.PROVIDERS, loaded=False)
    assert "openai" in spec.PROVIDERS and spec.registration("openai").description != "plugin"
    assert _model_strings({"vlm": "openai:gpt-4o", "data": "x.jsonl", "n": [1]}) == {"openai:gpt-4o"}
    assert scans == []
    assert _model_strings({"vlm": "myplug:m", "judge": "OpenAI:x", "prompt": "Answer: yes"}) == {"myplug:m"}
    assert scans == ["vlmcheck.adapters"]  # once
    assert spec.registration("myplug").target == "myplug.adapter:build"
    assert spec.registration("openai").target != "elsewhere:build"  # the built-in one kept


def test_a_lazy_module_is_imported_on_first_use_once_and_safely_from_threads():
    # the stand-in is not the module: nothing is imported until an attribute is read; then the real module, the
    # one `import PIL.Image` gives matplotlib, and sixteen threads reading it at once all see it whole (the
    # standard library's LazyLoader, on 3.11, showed a second thread a half-executed module)
    code = """
import sys, threading
from vlmcheck._lazy import lazy_module
m = lazy_module("PIL.Image")
assert "PIL.Image" not in sys.modules
errors, go = [], threading.Barrier(16)
def use():
    go.wait()
    try:
        m.open, m.new, m.Image
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=use) for _ in range(16)]
[t.start() for t in threads]
[t.join() for t in threads]
assert errors == [], errors
import PIL.Image
assert PIL.Image.Image is m.Image and PIL.Image.new is m.new
m.MAX_IMAGE_PIXELS = 123  # a write reaches the module
assert PIL.Image.MAX_IMAGE_PIXELS == 123
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


@pytest.mark.parametrize("label,colour", [("done", "green"), ("error:", "red"), ("", "")])
def test_a_message_to_a_pipe_is_what_rich_writes_there_without_loading_rich(label, colour, monkeypatch):
    # rich is loaded only where it styles something: to a file or a pipe, say() writes the very text a rich Console
    # writes there, markup and emoji codes taken literally, one line however long
    import io

    from rich.console import Console

    from vlmcheck.report import terminal

    for k in ("TTY_COMPATIBLE", "FORCE_COLOR", "TTY_INTERACTIVE"):
        monkeypatch.delenv(k, raising=False)
    text = "1/1 samples [bold]x[/bold] :smile: \\[red] " + "Results: /tmp/a run/" + "long/" * 30 + "results.json"
    ours, theirs = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stderr", ours)
    con = terminal._Console(stderr=True)
    terminal.say(text, label, colour, con=con)
    assert con._made is None  # no rich Console was made
    terminal.say(text, label, colour, con=Console(file=theirs, width=80))
    assert ours.getvalue() == theirs.getvalue() == (f"{label} " if label else "") + text + "\n"
    con.quiet = True
    terminal.say(text, label, colour, con=con)
    assert ours.getvalue() == theirs.getvalue()  # quiet: nothing
    monkeypatch.setenv("FORCE_COLOR", "1")  # a terminal after all: rich writes it, styled
    con.quiet = False
    terminal.say(text, label, colour, con=con)
    assert con._made is not None and con.quiet is False


def test_the_cli_freezes_its_start_up_objects_once_and_still_collects_later_garbage():
    # the interpreter's collections walked the CLI's ~40k start-up objects (modules, classes, schemas) to free
    # nothing; the CLI hands them to the permanent generation once, and garbage made afterwards is still collected
    code = """
import gc, sys
from vlmcheck.cli import main
from vlmcheck.cli import _common
sys.argv = ["vlmcheck", "version"]
for _ in range(2):
    try:
        main()
    except SystemExit:
        pass
frozen = gc.get_freeze_count()
_common.freeze("start-up")  # once a process per stage: a second call freezes nothing more
class Cycle:
    pass
a, b = Cycle(), Cycle()
a.other, b.other = b, a
del a, b
print(frozen, gc.get_freeze_count(), gc.collect())
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    frozen, again, collected = map(int, proc.stdout.split()[-3:])
    assert frozen > 10_000 and again == frozen
    assert collected >= 2  # the cycle made after the freeze was collected


def test_the_cli_collects_young_garbage_ten_times_less_often_and_keeps_a_users_threshold():
    # a fast API run's ~210 young collections (each walking the requests in flight) cost 4 % of its CPU at
    # Python's 700; from the CLI's start-up on the threshold is CLI_GC_YOUNG, a user's higher one or 0 (off) kept
    code = """
import gc, sys
from vlmcheck.cli import _common
SETTING
start = gc.get_threshold()
_common.freeze("start-up")
after_start = gc.get_threshold()
_common.freeze("run")
print(*start, *after_start, *gc.get_threshold())
class Cycle:
    pass
a, b = Cycle(), Cycle()
a.other, b.other = b, a
del a, b
keep = [[] for _ in range(50000)]  # live allocations: past every threshold tried here
print(sum(1 for o in gc.get_objects() if type(o).__name__ == "Cycle"))
"""
    for setting, want in (("", 7000), ("gc.set_threshold(20000, 10, 10)", 20000), ("gc.set_threshold(0)", 0)):
        proc = subprocess.run([sys.executable, "-c", code.replace("SETTING", setting)],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.split("\n")
        start, after_start, run = (list(map(int, lines[0].split()))[i:i + 3] for i in (0, 3, 6))
        assert after_start == run == [want, *start[1:]]
        if want:
            assert int(lines[1]) == 0  # the cycle was collected without a gc.collect()


def test_a_results_line_to_a_pipe_is_what_rich_writes_there_without_loading_rich(monkeypatch):
    # a run's headline on stdout (describe, resume): to a file or a pipe, the very line a rich Console writes
    # there, markup and emoji codes taken literally, one line however long, and no rich Console made
    import io

    from rich.console import Console

    from vlmcheck.methods.view_lines import headline_lines
    from vlmcheck.report import terminal

    for k in ("TTY_COMPATIBLE", "FORCE_COLOR", "TTY_INTERACTIVE"):
        monkeypatch.delenv(k, raising=False)
    model = "openai:a:smile:b@http://h:1/v1?x=[bold]y" + "/long" * 30
    lines = headline_lines(model, {"headline": {"name": "share answered", "value": 0.5, "ci95": [0.25, 0.75]}})
    ours, theirs = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stdout", ours)
    con = terminal._Console(stderr=False)
    monkeypatch.setattr(terminal, "tables", con)
    terminal.show(lines)
    assert con._made is None
    monkeypatch.setattr(terminal, "tables", Console(file=theirs, width=80))
    terminal.show(lines)
    assert ours.getvalue() == theirs.getvalue() == f"{model}: share answered = 0.5000 [0.2500, 0.7500]\n"
