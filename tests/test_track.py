"""Experiment trackers (vlmcheck/track): a finished run logged to a real MLflow store (SQLite), W&B in offline mode
and TensorBoard event files, each read back with the tracker's own reader; idempotent; grouped by sweep; a tracker
that cannot log is one sentence before the run.

The runs are results.json files of GenCeption's shape written here (two models, GC@1..2 with intervals, s(t)), so
every value read back is known in the test."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conftest import run_cli
from vlmcheck.track import metric_name, track_runs, tracked_run

pytestmark = pytest.mark.slow  # each tracker's import alone is seconds of CPU (MLflow ~3 s, W&B starts a service)


def test_figure_names_and_steps():
    assert metric_name("GC@2") == ("GC", 2)
    assert metric_name("s@2_unweighted") == ("s_unweighted", 2)
    assert metric_name("GC_FID@1") == ("GC_FID", 1)
    assert metric_name("variants.fog:s3.accuracy") == ("variants.fog_s3.accuracy", None)


def fake_run(folder: Path, model: str, gc: tuple[float, float], s: tuple[float, float]) -> Path:
    """A finished GenCeption run's folder: results.json with GC@1, GC@2 (the headline) and s(t), and a report."""
    folder.mkdir(parents=True)
    interval = {"method": "bootstrap", "unit": "image", "n_units": 6}
    metrics = {"T": 2, "GC@1": {"score": gc[0], "ci95": [gc[0] - 0.1, gc[0] + 0.1], "n": 6, "interval": interval},
               "GC@2": {"score": gc[1], "ci95": [gc[1] - 0.1, gc[1] + 0.1], "n": 6, "interval": interval},
               "s_mean": list(s),
               "headline": {"name": "GC@2", "value": gc[1], "ci95": [gc[1] - 0.1, gc[1] + 0.1],
                            "interval": interval, "higher_is_better": True}}
    spec = {"task": "genception", "seed": 0, "task_spec": {"vlm": f"openai:{model}@http://127.0.0.1:8000/v1", "T": 2,
                                                          "data": "world"}, "sample_ids_fingerprint": "abc"}
    results = {"task": "genception", "spec": spec, "counts": {"samples": 6, "done": 6, "failed": 0},
               "metrics": metrics, "usage": {f"openai:{model}": {"ok": 12, "cost_usd": 0.25}}}
    (folder / "results.json").write_text(json.dumps(results))
    (folder / "report.html").write_text("<html>report</html>")
    (folder / "samples.jsonl").write_text("")
    return folder


@pytest.fixture
def runs(tmp_path):
    return [fake_run(tmp_path / "runs" / "a", "model-a", (0.9, 0.8), (0.85, 0.75)),
            fake_run(tmp_path / "runs" / "b", "model-b", (0.7, 0.6), (0.65, 0.55))]


def test_mlflow_holds_params_headline_with_interval_steps_and_artifacts(tmp_path, runs, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MLflow's artifact root is ./mlruns where the experiment is made
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "test-exp")
    done = track_runs(runs, ["mlflow"], group="sweep s1")
    assert [d["status"] for d in done] == ["logged", "logged"]
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    exp = client.get_experiment_by_name("test-exp")
    found = client.search_runs([exp.experiment_id])
    parents = [r for r in found if "vlmcheck.sweep" in r.data.tags]
    children = {r.info.run_name: r for r in found if "vlmcheck.run_key" in r.data.tags}
    assert len(parents) == 1 and parents[0].info.run_name == "sweep s1" and set(children) == {"model-a",
                                                                                               "model-b"}
    a = children["model-a"]
    assert a.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
    assert a.data.params["method"] == "genception" and a.data.params["headline_name"] == "GC@2"
    assert a.data.params["spec.task_spec.T"] == "2"
    m = a.data.metrics
    assert (m["headline"], m["headline.ci_low"], m["headline.ci_high"], m["headline.n"]) == pytest.approx(
        (0.8, 0.7, 0.9, 6))
    assert m["cost_usd"] == pytest.approx(0.25)
    gc = sorted((h.step, h.value) for h in client.get_metric_history(a.info.run_id, "GC"))
    assert gc == [(1, pytest.approx(0.9)), (2, pytest.approx(0.8))]
    s = sorted((h.step, h.value) for h in client.get_metric_history(a.info.run_id, "s_mean"))
    assert s == [(1, pytest.approx(0.85)), (2, pytest.approx(0.75))]
    assert {f.path for f in client.list_artifacts(a.info.run_id)} == {"report.html", "results.json"}
    again = track_runs(runs, ["mlflow"], group="sweep s1")  # idempotent: nothing new
    assert [d["status"] for d in again] == ["already logged"] * 2
    assert len(client.search_runs([exp.experiment_id])) == 3


