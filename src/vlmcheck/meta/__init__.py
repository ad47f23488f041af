"""Meta-evaluation: the methods run on the reference world, where the truth is known (``evaluate.py``).

It sits above the methods and the world: the world (``vlmcheck.world``) holds the reference scenes and models
only, and knows nothing of what evaluates it.
"""

from .evaluate import DEFAULT_LEVELS, meta_evaluate

__all__ = ["DEFAULT_LEVELS", "meta_evaluate"]
