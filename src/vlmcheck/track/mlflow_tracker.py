"""MLflow: each run an MLflow run in ``$MLFLOW_EXPERIMENT_NAME`` (default ``vlmcheck``) of the store at
``$MLFLOW_TRACKING_URI``; a sweep's runs nested under one parent run named after the sweep."""

from __future__ import annotations

import os
import time
from typing import Any

from . import TrackedRun, TrackerError, _UNSAFE_NAME


class MLflowTracker:
    name = "mlflow"

    def __init__(self) -> None:
        import logging
        import warnings

        from mlflow.tracking import MlflowClient  # ModuleNotFoundError: the extra is not installed

        logging.getLogger("mlflow").setLevel(logging.WARNING)  # its store's set-up notes are not the run's output
        warnings.filterwarnings("ignore", message=r".*noload.*")  # SQLAlchemy's, about MLflow's own store
        # a server that does not answer is one sentence in seconds, not minutes of MLflow's retries
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "15")
        self.client = MlflowClient()
        self.experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME") or "vlmcheck"

    def check(self) -> None:
        try:
            self.client.search_experiments(max_results=1)
        except Exception as exc:
            from . import _sentence

            raise TrackerError(f"tracker mlflow: the tracking store {self.client.tracking_uri} cannot be used: "
                               f"{_sentence(exc)}") from None

    def _experiment_id(self) -> str:
        exp = self.client.get_experiment_by_name(self.experiment)
        return exp.experiment_id if exp is not None else self.client.create_experiment(self.experiment)

    def _find(self, exp_id: str, tag: str, value: str) -> Any:
        found = self.client.search_runs([exp_id], filter_string=f"tags.`{tag}` = '{value}'", max_results=1)
        return found[0] if found else None

    def logged(self, run: TrackedRun) -> bool:
        return self._find(self._experiment_id(), "vlmcheck.run_key", run.key) is not None

    def _parent(self, exp_id: str, group: str) -> str:
        found = self._find(exp_id, "vlmcheck.sweep", group.replace("'", ""))
        if found is not None:
            return found.info.run_id
        parent = self.client.create_run(exp_id, run_name=group, tags={"vlmcheck.sweep": group.replace("'", "")})
        self.client.set_terminated(parent.info.run_id)
        return parent.info.run_id

    def log(self, run: TrackedRun) -> str:
        from mlflow.entities import Metric, Param, RunTag

        exp_id = self._experiment_id()
        tags = dict(run.tags)
        if run.group:
            tags["mlflow.parentRunId"] = self._parent(exp_id, run.group)
        made = self.client.create_run(exp_id, run_name=run.name, tags=tags)
        run_id = made.info.run_id
        now = int(time.time() * 1000)
        params = [Param(_UNSAFE_NAME.sub("_", k)[:250], v[:6000]) for k, v in run.params.items()]
        metrics = [Metric(name, value, now, step or 0) for name, value, step in run.metrics]
        for i in range(0, len(params), 100):  # MLflow's limits on one batch
            self.client.log_batch(run_id, params=params[i:i + 100])
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(run_id, metrics=metrics[i:i + 1000])
        self.client.log_batch(run_id, tags=[RunTag("vlmcheck.logged", "1")])
        for path in run.artifacts:
            self.client.log_artifact(run_id, str(path))
        self.client.set_terminated(run_id)
        return f"{self.client.tracking_uri} run {run_id}"
