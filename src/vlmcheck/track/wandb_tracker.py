"""Weights & Biases: each run a W&B run whose id is the run's key (so it is logged once), grouped by sweep;
figures with a step in the run's history, the others in its summary, the artifacts as a W&B artifact."""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from pathlib import Path

from . import TrackedRun, TrackerError

_MARK = "vlmcheck-logged"  # written into the run's files once W&B has finished it: a run cut short is logged again


class WandbTracker:
    name = "wandb"

    def __init__(self) -> None:
        import wandb  # noqa: F401 (ModuleNotFoundError: the extra is not installed)

        self.mode = os.environ.get("WANDB_MODE") or "offline"
        self.project = os.environ.get("WANDB_PROJECT") or "vlmcheck"
        self.dir = Path(os.environ.get("WANDB_DIR") or ".")

    def check(self) -> None:
        if self.mode not in ("offline", "online", "disabled", "shared"):
            raise TrackerError(f"tracker wandb: WANDB_MODE={self.mode!r}; use offline or online")
        if self.mode == "offline":
            try:
                self.dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise TrackerError(f"tracker wandb: cannot write {self.dir}: {exc.strerror or exc}") from None
            return
        if self.mode != "disabled" and not os.environ.get("WANDB_API_KEY") \
                and not Path("~/.netrc").expanduser().exists():
            raise TrackerError("tracker wandb: no W&B key (set WANDB_API_KEY, run `wandb login`, or set "
                               "WANDB_MODE=offline to keep the runs on this machine)")

    def _offline_runs(self, key: str) -> list[Path]:
        return sorted((self.dir / "wandb").glob(f"offline-run-*-{key}"))

    def logged(self, run: TrackedRun) -> bool:
        if self.mode == "offline":
            return any((p / "files" / _MARK).is_file() for p in self._offline_runs(run.key))
        try:
            import wandb

            wandb.Api(timeout=15).run(f"{self.project}/{run.key}")
            return True
        except Exception:
            return False

    def log(self, run: TrackedRun) -> str:
        import wandb

        for stale in self._offline_runs(run.key) if self.mode == "offline" else ():  # an attempt that did not end
            shutil.rmtree(stale, ignore_errors=True)
        w = wandb.init(project=self.project, group=run.group, name=run.name, id=run.key, config=run.params,
                       tags=[run.tags.get("vlmcheck.method", "vlmcheck")], mode=self.mode, dir=str(self.dir),
                       reinit="create_new", settings=wandb.Settings(console="off", silent=True))
        files = Path(w.dir)
        try:
            by_step: dict[int, dict[str, float]] = defaultdict(dict)
            for name, value, step in run.metrics:
                if step is None:
                    w.summary[name] = value
                else:
                    by_step[step][name] = value
            for step in sorted(by_step):
                w.log(by_step[step], step=step)
            for k, v in run.tags.items():
                w.summary[f"tag/{k}"] = v
            if run.artifacts:
                art = wandb.Artifact(f"vlmcheck-run-{run.key[:12]}", type="vlmcheck-run")
                for path in run.artifacts:
                    art.add_file(str(path))
                w.log_artifact(art)
        finally:
            w.finish()
        if self.mode == "offline":
            (files / _MARK).write_text(run.key + "\n")
        return f"W&B {self.mode} run {run.key} ({self.project})"
