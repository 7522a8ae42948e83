"""Host files never reach a build context: a framework source tree with a symlink that
leaves it, or with a special file, is refused before anything is written or built."""
import os
from pathlib import Path

import pytest

from builder import buildcontext, cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def src(tmp_path):
    """A copy of the shipped framework source, to plant links in."""
    import shutil

    d = tmp_path / "work" / "src"
    shutil.copytree(ROOT / "framework-src", d, ignore=buildcontext.IGNORED, symlinks=True)
    return d


def render_into(tmp_path, src, capsys):
    out = tmp_path / "out"
    code = cli.main(["render", "-r", "21.08", "-v", "tf2-py3", "--framework-src", str(src), "-o", str(out)])
    err = capsys.readouterr().err
    return code, err, out


@pytest.mark.parametrize("target", ["/etc/shadow", "/", "../../outside", "../..", "sub/../../../etc/passwd"])
def test_a_symlink_leaving_the_tree_is_refused_before_anything_is_written(tmp_path, src, capsys, target):
    (tmp_path / "work" / "outside").write_text("host secret")
    link = src / "python" / "leak"
    os.symlink(target, link)
    code, err, out = render_into(tmp_path, src, capsys)
    assert code == 2
    assert err.strip() == f"error: {link} is a symlink leaving the source tree (-> {target})"
    assert not out.exists()


def test_an_absolute_link_is_refused_even_when_it_points_into_the_tree(tmp_path, src, capsys):
    os.symlink(src / "python", src / "abs")  # means another place inside the image
    code, err, _ = render_into(tmp_path, src, capsys)
    assert code == 2 and "is a symlink leaving the source tree" in err


def test_a_link_escaping_through_another_link_is_refused(tmp_path, src, capsys):
    """Lexically 'here/../x' stays inside; really `here` is the tree root, so it leaves."""
    os.symlink(".", src / "here")
    os.symlink("here/../../outside", src / "sneaky")
    (tmp_path / "work" / "outside").write_text("host secret")
    code, err, _ = render_into(tmp_path, src, capsys)
    assert code == 2 and f"{src / 'sneaky'} is a symlink leaving the source tree" in err


def test_links_inside_the_tree_are_kept_as_links(tmp_path, src, capsys):
    os.symlink("python", src / "pylink")
    os.symlink("../configure", src / "python" / "cfg")
    code, err, out = render_into(tmp_path, src, capsys)
    assert code == 0, err
    copied = out / "tensorflow-source"
    assert os.readlink(copied / "pylink") == "python" and os.readlink(copied / "python" / "cfg") == "../configure"


def test_a_fifo_is_refused(tmp_path, src, capsys):
    os.mkfifo(src / "pipe")
    code, err, out = render_into(tmp_path, src, capsys)
    assert code == 2 and f"error: {src / 'pipe'} is a special file" in err and not out.exists()


def test_ignored_build_products_are_not_checked(tmp_path, src):
    """What the copy leaves out (build/, .git, ...) cannot leak, so it is not refused."""
    (src / "build").mkdir()
    os.symlink("/etc/shadow", src / "build" / "leak")
    buildcontext.check_tree(src)


def test_build_refuses_the_tree_before_touching_the_engine(tmp_path, src, capsys, monkeypatch):
    os.symlink("/etc/shadow", src / "leak")
    monkeypatch.setattr(cli, "_engine", lambda: pytest.fail("the engine was reached"))
    code = cli.main(["build", "-r", "21.08", "--framework-src", str(src)])
    assert code == 2 and "is a symlink leaving the source tree (-> /etc/shadow)" in capsys.readouterr().err
