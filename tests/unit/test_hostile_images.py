"""Hostile images and the machine's
leftovers. The in-image ELF scanner reads no more than the file holds and a sane cap
(a sparse 1 GiB lib*.so, measured in a subprocess), and never blocks on a fifo; an empty
image reference or an image with the builder's labels but no python3 is one line, exit 2;
the offline base's work tree is removed without following a link or entering a mount,
what stays is one line; --platform answers with what the release serves; the BuildKit
probe leaves no image in the user's store."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from builder import catalog
from builder.catalog import policy
from builder.cli import main as cli
from builder.core.errors import UserError
from builder.engine import buildkit_probe
from builder.image import describe, readback
from builder.in_image.fatbin import device_code
from builder.run import base

ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30


# --- item 8: reads sized by header fields --------------------------------------------------
def sparse_elf(path: Path, shoff: int, shentsize: int, shnum: int, shstrndx: int, tables: dict[int, bytes]) -> Path:
    """A 1 GiB sparse file named like a library: an ELF64 header and TABLES (offset -> bytes);
    the rest is a hole (no disk, all zeros when read)."""
    head = bytearray(64)
    head[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", head, 0x28, shoff)
    struct.pack_into("<HHH", head, 0x3A, shentsize, shnum, shstrndx)
    with open(path, "wb") as f:
        f.truncate(GIB)
        f.write(head)
        for offset, blob in tables.items():
            f.seek(offset)
            f.write(blob)
    return path


def section(name: int, offset: int, size: int) -> bytes:
    return struct.pack("<IIQQQQIIQQ", name, 1, 0, 0, offset, size, 0, 0, 1, 64)


SCAN = (
    "import json, resource, sys\n"
    "from builder.in_image.fatbin import device_code\n"
    "found = device_code(sys.argv[1])\n"
    "print(json.dumps({'found': found, 'peak_kb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))\n"
)


def scan_in_subprocess(path: Path) -> tuple[dict | None, float]:
    """device_code(PATH) in a fresh interpreter of this checkout: (its answer, its peak RSS in MB)."""
    out = subprocess.run(
        [sys.executable, "-c", SCAN, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    return answer["found"], answer["peak_kb"] / 1024


def test_a_section_table_claiming_a_gigabyte_is_one_files_error_in_bounded_memory(tmp_path):
    # 65279 entries of 65535 bytes at offset 64: the old scanner read min(4 GiB, the file) at once
    lib = sparse_elf(tmp_path / "libfoo.so", 64, 0xFFFF, 0xFEFF, 1, {})
    found, peak_mb = scan_in_subprocess(lib)
    assert peak_mb < 200, f"peak RSS {peak_mb:.0f} MB"
    assert found is not None and "section header table" in found["error"] and found["sass"] == []


def test_a_section_name_table_of_a_gigabyte_inside_the_file_is_refused_in_bounded_memory(tmp_path):
    # two sane section headers at the end of the file; the names (section 1) claim ~1 GiB, all inside it
    shoff = GIB - 4096
    table = section(0, 0, 0) + section(0, 4096, GIB - 8192)
    lib = sparse_elf(tmp_path / "libfoo.so", shoff, 64, 2, 1, {shoff: table})
    found, peak_mb = scan_in_subprocess(lib)
    assert peak_mb < 200, f"peak RSS {peak_mb:.0f} MB"
    assert found is not None and "section name table" in found["error"]


def test_a_fatbin_section_past_the_end_of_the_file_is_that_files_error(tmp_path):
    names = b"\0.nv_fatbin\0.shstrtab\0"
    shoff = 64 + 64
    table = section(0, 0, 0) + section(1, 4096, 1 << 40) + section(12, 64, len(names))
    head = bytearray(64)
    head[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", head, 0x28, shoff)
    struct.pack_into("<HHH", head, 0x3A, 64, 3, 2)
    lib = tmp_path / "libbar.so"
    lib.write_bytes(bytes(head) + names.ljust(64, b"\0") + table)
    found = device_code(str(lib))
    assert found is not None and ".nv_fatbin section" in found["error"] and found["sass"] == found["ptx"] == []


# --- item 17 (last part): a fifo named like a library -----------------------------------------
def test_a_fifo_named_like_a_library_is_no_binary_and_never_blocks(tmp_path):
    fifo = tmp_path / "libfifo.so"
    os.mkfifo(fifo)
    answer: list = []
    reader = threading.Thread(target=lambda: answer.append(device_code(str(fifo))), daemon=True)
    reader.start()
    reader.join(5)
    blocked = reader.is_alive()
    if blocked:  # the old scanner waits for a writer: be one, so the thread ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(5)
    assert not blocked, "device_code blocked opening a fifo"
    assert answer == [None]


# --- item 11: references checked before docker-py; an image with no python3 -------------------
class NoDockerAPI:
    def __getattr__(self, name):
        raise AssertionError(f"docker-py was reached: api.{name}")


@pytest.mark.parametrize("command", ["inspect", "test"])
@pytest.mark.parametrize("ref", ["", "UPPER:tag", "a b", "x\x1b[31m"])
def test_an_invalid_image_reference_is_one_line_before_docker_py(monkeypatch, capsys, command, ref):
    from builder.engine import DockerEngine

    engine = DockerEngine.__new__(DockerEngine)
    engine.api = NoDockerAPI()
    monkeypatch.setattr(cli, "_engine", lambda: engine)
    code = cli.main([command, ref])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: image "), err
    assert "\x1b" not in err[0]


RUNC_NO_PYTHON = (
    "failed to create task for container: failed to create shim task: OCI runtime create failed: "
    'runc create failed: unable to start container process: exec: "python3": executable file '
    "not found in $PATH: unknown"
)


class StartRefused:
    """docker-py's low-level client where the container is created but will not start."""

    def __init__(self, explanation: str):
        self.explanation, self.removed = explanation, []

    def create_host_config(self, **kw):
        return {}

    def create_container(self, image, **kw):
        return {"Id": "c0ffee"}

    def start(self, cid):
        import docker
        import requests

        response = requests.Response()
        response.status_code = 400
        raise docker.errors.APIError("400 Client Error: Bad Request", response=response, explanation=self.explanation)

    def remove_container(self, cid, force=False):
        self.removed.append(cid)


