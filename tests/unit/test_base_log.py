"""`builder base` writes its build log where every other command logs: the cache dir's
logs/ (BUILDER_CACHE_DIR, default ~/.cache/tfbuilder). A fake engine records the request."""
from builder import catalog, cli
from builder.base_recipe import BaseRecipe
from builder.engine import BuildResult


class Engine:
    def __init__(self, recipe):
        self.recipe, self.requests, self.tags = recipe, [], []

    def image_id(self, ref):  # the rootfs exists (no debootstrap), the base tag does not
        return "sha256:" + "2" * 64 if ref == self.recipe.rootfs_image else None

    def build(self, request, progress):
        self.requests.append(request)
        return BuildResult("sha256:" + "3" * 64, 5, 1.0)

    def tag(self, image_id, ref):
        self.tags.append(ref)


def test_builder_base_logs_into_the_cache_dirs_logs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "cache"))
    recipe = BaseRecipe(catalog.load().get("21.08").offline)
    engine = Engine(recipe)
    monkeypatch.setattr(cli, "_engine", lambda: engine)
    assert cli.main(["base", "-r", "21.08", "--no-host-ca", "-q"]) == 0, capsys.readouterr().err
    [request] = engine.requests
    assert request.log_path.parent == tmp_path / "cache" / "logs"
    assert request.log_path.name.startswith("base-") and engine.tags == [recipe.tag]