def _wandb_records(path: Path) -> list:
    """The records of a W&B run file (LevelDB's log format: 32 kB blocks of crc, length, type; W&B's 7-byte
    header), parsed with W&B's own protobuf classes."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, buf, out = 7, b"", []
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:
            pos += left
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        if kind == 0:
            pos += left
            continue
        chunk = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        buf = chunk if kind in (1, 2) else buf + chunk
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(buf)
            out.append(rec)
    return out


def test_wandb_offline_run_files_hold_the_run(tmp_path, runs, monkeypatch):
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wb"))
    monkeypatch.delenv("WANDB_MODE", raising=False)  # the offline default
    monkeypatch.setenv("WANDB_PROJECT", "p")
    done = track_runs(runs[:1], ["wandb"], group="sweep s1")
    assert done[0]["status"] == "logged"
    key = tracked_run(runs[0]).key
    folder, = (tmp_path / "wb" / "wandb").glob(f"offline-run-*-{key}")
    for _ in range(50):  # W&B's own service process may still be flushing the file when finish() returns
        recs = _wandb_records(folder / f"run-{key}.wandb")
        kinds = [r.WhichOneof("record_type") for r in recs]
        if "run" in kinds and "exit" in kinds:  # the exit record is the last the run writes
            break
        time.sleep(0.2)
    run = next((r.run for r in recs if r.WhichOneof("record_type") == "run"), None)
    assert run is not None, kinds
    assert (run.run_group, run.display_name, run.project) == ("sweep s1", "model-a", "p")
    def items(updates) -> dict:
        return {i.key or ".".join(i.nested_key): json.loads(i.value_json) for i in updates}

    config = items(run.config.update)
    for r in recs:
        if r.WhichOneof("record_type") == "config":
            config.update(items(r.config.update))
    assert config["method"] == "genception"
    history = [items(r.history.item) for r in recs if r.WhichOneof("record_type") == "history"]
    gc = sorted((h["_step"], h["GC"]) for h in history if "GC" in h)
    assert gc == [(1, pytest.approx(0.9)), (2, pytest.approx(0.8))]
    summary = {}
    for r in recs:
        if r.WhichOneof("record_type") == "summary":
            summary.update(items(r.summary.update))
    assert (summary["headline"], summary["headline.ci_low"], summary["headline.ci_high"]) == pytest.approx(
        (0.8, 0.7, 0.9))
    assert "artifact" in kinds
    assert track_runs(runs[:1], ["wandb"], group="sweep s1")[0]["status"] == "already logged"
    assert len(list((tmp_path / "wb" / "wandb").glob("offline-run-*"))) == 1


def test_tensorboard_event_files_hold_the_run(tmp_path, runs, monkeypatch):
    monkeypatch.setenv("VLMCHECK_TENSORBOARD_DIR", str(tmp_path / "tb"))
    done = track_runs(runs, ["tensorboard"], group="sweep s1")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    folder = Path(done[0]["where"])
    assert folder.parent == tmp_path / "tb" / "sweep_s1" and len(list(folder.parent.iterdir())) == 2
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    scalars = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    assert scalars["headline"] == [(0, pytest.approx(0.8))] and scalars["headline.ci_low"] == [(0, pytest.approx(0.7))]
    assert scalars["GC"] == [(1, pytest.approx(0.9)), (2, pytest.approx(0.8))]
    assert (folder / "report.html").is_file() and (folder / "results.json").is_file()
    events = sorted(folder.glob("events.*"))
    assert [d["status"] for d in track_runs(runs, ["tensorboard"], group="sweep s1")] == ["already logged"] * 2
    assert sorted(folder.glob("events.*")) == events


def test_a_run_with_track_is_logged_and_a_tracker_that_cannot_log_stops_it_before_it_starts(tmp_path, monkeypatch,
                                                                                           image_folder):
    from vlmcheck import RunOptions, run_task
    from vlmcheck.methods.describe import DescribeSpec, DescribeTask
    from vlmcheck.track import TrackerError

    monkeypatch.setenv("VLMCHECK_TENSORBOARD_DIR", str(tmp_path / "tb"))
    task = lambda: DescribeTask(DescribeSpec(vlm="ref:photo", data=str(image_folder)))  # noqa: E731
    run_task(task(), tmp_path / "run", RunOptions(progress=False, track=["tensorboard"]))
    assert len(list((tmp_path / "tb").glob("photo-*/events.*"))) == 1
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # nothing listens there
    with pytest.raises(TrackerError, match=r"tracker mlflow: the tracking store http://127.0.0.1:9 cannot be used"):
        run_task(task(), tmp_path / "never", RunOptions(progress=False, track=["mlflow"]))
    assert not (tmp_path / "never").exists()
    proc = run_cli("track", tmp_path / "run", "--to", "nope")
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "error: 'nope' is not a tracker; choose from mlflow, wandb, tensorboard")


def test_a_sweep_of_two_models_is_two_runs_grouped_under_the_sweep(tmp_path, monkeypatch, image_folder):
    from vlmcheck.sweep import run_sweep

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.chdir(tmp_path)  # MLflow's artifact root is ./mlruns where the experiment is made
    config = tmp_path / "sweep.yaml"
    config.write_text(f"out: {tmp_path / 'sw'}\nmodels: [ref:photo, 'ref:photo?seed=1']\n"
                      f"methods:\n  - method: describe\n    data: {image_folder}\ntrack: [mlflow]\n")
    run_sweep(config, progress=False, report=False)
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    found = client.search_runs([client.get_experiment_by_name("vlmcheck").experiment_id])
    parent, = [r for r in found if "vlmcheck.sweep" in r.data.tags]
    children = [r for r in found if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert parent.info.run_name == "sweep sw" and len(children) == 2
    assert all("headline" in r.data.metrics for r in children)
    # `vlmcheck track` on the finished runs afterwards logs nothing twice
    proc = run_cli("track", *(p for p in sorted((tmp_path / "sw").glob("*/*")) if (p / "results.json").is_file()),
                   "--to", "mlflow", "--group", "sweep sw")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("already logged") == 2
    assert len(client.search_runs([client.get_experiment_by_name("vlmcheck").experiment_id])) == 3
