"""The fast lane's own rule (tests/conftest.py): an unmarked test that uses more CPU than its budget fails; a slow
one may use what it needs; CPU spent importing a module for the first time or setting up a fixture that several
tests share is not charged to the test that happened to come first, nor is a cost paid only the first time (a
test over its budget runs once more); sleeping (wall time) costs nothing."""

from __future__ import annotations

from pathlib import Path

CONFTEST = Path(__file__).with_name("conftest.py").read_text(encoding="utf-8")

TESTS = '''
import time

import pytest


def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


@pytest.fixture(scope="module")
def shared():
    burn(0.15)


def test_over():
    burn(0.15)


@pytest.mark.slow
def test_marked_slow():
    burn(0.15)


def test_after_a_shared_fixture(shared):
    pass


def test_imports_a_heavy_module():
    import heavy  # noqa: F401


def test_sleeps():
    time.sleep(0.3)


FIRST = []


def test_over_only_the_first_time(tmp_path):
    if not FIRST:  # what a process pays once (a library's first call) falls to the first test that calls it
        FIRST.append(tmp_path)
        burn(0.15)
    else:
        assert tmp_path != FIRST[0]  # the second run has its own fixtures
'''


def test_an_unmarked_test_over_its_cpu_budget_fails_and_nothing_else_does(pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # a lighter pytest: no installed plugin is needed
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers = slow: over the budget\n")
    pytester.makepyfile(heavy="import time\nend = time.process_time() + 0.15\nwhile time.process_time() < end:\n"
                              "    pass\n", test_burn=TESTS)
    result = pytester.runpytest_subprocess("--cpu-budget", "0.1", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(["*test_burn.py::test_over used 0.* s of CPU (twice), over the 0.1 s budget of an "
                                 "unmarked test: mark it @pytest.mark.slow*"])
