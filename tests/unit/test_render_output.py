"""Render output directories: a render deletes or overwrites only what a render wrote
(the marker lists it), renders into one directory take turns, `render --all` with a
private catalog leaves the Dockerfiles of releases it does not know alone."""

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builder.cli import main as cli
from builder.core import outputdir
from builder.core.errors import UserError
from builder.image import buildcontext
from builder.render import Rendered

ROOT = Path(__file__).resolve().parents[2]


def ctx(**files):
    return Rendered("30.01", "tf2-py3", {k.replace("__", "/"): v for k, v in files.items()})


def marker(dest):
    return json.loads((dest / outputdir.MARKER).read_text())


def test_the_marker_lists_every_file_written(tmp_path):
    out = buildcontext.write(ctx(Dockerfile="a", extra__x_txt="1"), tmp_path / "out")
    files = marker(out)["files"]
    assert "Dockerfile" in files and "extra/x_txt" in files and "nvbuild.sh" in files
    assert any(f.startswith("tensorflow-source/") for f in files)
    on_disk = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() or p.is_symlink())
    assert sorted(files) == sorted(f for f in on_disk if f != outputdir.MARKER)


def test_a_rerender_removes_only_files_a_render_wrote(tmp_path):
    out = tmp_path / "out"
    buildcontext.write(ctx(Dockerfile="a", old__gone_txt="1", old__kept_txt="2"), out)
    (out / "old" / "mine.txt").write_text("user file in a rendered directory")
    (out / "notes").mkdir()
    (out / "notes" / "todo").write_text("user directory")
    (tmp_path / ".out.old").mkdir()  # a sibling the previous implementation deleted
    (tmp_path / ".out.old" / "keep").write_text("sibling")
    buildcontext.write(ctx(Dockerfile="b"), out)
    assert (out / "Dockerfile").read_text() == "b"
    assert not (out / "old" / "gone_txt").exists() and not (out / "old" / "kept_txt").exists()
    assert (out / "old" / "mine.txt").read_text() == "user file in a rendered directory"
    assert (out / "notes" / "todo").read_text() == "user directory"
    assert (tmp_path / ".out.old" / "keep").read_text() == "sibling"
    assert "old/gone_txt" not in marker(out)["files"]
    assert not [p for p in out.iterdir() if p.name.startswith(outputdir.STAGING_PREFIX)]


def test_emptied_directories_of_the_render_go_too(tmp_path):
    out = tmp_path / "out"
    buildcontext.write(ctx(Dockerfile="a", deep__er__f="1"), out)
    buildcontext.write(ctx(Dockerfile="a"), out)
    assert not (out / "deep").exists()


def test_a_user_file_where_a_new_file_goes_is_refused_and_nothing_changes(tmp_path):
    out = tmp_path / "out"
    buildcontext.write(ctx(Dockerfile="a"), out)
    (out / "new.txt").write_text("the user's")
    before = (out / outputdir.MARKER).read_text()
    with pytest.raises(UserError, match=r"new.txt exists and was not written by `builder render`"):
        buildcontext.write(ctx(Dockerfile="b", **{"new.txt": "ours"}), out)
    assert (out / "new.txt").read_text() == "the user's" and (out / "Dockerfile").read_text() == "a"
    assert (out / outputdir.MARKER).read_text() == before


def test_a_user_symlink_where_a_rendered_directory_goes_is_refused(tmp_path):
    out = tmp_path / "out"
    buildcontext.write(ctx(Dockerfile="a"), out)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, out / "sub")
    with pytest.raises(UserError, match="is in the way"):
        buildcontext.write(ctx(Dockerfile="a", sub__f="x"), out)
    assert list(elsewhere.iterdir()) == []


def test_a_marker_without_a_file_list_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / outputdir.MARKER).write_text("21.08 tf2-py3\n")  # what older builders wrote
    (out / "Dockerfile").write_text("old")
    with pytest.raises(UserError, match="older `builder render`"):
        buildcontext.write(ctx(Dockerfile="b"), out)
    assert (out / "Dockerfile").read_text() == "old"


