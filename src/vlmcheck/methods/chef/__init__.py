"""ChEF: recipes (Scenario + Instruction + Inferencer + Metric) and the six desiderata (docs/methods.md)."""

from .inferencers import INFERENCERS
from .recipe import Recipe, resolve_recipe, shipped_recipes, usable_inferencers
from .task import ChefSpec, ChefTask

__all__ = ["INFERENCERS", "ChefSpec", "ChefTask", "Recipe", "resolve_recipe", "shipped_recipes", "usable_inferencers"]
