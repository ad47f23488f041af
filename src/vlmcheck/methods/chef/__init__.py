"""ChEF: recipes (Scenario + Instruction + Inferencer + Metric) and the six desiderata.

``recipe.py`` (the recipe as data, prompts, answer extraction), ``scenarios.py`` (loaders), ``task.py`` (the
task: settings, inferencers, desiderata), ``turns.py`` (multi-turn scenarios), ``metrics.py``, ``aggregate.py``.
"""

from .recipe import Recipe, resolve_recipe, shipped_recipes
from .task import ChefSpec, ChefTask

__all__ = ["ChefSpec", "ChefTask", "Recipe", "resolve_recipe", "shipped_recipes"]
