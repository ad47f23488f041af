"""vlmcheck: annotation-free evaluation of vision-language models.

Public API::

    from vlmcheck import load_model, Message, GenerationConfig, run_task, RunOptions
"""

from ._version import __version__
from . import methods as _methods  # noqa: F401  (registers the built-in tasks)
from . import models as _models  # noqa: F401  (registers the built-in adapters)
from .core.images import BadImageError, load_image  # noqa: E402
from .core.messages import ImagePart, Message, TextPart  # noqa: E402
from .core.roles import (  # noqa: E402
    VLM, Capabilities, Generation, GenerationConfig, ImageEncoder, ImageGenerator, Loglikelihood, TextModel,
)
from .core.spec import ModelSpec, load_model, register  # noqa: E402
from .export import export_runs, load_runs, load_tables  # noqa: E402
from .api import run_task, run_task_async  # noqa: E402
from .run.runner import RunOptions  # noqa: E402

__all__ = [
    "__version__", "BadImageError", "Capabilities", "Generation", "GenerationConfig", "ImageEncoder",
    "ImageGenerator", "ImagePart", "Loglikelihood", "Message", "ModelSpec", "RunOptions", "TextModel", "TextPart",
    "VLM", "export_runs", "load_image", "load_model", "load_runs", "load_tables", "register", "run_task",
    "run_task_async",
]