@pytest.mark.parametrize("rel", ["../escape", "/abs", "a/../../b", "a//b"])
def test_paths_outside_the_output_are_refused(tmp_path, rel):
    with pytest.raises(UserError, match="not a plain path inside the output directory"):
        buildcontext.write(Rendered("r", "v", {rel: "x"}), tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "escape").exists()


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_rerender_deletes_nothing_through_a_symlinked_directory(tmp_path, capsys):
    """A rendered directory replaced by a link: its files are not the render's to delete."""
    a = _tree(tmp_path / "A", {"VERSION": "1", "sub/old.txt": "a", "sub/deeper/old2.txt": "b"})
    b = _tree(tmp_path / "B", {"VERSION": "2"})
    victim = _tree(tmp_path / "victim", {"old.txt": "keep", "deeper/old2.txt": "keep too"})
    out = tmp_path / "out"
    buildcontext.write(ctx(Dockerfile="a"), out, a)
    shutil.rmtree(out / "tensorflow-source" / "sub")
    os.symlink(victim, out / "tensorflow-source" / "sub")
    buildcontext.write(ctx(Dockerfile="b"), out, b)
    assert (victim / "old.txt").read_text() == "keep" and (victim / "deeper" / "old2.txt").read_text() == "keep too"
    assert os.readlink(out / "tensorflow-source" / "sub") == str(victim)  # left alone, and said so
    assert f"{out / 'tensorflow-source' / 'sub'} is a symlink" in capsys.readouterr().err
    assert not any(f.startswith("tensorflow-source/sub/") for f in marker(out)["files"])


def test_a_marker_naming_a_file_through_a_symlink_deletes_nothing(tmp_path):
    """The marker is the user's file too: what it names is only trusted inside the directory."""
    elsewhere = _tree(tmp_path / "elsewhere", {"secret.txt": "host file"})
    out = tmp_path / "out"
    buildcontext.write(ctx(Dockerfile="a"), out)
    data = marker(out)
    data["files"] += ["evil/secret.txt", "evil"]
    (out / outputdir.MARKER).write_text(json.dumps(data))
    os.symlink(elsewhere, out / "evil")
    buildcontext.write(ctx(Dockerfile="b"), out)
    assert (elsewhere / "secret.txt").read_text() == "host file"


@pytest.mark.parametrize(
    "rel", ["../outside.txt", "/etc/passwd", "a/\0b", "a/../../b", "./x", "a//b", "", "lone-\ud800"]
)
def test_a_marker_naming_a_path_outside_the_directory_is_refused(tmp_path, rel):
    out = tmp_path / "out"
    buildcontext.write(ctx(Dockerfile="a"), out)
    data = marker(out)
    (out / outputdir.MARKER).write_text(json.dumps({**data, "files": data["files"] + [rel]}))
    (tmp_path / "outside.txt").write_text("keep")
    with pytest.raises(UserError, match=r"marker .* names .*not a plain path inside the directory"):
        buildcontext.write(ctx(Dockerfile="b"), out)
    assert (out / "Dockerfile").read_text() == "a" and (tmp_path / "outside.txt").read_text() == "keep"


def test_a_symlink_in_place_of_the_markers_temporary_file_is_not_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("host file")
    out = tmp_path / "out"
    buildcontext.write(ctx(Dockerfile="a"), out)
    os.symlink(victim, out / f"{outputdir.MARKER}.tmp")
    buildcontext.write(ctx(Dockerfile="b"), out)
    assert victim.read_text() == "host file" and (out / "Dockerfile").read_text() == "b"
    assert marker(out)["files"]


