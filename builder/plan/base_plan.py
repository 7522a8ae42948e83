"""`builder base` as a plan: the release's offline base recipe and its job."""

from __future__ import annotations

from dataclasses import dataclass

from builder.catalog import Catalog
from builder.engine.buildsettings import BackendAsks
from builder.plan.options_check import check_backend
from builder.render.base_recipe import BaseRecipe
from builder.render.job import ImageJob


@dataclass(frozen=True)
class BasePlan:
    release: str
    recipe: BaseRecipe
    rebuild: bool = False
    job: ImageJob | None = None

    @property
    def tag(self) -> str:
        return self.recipe.tag


def plan_base(catalog: Catalog, release: str, rebuild: bool = False, backend: BackendAsks = BackendAsks()) -> BasePlan:
    rel = catalog.get(release)
    check_backend(backend)
    recipe = BaseRecipe.for_release(rel)
    return BasePlan(rel.name, recipe, rebuild, recipe.job())
