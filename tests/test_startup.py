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
        "vlmcheck.store.db", "vlmcheck.core.images", "vlmcheck.api")

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


def _loaded(argv: list[str]) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stderr.strip().splitlines()[-1])


def _denied(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == d or m.startswith(d if d.endswith(".") else d + ".") for d in DENY)]


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
