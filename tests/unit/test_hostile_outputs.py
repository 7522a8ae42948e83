"""Output paths under hostile plants:
`render -o`, `render --all -o` and `bake -o` write only below the directory the user
named, never through a link planted in it or on the way down, never over a file the
builder did not write; an empty -o is refused; a source file vanishing while it is
checked is one line. The user's own -o is trusted as given (it may be a link)."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from builder.cli import main as cli
from builder.core import outputdir
from builder.image import buildcontext


def run(capsys, *args):
    code = cli.main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_error(code, err, text):
    assert code == 2, err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and text in errors[0], err
    assert "Traceback" not in err and "internal error" not in err


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.fixture
def victim(tmp_path):
    d = tmp_path / "victim"
    d.mkdir()
    (d / "precious").write_text("the user's")
    return d


def unharmed(victim: Path) -> bool:
    return tree(victim) == ["precious"] and (victim / "precious").read_text() == "the user's"


def bake(capsys, out, *extra):
    return run(capsys, "bake", "-r", "21.08", "-v", "tf2-py3", "--build-id", "t1", "-o", str(out), *extra)


# --- item 2: bake -o DIR writes nothing through a planted link, nothing over the user's files


def test_bake_refuses_a_link_planted_as_the_bake_file(tmp_path, victim, capsys):
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(victim / "precious", out / "docker-bake.json")
    code, _, err = bake(capsys, out)
    assert_one_error(code, err, f"output {out} is not empty and was not written by `builder render`")
    assert unharmed(victim) and tree(out) == ["docker-bake.json"]


def test_bake_never_overwrites_the_users_bake_file(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "docker-bake.json").write_text("mine")
    code, _, err = bake(capsys, out)
    assert_one_error(code, err, "was not written by `builder render`")
    assert (out / "docker-bake.json").read_text() == "mine" and tree(out) == ["docker-bake.json"]


def test_bake_refuses_a_link_planted_as_the_base_context(tmp_path, victim, capsys):
    out = tmp_path / "out"
    assert bake(capsys, out)[0] == 0
    before = (out / "docker-bake.json").read_text()
    outputdir.remove_tree(out / "base-21.08")
    os.symlink(victim, out / "base-21.08")
    code, _, err = bake(capsys, out)
    assert_one_error(
        code,
        err,
        f"{out / 'base-21.08'} is a symlink; the builder writes below {out} only into "
        "directories, never through a link",
    )
    assert unharmed(victim) and (out / "docker-bake.json").read_text() == before


def test_a_link_swapped_in_for_its_own_bake_file_is_replaced_not_written_through(tmp_path, victim, capsys):
    out = tmp_path / "out"
    assert bake(capsys, out)[0] == 0
    (out / "docker-bake.json").unlink()
    os.symlink(victim / "precious", out / "docker-bake.json")
    code, stdout, err = bake(capsys, out)
    assert code == 0, err
    assert unharmed(victim)
    assert not (out / "docker-bake.json").is_symlink()
    assert json.loads((out / "docker-bake.json").read_text())["group"]["default"]["targets"] == ["21-08-tf2-py3"]


def test_a_rebake_replaces_its_own_files_and_keeps_the_users(tmp_path, capsys):
    out = tmp_path / "out"
    assert bake(capsys, out)[0] == 0
    (out / "notes.txt").write_text("the user's, added later")
    (out / "base-21.08" / "mine").write_text("the user's, in the base context")
    code, stdout, err = bake(capsys, out, "--build-id", "t2")
    assert code == 0, err
    assert stdout.strip() == str(out / "docker-bake.json")
    assert '"BUILD_ID": "t2"' in (out / "docker-bake.json").read_text()
    assert (out / "notes.txt").read_text() == "the user's, added later"
    assert (out / "base-21.08" / "mine").read_text() == "the user's, in the base context"
    assert json.loads((out / outputdir.MARKER).read_text())["files"] == ["docker-bake.json"]


def test_bake_refuses_the_users_files_in_the_base_context(tmp_path, capsys):
    out = tmp_path / "out"
    assert bake(capsys, out)[0] == 0
    outputdir.remove_tree(out / "base-21.08")
    (out / "base-21.08").mkdir()
    (out / "base-21.08" / "Dockerfile").write_text("the user's")
    code, _, err = bake(capsys, out)
    assert_one_error(code, err, f"output {out / 'base-21.08'} is not empty and was not written")
    assert (out / "base-21.08" / "Dockerfile").read_text() == "the user's"


# --- item 3: no link followed on the way from DIR down to a context


def test_render_all_refuses_a_link_planted_at_a_release_directory_before_any_write(tmp_path, victim, capsys):
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(victim, out / "21.08")
    code, _, err = run(capsys, "render", "--all", "-o", str(out))
    assert_one_error(
        code,
        err,
        f"{out / '21.08'} is a symlink; the builder writes below {out} only into directories, never through a link",
    )
    assert unharmed(victim) and tree(out) == ["21.08"]  # 21.06 (before it) not written either


def test_render_all_refuses_a_link_planted_at_a_variant_directory(tmp_path, victim, capsys):
    out = tmp_path / "out"
    (out / "21.08").mkdir(parents=True)
    os.symlink(victim, out / "21.08" / "tf2-py3")
    code, _, err = run(capsys, "render", "--all", "-o", str(out))
    assert_one_error(code, err, f"{out / '21.08' / 'tf2-py3'} is a symlink")
    assert unharmed(victim)


def test_render_all_refuses_a_file_in_place_of_a_release_directory(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "21.08").write_text("the user's")
    code, _, err = run(capsys, "render", "--all", "-o", str(out))
    assert_one_error(code, err, f"output {out / '21.08'} exists and is not a directory")
    assert (out / "21.08").read_text() == "the user's" and tree(out) == ["21.08"]  # refused before any write


def test_bake_refuses_a_link_planted_at_the_release_directory(tmp_path, victim, capsys):
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(victim, out / "21.08")
    code, _, err = bake(capsys, out)
    assert_one_error(code, err, f"output {out} is not empty and was not written")  # not a bake's DIR
    assert unharmed(victim) and tree(out) == ["21.08"]


def test_bake_refuses_a_link_planted_in_a_previous_bakes_release_directory(tmp_path, victim, capsys):
    out = tmp_path / "out"
    assert bake(capsys, out)[0] == 0
    outputdir.remove_tree(out / "21.08" / "tf2-py3")
    os.symlink(victim, out / "21.08" / "tf2-py3")
    code, _, err = bake(capsys, out)
    assert_one_error(code, err, f"{out / '21.08' / 'tf2-py3'} is a symlink")
    assert unharmed(victim)


def test_the_users_own_output_may_be_a_link(tmp_path, capsys):
    """-o names what the user chose: a link there is followed; only what the builder adds below is not."""
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "link")
    code, _, err = run(capsys, "render", "--all", "-o", str(tmp_path / "link"))
    assert code == 0, err
    assert (real / "21.08" / "tf2-py3" / "Dockerfile").is_file()
    (tmp_path / "real-bake").mkdir()
    os.symlink(tmp_path / "real-bake", tmp_path / "bake-link")
    code, _, err = bake(capsys, tmp_path / "bake-link")
    assert code == 0, err
    assert (tmp_path / "real-bake" / "docker-bake.json").is_file()
    assert (tmp_path / "real-bake" / "base-21.08" / "Dockerfile").is_file()


def test_a_link_swapped_in_on_the_way_after_the_walk_is_not_followed(tmp_path, victim):
    """The directory is written through the descriptor the walk opened, not the path again."""
    root = tmp_path / "out"
    with outputdir.locked(root / "a" / "b", root) as at:
        os.rename(root / "a", root / "a-moved")
        os.symlink(victim, root / "a")
        (at / "f").write_text("ours")
    assert unharmed(victim)
    assert (root / "a-moved" / "b" / "f").read_text() == "ours"


def test_directories_the_walk_made_go_again_when_nothing_was_written(tmp_path):
    root = tmp_path / "out"
    with outputdir.locked(root / "a" / "b", root):
        assert (root / "a" / "b").is_dir()
    assert not root.exists()


def test_a_name_climbing_out_of_the_output_is_refused(tmp_path):
    """A release or variant name from a private catalog never climbs out of DIR."""
    with pytest.raises(outputdir.UserError, match="not a plain path inside the output directory"):
        with outputdir.locked(tmp_path / "out" / ".." / "x", tmp_path / "out"):
            pass
    assert not (tmp_path / "x").exists()


# --- item 16: an empty output path


def test_the_output_parser_refuses_an_empty_path():
    with pytest.raises(outputdir.UserError, match="the output path is empty"):
        outputdir.output_path("")
    assert outputdir.output_path("d") == Path("d")


@pytest.mark.parametrize(
    "args",
    [
        ["render", "-r", "21.08", "-v", "tf2-py3", "-o", ""],
        ["render", "--all", "-o", ""],
        ["bake", "-r", "21.08", "-o", ""],
        ["render", "-r", "21.08", "-v", "tf2-py3", "--output="],
    ],
)
def test_an_empty_output_path_is_refused_in_one_line(tmp_path, args):
    result = subprocess.run(["builder", *args], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "output path is empty" in lines[0], result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written into the current directory


# --- item 17 (third part): a source file vanishing while it is checked


def test_a_source_file_vanishing_during_the_check_is_one_line(tmp_path, monkeypatch, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "kept.py").write_text("x = 1\n")
    real_walk = os.walk

    def walk_seeing_a_file_that_then_vanishes(top, *args, **kwargs):
        for dirpath, dirnames, filenames in real_walk(top, *args, **kwargs):
            yield dirpath, dirnames, filenames + (["gone.py"] if dirpath == str(src) else [])

    monkeypatch.setattr(buildcontext.os, "walk", walk_seeing_a_file_that_then_vanishes)
    code, _, err = run(
        capsys, "render", "-r", "21.08", "-v", "tf2-py3", "--framework-src", str(src), "-o", str(tmp_path / "out")
    )
    assert_one_error(code, err, f"{src / 'gone.py'} vanished while the framework source was read")
    assert not (tmp_path / "out").exists()


def test_a_newline_in_the_output_path_stays_on_its_line(tmp_path, capsys):
    """What `render -o` says it wrote is one line per context, whatever the path holds."""
    from builder.cli import main as cli

    out = tmp_path / "a\nb"
    code = cli.main(["render", "--release", "21.08", "--variant", "tf2-py3", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0 and (out / "Dockerfile").is_file()
    assert [line for line in err.splitlines() if line.startswith("wrote ")] == [
        f"wrote {str(tmp_path)}/a\\nb/Dockerfile (local/tensorflow:21.08-tf2-py3)"
    ], err
