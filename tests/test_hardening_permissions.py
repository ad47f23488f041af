"""Issue 49 item 9, the plain permission-denied case: a read-only output folder, an unreadable input, a read-only
run folder.  Each gives one sentence naming the path the user gave (never a temp or lock file they never saw),
exit 2, no traceback; a read-only run can still be read (merged, reported).

Permission bits do not bind root, and the tests usually run as root: the CLI then runs in a subprocess under
``setpriv`` (util-linux) without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, so the files' modes apply to it as to
any user.  (Switching to an unprivileged uid instead, ``setpriv --reuid=65534``, needs the interpreter, the source
and pytest's temp folder readable by that user; under /root and /tmp/pytest-of-root they are not.)  As another
user the CLI runs as it is.  Where neither works the tests are skipped, saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from conftest import run_cli

pytestmark = pytest.mark.slow  # a subprocess each (about 2 s on a loaded machine)

DROP = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search"]


def _prefix(probe: Path) -> list[str]:
    """The command prefix under which file modes apply; pytest.skip where there is none."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root and util-linux's setpriv is not installed: file modes cannot be made to bind")
    p = subprocess.run([*DROP, sys.executable, "-c", f"open({str(probe)!r})"], capture_output=True, text=True)
    if "PermissionError" not in p.stderr:
        pytest.skip(f"setpriv could not drop CAP_DAC_OVERRIDE here (rc={p.returncode}: {p.stderr.strip()[-200:]})")
    return DROP


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    d = tmp_path_factory.mktemp("perm")
    (d / "img").mkdir()
    for i in range(2):
        Image.new("RGB", (16, 16), (80 * i, 40, 200)).save(d / "img" / f"{i}.png")
    rows = [{"id": f"s{i}", "image": f"img/{i}.png"} for i in range(2)]
    (d / "good.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "secret.jsonl").write_text(json.dumps(rows[0]) + "\n")
    (d / "closed").mkdir()
    shutil.copy(d / "img" / "0.png", d / "closed" / "0.png")
    shutil.copy(d / "img" / "1.png", d / "img" / "locked.png")
    (d / "locked.jsonl").write_text(json.dumps(rows[0]) + "\n" + json.dumps({"id": "L", "image": "img/locked.png"})
                                    + "\n")
    (d / "ro").mkdir()
    (d / "home").mkdir()
    for name in ("run", "run-unreadable"):  # made before the modes bind: in this process
        p = run_cli("describe", "--vlm", "ref:photo", "--data", d / "good.jsonl", "--out", d / name, "--no-progress")
        assert p.returncode == 0, p.stderr[-800:]
    # the modes, last: read-only folders, unreadable files and folders
    for path in (d / "run").rglob("*"):
        path.chmod(path.stat().st_mode & ~0o222)
    (d / "run").chmod(0o555)
    (d / "run-unreadable" / "results.json").chmod(0)
    (d / "ro").chmod(0o555)
    (d / "secret.jsonl").chmod(0)
    (d / "img" / "locked.png").chmod(0)
    (d / "closed").chmod(0)
    yield d
    for path in [d, *d.rglob("*")]:  # so that pytest can remove it
        try:
            path.chmod(path.stat().st_mode | stat.S_IRWXU)
        except OSError:
            pass


def _cli(ws: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "500", "HOME": str(ws / "home")}
    return subprocess.run([*_prefix(ws / "secret.jsonl"), sys.executable, "-m", "vlmcheck.cli", *args],
                          capture_output=True, text=True, cwd=ws, env=env, timeout=300)


#: (arguments, the path the sentence must name).  Before: `report -o` and `world make` named a temp file or
#: folder ("ro/.r.html.uy62n7vf.tmp", "ro/.w.51puagwe.partial"); `--out` an existing read-only folder, a resume
#: and `merge` named a lock file; merging a read-only run failed on the shard ("run/store.sqlite: cannot write
#: there").
CASES = {
    "out under a read-only folder": (["describe", "--vlm", "ref:photo", "--data", "good.jsonl", "--out", "ro/run",
                                      "--no-progress"], "ro/run"),
    "out is a read-only folder": (["describe", "--vlm", "ref:photo", "--data", "good.jsonl", "--out", "ro",
                                   "--no-progress"], "ro"),
    "unreadable manifest": (["describe", "--vlm", "ref:photo", "--data", "secret.jsonl", "--out", "home/r1",
                             "--no-progress"], "secret.jsonl"),
    "unreadable data folder": (["describe", "--vlm", "ref:photo", "--data", "closed", "--out", "home/r2",
                                "--no-progress"], "closed"),  # "closed/manifest.jsonl": the file it looked for
    "world make into a read-only folder": (["world", "make", "ro/w", "--n", "2"], "ro/w"),
    "world pairs into a read-only folder": (["world", "pairs", "ro/p", "--n", "2"], "ro/p"),
    "report into a read-only folder": (["report", "run", "-o", "ro/r.html"], "ro/r.html"),
    "export into a read-only folder": (["export", "run", "--out", "ro/e"], "ro/e"),
    "perturb into a read-only folder": (["perturb", "img/0.png", "-c", "gaussian_noise", "--out", "ro/pt"], "ro/pt"),
    "merge into a read-only folder": (["merge", "ro/m", "run"], "ro/m"),
    "resume a read-only run": (["resume", "run"], "run"),
    "--resume a read-only run": (["describe", "--vlm", "ref:photo", "--data", "good.jsonl", "--out", "run",
                                  "--resume", "--no-progress"], "run"),
    "report of an unreadable results.json": (["report", "run-unreadable", "-o", "home/r.html"],
                                             "run-unreadable/results.json"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_permission_denied_is_one_sentence_naming_the_users_path(ws, name):
    args, named = CASES[name]
    p = _cli(ws, *args)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2 and "Traceback" not in p.stderr + p.stdout, (name, p.returncode, p.stderr[-800:])
    assert len(lines) == 1 and lines[0].startswith("error:"), (name, p.stderr)
    assert f" {named}" in lines[0], (name, lines[0])
    assert ".tmp" not in lines[0] and ".partial" not in lines[0] and ".lock" not in lines[0], (name, lines[0])


def test_a_read_only_run_can_still_be_merged(ws):
    """Before: merging a finished run kept in a read-only folder failed: SQLite could not make the shard's -shm
    file.  A read-only folder's store is now opened immutable (nothing is in a WAL file)."""
    p = _cli(ws, "merge", "home/merged", "run")
    assert p.returncode == 0, p.stderr[-800:]
    assert json.loads((ws / "home" / "merged" / "results.json").read_text())["counts"]["done"] == 2
    assert not [f for f in os.listdir(ws / "run") if f.endswith(("-wal", "-shm"))]


def test_an_unreadable_image_fails_its_own_sample_and_the_run_goes_on(ws):
    p = _cli(ws, "describe", "--vlm", "ref:photo", "--data", "locked.jsonl", "--out", "home/r3", "--no-progress")
    assert "Traceback" not in p.stderr and p.returncode == 1, p.stderr[-800:]
    rows = {r["sample_id"]: r for r in map(json.loads, (ws / "home" / "r3" / "samples.jsonl").read_text().splitlines())}
    assert rows["s0"]["status"] == "done" and rows["L"]["status"] == "error"
    assert "img/locked.png: cannot read (Permission denied)" in rows["L"]["error"]["message"]