def test_a_failed_staging_leaves_the_previous_context_and_no_staging(tmp_path, monkeypatch):
    out = tmp_path / "out"
    buildcontext.write(ctx(Dockerfile="a"), out)
    monkeypatch.setattr(
        buildcontext.shutil, "copytree", lambda *a, **k: (_ for _ in ()).throw(OSError(28, "No space left on device"))
    )
    with pytest.raises(UserError, match="cannot write the build context to .*: No space left on device"):
        buildcontext.write(ctx(Dockerfile="b"), out)
    assert (out / "Dockerfile").read_text() == "a"
    assert not [p for p in out.iterdir() if p.name.startswith(outputdir.STAGING_PREFIX)]


def test_an_unwritable_output_is_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "file").write_text("not a directory")
    code = cli.main(["render", "-r", "21.08", "-v", "tf2-py3", "-o", str(tmp_path / "file" / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: cannot write to output ")
    assert "internal error" not in err[0]
    code = cli.main(["render", "-r", "21.08", "-v", "tf2-py3", "-o", str(tmp_path / "file")])
    assert code == 2 and "exists and is not a directory" in capsys.readouterr().err


def test_concurrent_renders_into_one_directory_take_turns(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as another render holding the directory
    proc = subprocess.Popen(
        [sys.executable, "-m", "builder.cli", "render", "-r", "21.08", "-v", "tf2-py3", "-o", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        time.sleep(5)  # ample time for an unlocked render to write its context
        assert proc.poll() is None and list(out.iterdir()) == [], "wrote while another render held the lock"
    finally:
        os.close(fd)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert f"waiting for another render writing {out}" in stderr
    assert (out / "Dockerfile").is_file()


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A copy of the checkout's templates and dockerfiles/, used as BUILDER_HOME."""
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT / "templates", copy / "templates")
    shutil.copytree(ROOT / "dockerfiles", copy / "dockerfiles")
    monkeypatch.setenv("BUILDER_HOME", str(copy))
    return copy


@pytest.fixture
def private_catalog(tmp_path, monkeypatch):
    """BUILDER_CATALOG naming a catalog of two of the releases (21.06 and 21.08)."""
    from builder import catalog
    from builder.catalog import lock

    private = tmp_path / "cat"
    private.mkdir()
    for name in ("_common.yaml", "21.06.yaml", "21.08.yaml"):
        shutil.copy(catalog.RELEASES_DIR / name, private / name)
    shutil.copytree(lock.LOCKS_DIR, private / "locks")
    monkeypatch.setenv("BUILDER_CATALOG", str(private))
    return private


def test_render_all_with_a_private_catalog_keeps_other_releases_dockerfiles(checkout, private_catalog, capsys):
    before = {p: p.read_text() for p in checkout.glob("dockerfiles/*/*.Dockerfile")}
    stray = checkout / "dockerfiles" / "21.08" / "tf9-py3.Dockerfile"  # a variant 21.08 no longer has
    stray.write_text("stale")
    assert cli.main(["render", "--all"]) == 0, capsys.readouterr().err
    after = {p: p.read_text() for p in checkout.glob("dockerfiles/*/*.Dockerfile")}
    assert after == before  # nothing of 21.06, 21.10, ... deleted; the stale 21.08 file removed
    assert {"21.10", "22.12"} <= {p.parent.name for p in after}


def test_render_all_check_with_a_private_catalog_ignores_unknown_releases(checkout, private_catalog, capsys):
    assert cli.main(["render", "--all", "--check"]) == 0, capsys.readouterr().err


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

PATH_PARTS = st.sampled_from(["a", "..", ".", "", "/", "b c", "\n", "\0", "x/../..", "ok.txt", "~"])


@settings(max_examples=2000, deadline=None)
@given(st.one_of(st.text(), st.lists(PATH_PARTS, min_size=1, max_size=6).map("/".join)))
def test_a_path_render_accepts_stays_inside_the_output(rel):
    try:
        got = outputdir.safe_relative(rel)
    except UserError:
        return
    assert got == rel
    resolved = os.path.normpath(os.path.join("/out", rel))
    assert resolved.startswith("/out/") and "\0" not in rel
