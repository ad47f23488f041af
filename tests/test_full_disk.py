"""A full disk is named for what filled: vlmcheck's cache (no run to resume: set VLMCHECK_CACHE elsewhere), a run's
folder (resume it), or another file.  Before, every full disk said "resume the run", also where no run existed
(a cache filled by `data inspect` or a release's images)."""

from vlmcheck.cli import _full_disk


def test_a_full_disk_names_what_filled(tmp_path, monkeypatch):
    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    cached = tmp_path / "cache" / "releases" / "cifar10" / "k" / "0.png"
    assert _full_disk(str(cached)) == (
        f"no space left to write {cached} in vlmcheck's cache {tmp_path / 'cache'}; free some space there, or set "
        "VLMCHECK_CACHE to a folder on a disk with room, and run the command again")
    run = tmp_path / "runs" / "x"
    run.mkdir(parents=True)
    (run / "store.sqlite").write_bytes(b"")
    assert _full_disk(str(run / "samples.jsonl")) == (
        f"no space left to write {run / 'samples.jsonl'} in the run folder {run}; free some space and "
        f"`vlmcheck resume {run}` (finished samples are kept)")
    other = tmp_path / "tables" / "metrics.csv"
    assert _full_disk(str(other)) == f"no space left to write {other}; free some space and run the command again"
    assert "resume" not in _full_disk(None)
