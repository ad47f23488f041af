"""ChEF: recipes (Scenario + Instruction + Inferencer + Metric) and the six desiderata."""

from .task import ChefSpec, ChefTask, Recipe, resolve_recipe, shipped_recipes

__all__ = ["ChefSpec", "ChefTask", "Recipe", "resolve_recipe", "shipped_recipes"]