def engine_refusing_to_start(explanation: str = RUNC_NO_PYTHON):
    from builder.engine import DockerEngine

    engine = DockerEngine.__new__(DockerEngine)
    engine.api = StartRefused(explanation)
    engine.image_labels = lambda ref: {"dev.tfbuilder.release": "21.08"}
    engine.inspect = lambda ref: {"Id": "sha256:" + "0" * 64, "Config": {"Labels": engine.image_labels(ref)}}
    return engine


def test_a_program_the_image_lacks_is_one_user_error_for_every_caller_and_no_container_is_left():
    from builder.engine import CannotStart

    engine = engine_refusing_to_start()
    with pytest.raises(CannotStart) as caught:
        engine.run_capture("local/nopython:t", ["bash", "-c", "true"])
    assert isinstance(caught.value, UserError) and "\n" not in str(caught.value)
    assert engine.api.removed == ["c0ffee"]


def test_inspect_of_a_labelled_image_without_python3_is_one_line():
    with pytest.raises(UserError) as caught:
        describe.describe(engine_refusing_to_start(), "local/nopython:t")
    text = str(caught.value)
    assert "\n" not in text and text.startswith("local/nopython:t: the image cannot be read back") and "python3" in text


def test_any_refusal_to_start_the_report_is_one_line_ending_with_the_cause():
    engine = engine_refusing_to_start("no such image layer\nsecond line " + "x" * 500)
    with pytest.raises(UserError) as caught:
        readback.read_report(engine, "local/odd:t")
    text = str(caught.value)
    assert "\n" not in text and "cannot be read back" in text and len(text) < 300


# --- item 18: the offline base's work tree --------------------------------------------------------
def fake_recipe() -> SimpleNamespace:
    return SimpleNamespace(tag="local/cuda-base:t", rootfs_image="local/debian-rootfs:t", job=lambda: object())


class NoImages:
    def image_id(self, ref):
        return None


SETTINGS = SimpleNamespace(validate=lambda: None, apt_mirror=None)


def can_mount() -> bool:
    probe = Path(tempfile.mkdtemp())
    try:
        if (
            os.geteuid() != 0
            or subprocess.run(["mount", "-t", "tmpfs", "tfbuilder-test", str(probe)], capture_output=True).returncode
            != 0
        ):
            return False
        subprocess.run(["umount", str(probe)], check=True)
        return True
    except OSError:
        return False
    finally:
        probe.rmdir()


