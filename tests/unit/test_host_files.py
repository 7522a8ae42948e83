"""Host files never reach a build context: a framework source tree with a symlink that
leaves it, or with a special file, is refused before anything is written or built."""

import os
from pathlib import Path

import pytest

from builder.cli import main as cli
from builder.image import buildcontext

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


def render_to_stdout(src, capsys):
    code = cli.main(["render", "-r", "21.08", "-v", "tf2-py3", "--framework-src", str(src)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _missing(tmp_path, src):
    return tmp_path / "nowhere"


def _regular_file(tmp_path, src):
    (tmp_path / "file").write_text("not a tree")
    return tmp_path / "file"


def _fifo(tmp_path, src):
    os.mkfifo(src / "pipe")
    return src


def _shadow_link(tmp_path, src):
    os.symlink("/etc/shadow", src / "python" / "leak")
    return src


@pytest.mark.parametrize("make", [_missing, _regular_file, _fifo, _shadow_link])
def test_render_without_output_checks_the_source_as_with_output(tmp_path, src, capsys, make):
    """Without -o nothing is copied, yet the same source is refused the same way: the
    Dockerfile printed must be one that `render -o` and `build` would accept."""
    bad = make(tmp_path, src)
    code, out, err = render_to_stdout(bad, capsys)
    code_o, err_o, _ = render_into(tmp_path, bad, capsys)
    assert code_o == 2 and len(err_o.strip().splitlines()) == 1
    assert (code, out, err) == (2, "", err_o)


def test_a_hard_link_to_a_file_outside_the_tree_is_refused(tmp_path, src, capsys):
    """A hard link is a second name of the outside file: copying it copies the host file."""
    outside = tmp_path / "work" / "outside"
    outside.write_text("host secret")
    os.link(outside, src / "python" / "leak")
    code, err, out = render_into(tmp_path, src, capsys)
    assert code == 2 and not out.exists()
    assert err.strip() == (
        f"error: {src / 'python' / 'leak'} is a hard link to a file outside the source tree "
        "(2 links, 1 in the tree); put a copy in its place if it belongs there"
    )


def test_hard_links_within_the_tree_are_copied(tmp_path, src, capsys):
    os.link(src / "configure", src / "python" / "configure-again")
    code, err, out = render_into(tmp_path, src, capsys)
    assert code == 0, err
    assert (out / "tensorflow-source" / "python" / "configure-again").read_bytes() == (src / "configure").read_bytes()


def test_huge_and_sparse_files_are_named_with_their_size_before_copying(tmp_path, src, capsys):
    """Sparse files take no disk here (truncate); a copy would write every byte of them."""
    with open(src / "huge.bin", "wb") as f:
        f.truncate(2 << 30)
    with open(src / "python" / "holes.bin", "wb") as f:
        f.truncate(100 << 20)
    code, out, err = render_to_stdout(src, capsys)
    assert code == 0 and "FROM" in out, err
    lines = err.strip().splitlines()
    assert (
        f"warning: {src / 'huge.bin'} is 2.0 GiB (sparse: 0 B on disk); it is copied into the build context "
        "in full" in lines
    ), lines
    assert (
        f"warning: {src / 'python' / 'holes.bin'} is 100.0 MiB (sparse: 0 B on disk); it is copied into the "
        "build context in full" in lines
    ), lines
    assert len(lines) == 2, lines


def test_check_tree_warns_of_a_sparse_file_only_once(tmp_path, src, capsys):
    """`build` checks the tree before the engine and again when it writes the context."""
    with open(src / "holes.bin", "wb") as f:
        f.truncate(64 << 20)
    buildcontext.check_tree(src)
    buildcontext.check_tree(src)
    assert capsys.readouterr().err == (
        f"warning: {src / 'holes.bin'} is 64.0 MiB (sparse: 0 B on disk); it is copied into the build context in full\n"
    )
