"""`builder base` writes its build log where every other command logs: the cache dir's
logs/ (BUILDER_CACHE_DIR, default ~/.cache/tfbuilder). A fake engine records the request."""

from builder import catalog
from builder.cli import main as cli
from builder.render.base_recipe import BaseRecipe
from tests.unit.fake_engine import FakeEngine


def test_builder_base_logs_into_the_cache_dirs_logs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "cache"))
    recipe = BaseRecipe(catalog.load().get("21.08").offline)
    engine = FakeEngine()
    engine.add_image(recipe.rootfs_image)  # the rootfs exists (no debootstrap), the base tag does not
    monkeypatch.setattr(cli, "_engine", lambda: engine)
    assert cli.main(["base", "-r", "21.08", "--no-host-ca", "-q"]) == 0, capsys.readouterr().err
    [request] = [c[1] for c in engine.calls if c[0] == "build"]
    assert request.log_path.parent == tmp_path / "cache" / "logs"
    assert request.log_path.name.startswith("base-")
    assert [c[2] for c in engine.calls if c[0] == "tag"] == [recipe.tag] and recipe.tag in engine.tags