def plant(workdir: Path, outside: Path) -> None:
    """A rootfs as debootstrap leaves it, plus links out of it: to a directory and a file."""
    (workdir / "rootfs/usr/lib").mkdir(parents=True)
    (workdir / "rootfs/usr/lib/libc.so.6").write_bytes(b"x")
    (workdir / "rootfs/etc").symlink_to(outside)
    (workdir / "rootfs/usr/lib/passwd").symlink_to(outside / "keep.txt")


@pytest.fixture
def outside(tmp_path):
    d = tmp_path / "outside"
    (d / "deep").mkdir(parents=True)
    (d / "keep.txt").write_text("the user's\n")
    (d / "deep/also.txt").write_text("the user's too\n")
    return d


@pytest.fixture
def work_root(tmp_path, monkeypatch):
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def run_ensure_base(monkeypatch, make) -> None:
    monkeypatch.setattr(base, "make_rootfs", make)
    monkeypatch.setattr(base.image, "produce", lambda *a, **k: None)
    base.ensure_base(NoImages(), fake_recipe(), SETTINGS)


def intact(outside: Path) -> bool:
    return (outside / "keep.txt").read_text() == "the user's\n" and (outside / "deep/also.txt").is_file()


@pytest.mark.skipif(not can_mount(), reason="needs root and `mount -t tmpfs`")
def test_a_failed_debootstrap_with_proc_still_mounted_is_unmounted_and_removed(monkeypatch, work_root, outside):
    mounted = []

    def debootstrap_fails(engine, recipe, mirror, workdir):
        plant(workdir, outside)
        proc = workdir / "rootfs/proc"
        proc.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "tfbuilder-test", str(proc)], check=True)
        mounted.append(str(proc))
        (proc / "self").symlink_to(outside)  # a reader inside, a link out of the mount
        raise UserError("debootstrap trixie failed (exit 1): E: boom")

    try:
        with pytest.raises(UserError, match="debootstrap trixie failed"):  # its error, not the cleanup's
            run_ensure_base(monkeypatch, debootstrap_fails)
        assert list(work_root.iterdir()) == [] and intact(outside)
        assert not base.mounts_under(work_root)
    finally:
        for point in mounted:
            subprocess.run(["umount", "-l", point], capture_output=True)


def test_links_in_the_work_tree_are_removed_never_followed(monkeypatch, work_root, outside, capsys):
    run_ensure_base(monkeypatch, lambda engine, recipe, mirror, workdir: plant(workdir, outside))
    assert list(work_root.iterdir()) == [] and intact(outside)
    assert capsys.readouterr().err == "base: tagged local/cuda-base:t\n"


def test_a_file_that_cannot_be_removed_is_one_line_naming_it(monkeypatch, work_root, outside, capsys):
    real_unlink = os.unlink

    def unlink(path, *a, dir_fd=None, **k):
        if os.path.basename(path) == "libc.so.6":
            raise PermissionError(1, "Operation not permitted")
        return real_unlink(path, *a, dir_fd=dir_fd, **k)

    monkeypatch.setattr(os, "unlink", unlink)
    run_ensure_base(monkeypatch, lambda engine, recipe, mirror, workdir: plant(workdir, outside))
    monkeypatch.setattr(os, "unlink", real_unlink)
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("base: tagged")]
    assert (
        len(err) == 1
        and "could not remove" in err[0]
        and err[0].endswith("/rootfs/usr/lib/libc.so.6 (Operation not permitted)")
    ), err
    assert intact(outside) and not (work_root.iterdir().__next__() / "rootfs/etc").exists()


def test_mounts_are_found_deepest_first_and_a_busy_one_is_unmounted_lazily(monkeypatch, tmp_path):
    top = tmp_path / "builder-base-x"
    (top / "rootfs").mkdir(parents=True)
    info = tmp_path / "mountinfo"
    info.write_text(
        f"22 1 0:20 / / rw - ext4 /dev/vda rw\n"
        f"40 22 0:5 / {top}/rootfs/proc rw - proc proc rw\n"
        f"41 40 0:6 / {top}/rootfs/proc/sys/fs/binfmt_misc rw - binfmt_misc b rw\n"
        f"42 22 0:7 / {top}/rootfs/dev/my\\040pts rw - devpts devpts rw\n"
        f"43 22 0:8 / {top}-other/x rw - tmpfs t rw\n"
    )
    found = base.mounts_under(top, str(info))
    assert found == [f"{top}/rootfs/proc/sys/fs/binfmt_misc", f"{top}/rootfs/dev/my pts", f"{top}/rootfs/proc"]

    table = list(found)
    calls = []

    def umount(command, **kw):
        calls.append(command)
        lazy = command[1] == "-l"
        if lazy or command[-1] != f"{top}/rootfs/proc":  # proc is busy: only a lazy umount takes it
            table.remove(command[-1])
        return SimpleNamespace(returncode=0 if lazy or command[-1] != f"{top}/rootfs/proc" else 32)

    monkeypatch.setattr(base, "mounts_under", lambda root: list(table))
    monkeypatch.setattr(base.subprocess, "run", umount)
    assert base.unmount_under(top) == []
    assert calls == [["umount", found[0]], ["umount", found[1]], ["umount", found[2]], ["umount", "-l", found[2]]]


