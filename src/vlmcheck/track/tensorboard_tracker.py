"""TensorBoard: each run an event-file folder ``<log dir>/<group>/<label>-<key>`` written with tensorboardX (no
torch needed): every figure a scalar (at its step, else 0), the parameters as text, the artifacts beside."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from . import TrackedRun, TrackerError

_MARK = ".vlmcheck-tracked"


class TensorBoardTracker:
    name = "tensorboard"

    def __init__(self) -> None:
        import tensorboardX  # noqa: F401 (ModuleNotFoundError: the extra is not installed)

        self.root = Path(os.environ.get("VLMCHECK_TENSORBOARD_DIR") or "tensorboard")

    def check(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=self.root).close()  # a file can be written there
        except OSError as exc:
            raise TrackerError(f"tracker tensorboard: cannot write the log folder {self.root}: "
                               f"{exc.strerror or exc}") from None

    def folder(self, run: TrackedRun) -> Path:
        safe = lambda s: re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("._") or "run"  # noqa: E731
        base = self.root / safe(run.group) if run.group else self.root
        return base / f"{safe(run.name)}-{run.key[:12]}"

    def logged(self, run: TrackedRun) -> bool:
        return (self.folder(run) / _MARK).is_file()

    def log(self, run: TrackedRun) -> str:
        from tensorboardX import SummaryWriter

        folder = self.folder(run)
        if folder.exists():  # an earlier attempt that did not finish: its events are replaced, never doubled
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        writer = SummaryWriter(logdir=str(folder))
        try:
            for name, value, step in run.metrics:
                writer.add_scalar(name, value, global_step=step or 0)
            table = "\n".join(f"| {k} | {v.replace('|', '/')} |" for k, v in sorted(run.params.items()))
            writer.add_text("params", "| param | value |\n|---|---|\n" + table, global_step=0)
            writer.add_text("tags", "\n".join(f"{k}: {v}" for k, v in sorted(run.tags.items())), global_step=0)
        finally:
            writer.close()
        for path in run.artifacts:
            shutil.copyfile(path, folder / path.name)
        (folder / _MARK).write_text(run.key + "\n")
        return str(folder)
