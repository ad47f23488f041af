"""ChEF: recipes (Scenario + Instruction + Inferencer + Metric) and the six desiderata.

``recipe.py`` (the recipe as data, prompts, answer extraction), ``scenarios.py`` (loaders), ``inferencers.py``
(Direct, CoT, PPL, CoT+PPL, multi-turn PPL: supplementary B.3), ``task.py`` (the task: settings, desiderata),
``turns.py`` (multi-turn scenarios), ``summary.py``, ``headline.py``, ``metrics.py``, ``aggregate.py``.
"""

from .inferencers import INFERENCERS
from .recipe import Recipe, resolve_recipe, shipped_recipes, usable_inferencers
from .task import ChefSpec, ChefTask

__all__ = ["INFERENCERS", "ChefSpec", "ChefTask", "Recipe", "resolve_recipe", "shipped_recipes", "usable_inferencers"]