def test_a_mount_that_will_not_come_off_leaves_the_tree_and_says_so(monkeypatch, tmp_path, outside):
    top = tmp_path / "builder-base-y"
    plant(top, outside)
    monkeypatch.setattr(base, "mounts_under", lambda root: [f"{top}/rootfs/proc"])
    monkeypatch.setattr(base.subprocess, "run", lambda *a, **k: SimpleNamespace(returncode=32))
    left = base.remove_work_tree(top)
    assert left == f"{top}/rootfs/proc is still mounted: nothing under {top} was removed"
    assert (top / "rootfs/usr/lib/libc.so.6").is_file() and intact(outside)


# --- item 19: --platform answers with what this release serves -----------------------------------
def test_an_unknown_platform_lists_what_this_release_serves():
    for release in catalog.load().releases.values():
        why = policy.why_not_platform(release, "linux/s390x", False)
        served = [p for p, no in policy.platforms_served(release).items() if no is None]
        assert f"release {release.name} serves {', '.join(served)} only" in why, why
        assert "linux/arm64" not in served and "serves linux/amd64, linux/arm64" not in why
        assert "CPU-only" in policy.why_not_platform(release, "linux/arm64", False)


def test_the_guide_says_a_token_registry_mount_is_tried_and_an_upload_follows_a_refusal():
    guide = (ROOT / "docs/guide/private-registries.md").read_text(encoding="utf-8")
    text = " ".join(guide.split())
    assert "token-auth registries decline them" not in text
    assert "A token registry mounts the layer when those credentials may pull from there" in text
    assert "leaves that layer to the push, which uploads it" in text


# --- item 20: the BuildKit probe leaves no image in the user's store ------------------------------
def test_the_probe_writes_only_to_its_directory_and_removes_exactly_the_images_it_made(monkeypatch):
    calls: list[list[str]] = []

    def run(argv, **kw):
        calls.append(list(argv))
        stdout = "sha256:aaa\nsha256:bbb\n" if argv[1:3] == ["image", "ls"] else ""
        return SimpleNamespace(returncode=0, stdout=stdout, stderr="")

    monkeypatch.setattr(buildkit_probe.subprocess, "run", run)
    features = buildkit_probe.probe()
    assert len(features) == 4
    builds = [c for c in calls if c[1] == "buildx"]
    assert len(builds) == 4
    for argv in builds:
        assert "--load" not in argv and "--push" not in argv and not any("type=docker" in a for a in argv)
    for argv in builds[:3]:
        output = argv[argv.index("--output") + 1]
        assert output.split(",")[0] in ("type=tar", "type=oci", "type=local") and "dest=/" in output
    listing = next(c for c in calls if c[1:3] == ["image", "ls"])
    label = listing[listing.index("--filter") + 1]
    run_id = label.split("=", 2)[2]
    assert label.startswith("label=dev.tfbuilder.probe=") and len(run_id) == 16  # this run's, no other image's
    assert calls[-1] == ["docker", "image", "rm", "sha256:aaa", "sha256:bbb"]


def test_the_probe_cleans_up_even_when_a_probe_build_raises(monkeypatch):
    calls: list[list[str]] = []

    def run(argv, **kw):
        calls.append(list(argv))
        if argv[1] == "buildx":
            raise KeyboardInterrupt
        return SimpleNamespace(returncode=0, stdout="sha256:ccc\n" if argv[1:3] == ["image", "ls"] else "", stderr="")

    monkeypatch.setattr(buildkit_probe.subprocess, "run", run)
    with pytest.raises(KeyboardInterrupt):
        buildkit_probe.probe()
    assert calls[-1] == ["docker", "image", "rm", "sha256:ccc"]
