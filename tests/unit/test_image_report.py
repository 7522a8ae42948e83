"""fatbin.py's reading of device code, without cuobjdump: the ELF section table, the
fatbin containers of .nv_fatbin (golden bytes from a real image, and synthetic ones), the
files it finds and the components it sorts them into. The cross-check against cuobjdump on
a real image is tests/integration/test_coverage.py."""

import fnmatch
import os
import struct

import pytest

from builder.image import readback
from builder.in_image import fatbin, libraries
from builder.in_image.fatbin import FatbinError, coverage_table, device_code, fatbin_entries

MAGIC = 0xBA55ED50


# --- synthetic bytes ---------------------------------------------------------------------------
def entry(kind: int, arch: int, payload: bytes = b"", flags: int = 0x11, header: int = 64) -> bytes:
    """One fatbin entry: its header (HEADER bytes, the fields past 64 zero) and its payload."""
    fields = struct.pack("<HHIQIIHHIIIQQQ", kind, 0x0101, header, len(payload), 0, 0, 0, 7, arch, 0, 0, flags, 0, 0)
    return fields + b"\0" * (header - 64) + payload


def container(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", MAGIC, 1, 16, len(body)) + body


def elf(sections: dict[str, bytes]) -> bytes:
    """A minimal ELF64 little-endian file with SECTIONS (and .shstrtab), no program headers."""
    names = [""] + list(sections) + [".shstrtab"]
    strtab = b"\0".join(n.encode() for n in names) + b"\0"
    blobs = [b""] + list(sections.values()) + [strtab]
    data, offsets = b"", []
    for blob in blobs:
        offsets.append(64 + len(data))
        data += blob + b"\0" * (-len(blob) % 8)
    shoff = 64 + len(data)
    ident = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(names), len(names) - 1)
    table = b""
    for i, (name, blob) in enumerate(zip(names, blobs)):
        name_at = strtab.index(name.encode() + b"\0") if name else 0
        table += struct.pack("<IIQQQQIIQQ", name_at, 1 if i else 0, 0, 0, offsets[i] if i else 0, len(blob), 0, 0, 1, 0)
    return header + data + table


def dynamic(soname: str) -> dict[str, bytes]:
    return {".dynstr": b"\0" + soname.encode() + b"\0", ".dynamic": struct.pack("<qQqQ", 14, 1, 0, 0)}


def reader(blob: bytes):
    return lambda n, offset: blob[offset : offset + n]


# --- the fatbin format --------------------------------------------------------------------------
# The .nv_fatbin of Horovod's mpi_lib in the 21.08 image (compiled for 5.2-8.6 by nvbuild.sh):
# its container header and entry headers as they are; the payloads are left zero here.
GOLDEN_CONTAINER = "50ed55ba0100100000d1020000000000"
GOLDEN_ENTRIES = [
    "0200010140000000c85a000000000000000000000000000007000100340000000000000000000000110000000000000000000000"
    "000000000000000000000000",
    "0200010140000000e85b0000000000000000000000000000070001003c0000000000000000000000110000000000000000000000"
    "000000000000000000000000",
    "0200010140000000e85b0000000000000000000000000000070001003d0000000000000000000000110000000000000000000000"
    "000000000000000000000000",
    "02000101400000006868000000000000000000000000000007000100460000000000000000000000110000000000000000000000"
    "000000000000000000000000",
    "020001014000000068690000000000000000000000000000070001004b0000000000000000000000110000000000000000000000"
    "000000000000000000000000",
    "0200010140000000e86d000000000000000000000000000007000100500000000000000000000000110000000000000000000000"
    "000000000000000000000000",
    # PTX (compute_86), compressed: a 72-byte header
    "0100010148000000c00e000000000000bd0e00004000000002000700560000000000000000000000112000000000000000000000"
    "0000000003430000000000000000000000000000",
    "0200010140000000e86d000000000000000000000000000007000100560000000000000000000000110000000000000000000000"
    "000000000000000000000000",
]
# (kind, arch, flags, payload offset, payload size) as cuobjdump --list-elf/--list-ptx saw them there
GOLDEN = [
    (2, 52, 0x11, 80, 23240),
    (2, 60, 0x11, 23384, 23528),
    (2, 61, 0x11, 46976, 23528),
    (2, 70, 0x11, 70568, 26728),
    (2, 75, 0x11, 97360, 26984),
    (2, 80, 0x11, 124408, 28136),
    (1, 86, 0x2011, 152616, 3776),
    (2, 86, 0x11, 156456, 28136),
]


def golden_section() -> bytes:
    blob = bytes.fromhex(GOLDEN_CONTAINER)
    for header, (_, _, _, _, size) in zip(GOLDEN_ENTRIES, GOLDEN):
        blob += bytes.fromhex(header) + b"\0" * size
    return blob


def test_the_golden_fatbin_reads_as_cuobjdump_listed_it():
    section = golden_section()
    assert len(section) == 184592  # the section's size in the image
    got = [
        (kind, arch, flags, at, size)
        for _, kind, arch, flags, at, size in fatbin_entries(reader(section), 0, len(section))
    ]
    assert got == GOLDEN


def test_containers_padding_and_longer_headers():
    first = container(entry(2, 70, b"A" * 24), entry(1, 70, b"ptx\0" * 2, flags=0x2011, header=72))
    second = container(entry(2, 120, b"B" * 8, header=112), entry(1, 120, b"C" * 16, header=80))
    section = b"\0" * 8 + first + b"\0" * 24 + second  # zeros before and between containers
    got = [
        (c, kind, arch, section[at : at + size])
        for c, kind, arch, _, at, size in fatbin_entries(reader(section), 0, len(section))
    ]
    at2 = 8 + len(first) + 24
    assert got == [(8, 2, 70, b"A" * 24), (8, 1, 70, b"ptx\0" * 2), (at2, 2, 120, b"B" * 8), (at2, 1, 120, b"C" * 16)]
    # a section found at an offset in a file: offsets are the file's
    blob = b"x" * 100 + section
    assert [a for _, _, a, _, _, _ in fatbin_entries(reader(blob), 100, len(section))] == [70, 70, 120, 120]


@pytest.mark.parametrize(
    "section,why",
    [
        (container(entry(2, 80, b"A" * 16))[:-8], "overruns its section"),  # cut short
        (
            struct.pack("<IHHQ", MAGIC, 1, 16, 64) + entry(2, 80)[:8] + struct.pack("<I", 60) + b"\0" * 52,
            "overruns its container",
        ),  # a 60-byte entry header
        (b"\0" * 16 + b"garbage!" * 4, "no fatbin container"),
    ],
)
def test_a_damaged_fatbin_is_an_error_not_a_guess(section, why):
    with pytest.raises(FatbinError, match=why):
        list(fatbin_entries(reader(section), 0, len(section)))


# --- ELF files ----------------------------------------------------------------------------------
def cubin(kernel: bool) -> bytes:
    return elf({".text._Z6kernelPf": b"\0" * 16, ".nv.info": b"\0" * 8} if kernel else {".nv.info": b"\0" * 8})


def write(tmp_path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return str(path)


def test_device_code_of_a_shared_object(tmp_path):
    section = container(entry(2, 70, cubin(True)), entry(2, 80, cubin(True)), entry(1, 80, b".entry k\0")) + container(
        entry(2, 90, cubin(True))
    )
    path = write(tmp_path, "libfoo.so.1.2", elf({".text": b"\xc3", ".nv_fatbin": section, **dynamic("libfoo.so.1")}))
    assert device_code(path) == {
        "path": path,
        "soname": "libfoo.so.1",
        "sass": ["70", "80", "90"],
        "ptx": ["80"],
        "modules": 2,
        "ptx_modules": {"80": 1},
    }
    assert (
        fatbin.elf_soname(reader(open(path, "rb").read()), fatbin.elf_sections(reader(open(path, "rb").read())))
        == "libfoo.so.1"
    )


def test_files_without_device_code_are_none(tmp_path, monkeypatch):
    assert device_code(write(tmp_path, "a.so", elf({".text": b"\xc3"}))) is None  # an ELF without .nv_fatbin
    assert device_code(write(tmp_path, "b.so", b"#!/bin/sh\n")) is None  # not ELF
    assert device_code(str(tmp_path / "missing.so")) is None
    damaged = elf({".nv_fatbin": b"\0" * 16 + b"garbage!" * 4})
    monkeypatch.setattr(fatbin.shutil, "which", lambda *a, **k: None)
    monkeypatch.setattr(fatbin.os, "access", lambda *a: False)  # no cuobjdump to fall back on
    out = device_code(write(tmp_path, "c.so", damaged))
    assert out == {"path": out["path"], "sass": [], "ptx": [], "error": out["error"]}
    assert "no fatbin container" in out["error"]


def test_a_fatbin_the_parser_cannot_walk_is_left_to_cuobjdump_where_there_is_one(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "cuobjdump"
    fake.parent.mkdir()
    fake.write_text(
        '#!/bin/sh\ncase "$1" in --list-elf) echo "ELF file    1: x.1.sm_80.cubin";;\n'
        '--list-ptx) echo "PTX file    1: x.1.sm_80.ptx";; esac\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    out = device_code(write(tmp_path, "c.so", elf({".nv_fatbin": b"\0" * 16 + b"garbage!" * 4})))
    assert (out["sass"], out["ptx"], out["read_by"]) == (["80"], ["80"], "cuobjdump") and "no fatbin container" in out[
        "error"
    ]


def test_extended_section_numbering(tmp_path):
    """More than 65535 sections: e_shnum is 0 and section 0's sh_size holds the count."""
    blob = bytearray(elf({".nv_fatbin": container(entry(2, 80, cubin(True))), ".text": b"\xc3"}))
    (shoff,) = struct.unpack_from("<Q", blob, 0x28)
    (count,) = struct.unpack_from("<H", blob, 0x3C)
    struct.pack_into("<H", blob, 0x3C, 0)
    struct.pack_into("<Q", blob, shoff + 0x20, count)
    assert device_code(write(tmp_path, "many.so", bytes(blob)))["sass"] == ["80"]


def test_a_library_whose_only_module_is_empty_has_no_kernels(tmp_path):
    """NVIDIA's libnvblas, libcufftw, libnppc carry one sm_52 module without a kernel."""
    stub = device_code(write(tmp_path, "libnvblas.so.11", elf({".nv_fatbin": container(entry(2, 52, cubin(False)))})))
    assert stub["no_kernels"] is True and stub["sass"] == [] and stub["modules"] == 0
    real = device_code(write(tmp_path, "libx.so", elf({".nv_fatbin": container(entry(2, 52, cubin(True)))})))
    assert "no_kernels" not in real and real["sass"] == ["52"]
    ptx = device_code(write(tmp_path, "liby.so", elf({".nv_fatbin": container(entry(1, 52, b".version 7.0\0"))})))
    assert ptx["no_kernels"] is True  # PTX without .entry
    squeezed = device_code(
        write(tmp_path, "libz.so", elf({".nv_fatbin": container(entry(2, 52, b"\x01" * 40, flags=0x2011))}))
    )
    assert squeezed["sass"] == ["52"]  # compressed: taken as kernels


def test_only_the_section_headers_and_entry_headers_are_read(tmp_path, monkeypatch):
    """A large .nv_fatbin is walked by its headers: its payloads are never read."""
    big = b"\x01" * (fatbin.SMALL_FATBIN + 4096)
    path = write(tmp_path, "libbig.so", elf({".nv_fatbin": container(entry(2, 80, big), entry(1, 80, big))}))
    reads = []
    real_pread = os.pread
    monkeypatch.setattr(fatbin.os, "pread", lambda fd, n, off: reads.append(n) or real_pread(fd, n, off))
    assert device_code(path)["sass"] == ["80"]
    assert max(reads) < 4096 and sum(reads) < 4096


# --- finding and sorting binaries ---------------------------------------------------------------
@pytest.mark.parametrize(
    "path,root,component",
    [
        ("/site/tensorflow/python/_pywrap_tensorflow_internal.so", "/site", "tensorflow"),
        ("/site/tensorflow/libtensorflow_framework.so.2", "/site", "tensorflow"),
        ("/site/tensorflow_io/core/python/ops/libtensorflow_io.so", "/site", "tensorflow_io"),
        ("/site/tfext/_tfext_ops.so", "/site", "extension"),
        ("/site/horovod/tensorflow/mpi_lib.cpython-39-x86_64-linux-gnu.so", "/site", "horovod"),
        ("/site/nvidia/dali/.libs/libnvjpeg-12a3.so.12", "/site", "dali"),  # bundled: DALI's own
        ("/site/nvidia/dali_tf_plugin/libdali_tf_2_21.so", "/site", "dali"),
        ("/site/nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9", "/site", "cudnn"),
        ("/site/nvidia/cublas/lib/libcublasLt.so.12", "/site", "cublas"),
        ("/site/nvidia/cusparselt/lib/libcusparseLt.so.0", "/site", "cusparselt"),
        ("/site/nvidia/cusparse/lib/libcusparse.so.12", "/site", "cusparse"),
        ("/site/nvidia/nvjitlink/lib/libnvJitLink.so.12", "/site", "nvjitlink"),
        ("/site/nvidia/something/lib/libwhatever.so", "/site", "nvidia-something"),
        ("/site/cupy/_core/core.so", "/site", "cupy"),
        ("/usr/lib/x86_64-linux-gnu/libnccl.so.2.13.4", "/usr/lib/x86_64-linux-gnu", "nccl"),
        ("/usr/lib/x86_64-linux-gnu/libnppif.so.11.3.2.152", "/usr/lib/x86_64-linux-gnu", "npp"),
        ("/usr/lib/x86_64-linux-gnu/libnvblas.so.11", "/usr/lib/x86_64-linux-gnu", "cublas"),
        ("/usr/lib/x86_64-linux-gnu/libmystery.so.3", "/usr/lib/x86_64-linux-gnu", "libmystery"),
    ],
)
def test_components(path, root, component):
    assert libraries.component_of(path, root, ["/site"]) == component


def test_every_component_has_a_name():
    ids = [c for _, c in libraries.PACKAGE_COMPONENTS] + [c for c, _ in libraries.LIBRARY_COMPONENTS]
    assert set(ids) == set(libraries.COMPONENT_NAMES)


def test_ld_so_conf_includes_are_followed(tmp_path):
    (tmp_path / "ld.so.conf.d").mkdir()
    (tmp_path / "ld.so.conf").write_text("# comment\ninclude ld.so.conf.d/*.conf\n/usr/local/lib\n")
    (tmp_path / "ld.so.conf.d" / "a.conf").write_text("/opt/a/lib  # wheels\ninclude ../ld.so.conf\n")
    (tmp_path / "ld.so.conf.d" / "b.conf").write_text("/opt/b/lib\n")
    assert libraries._ld_so_conf_dirs(str(tmp_path / "ld.so.conf")) == ["/opt/a/lib", "/opt/b/lib", "/usr/local/lib"]


def test_the_loaders_copy_counts_and_the_other_is_shadowed(tmp_path, monkeypatch):
    wheel = {"path": "/site/nvidia/cublas/lib/libcublas.so.11", "soname": "libcublas.so.11"}
    toolkit = {"path": "/usr/lib/x86_64-linux-gnu/libcublas.so.11.4.1", "soname": "libcublas.so.11"}
    alone = {"path": "/usr/lib/x86_64-linux-gnu/libcufft.so.10.4.1", "soname": "libcufft.so.10"}
    monkeypatch.setattr(libraries.os.path, "realpath", lambda p: p)
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    binaries = [dict(wheel), dict(toolkit), dict(alone)]
    libraries.mark_shadowed(binaries, {}, {"libcublas.so.11": wheel["path"], "libcufft.so.10": alone["path"]})
    assert [b.get("shadowed_by") for b in binaries] == [None, wheel["path"], None]
    binaries = [dict(wheel), dict(toolkit)]  # what the process loaded wins over the cache
    libraries.mark_shadowed(binaries, {"libcublas.so.11": toolkit["path"]}, {"libcublas.so.11": wheel["path"]})
    assert [b.get("shadowed_by") for b in binaries] == [toolkit["path"], None]
    binaries = [dict(wheel), dict(toolkit)]  # unknown to the loader: both count
    libraries.mark_shadowed(binaries, {}, {})
    assert not any("shadowed_by" in b for b in binaries)


def test_cuda_binaries_walks_the_python_tree_and_the_library_path(tmp_path, monkeypatch):
    site, libdir = tmp_path / "site", tmp_path / "lib"
    code = lambda arch: elf(  # noqa: E731
        {
            ".nv_fatbin": container(entry(2, arch, cubin(True)), entry(1, arch, b".entry k\0")),  # noqa: E731
            **dynamic(f"libcudnn_ops.so.{arch}"),
        }
    )
    write(tmp_path, "site/tensorflow/python/_pywrap_tensorflow_internal.so", code(80))
    write(tmp_path, "site/nvidia/cudnn/lib/libcudnn_ops.so.9", code(90))
    os.symlink("libcudnn_ops.so.9", site / "nvidia/cudnn/lib/libcudnn_ops.so")  # one file, read once
    write(tmp_path, "site/nvidia/cudnn/lib/stubs/libcudnn_stub.so", code(90))  # link stubs: skipped
    write(tmp_path, "site/tensorflow/python/plain.so", elf({".text": b"\xc3"}))  # no device code: not listed
    write(tmp_path, "site/tensorflow/__init__.py", b"")
    write(tmp_path, "lib/libnccl.so.2.19.3", code(90))
    write(tmp_path, "lib/libnvblas.so.12", elf({".nv_fatbin": container(entry(2, 52, cubin(False)))}))
    monkeypatch.setattr(libraries, "search_roots", lambda: ([str(site)], [str(libdir)]))
    monkeypatch.setattr(libraries, "_loader_cache", lambda: {})
    found = {os.path.relpath(b["path"], tmp_path): b for b in libraries.cuda_binaries({})}
    assert {p: b["component"] for p, b in found.items()} == {
        "site/tensorflow/python/_pywrap_tensorflow_internal.so": "tensorflow",
        "site/nvidia/cudnn/lib/libcudnn_ops.so.9": "cudnn",
        "lib/libnccl.so.2.19.3": "nccl",
        "lib/libnvblas.so.12": "cublas",
    }
    assert found["lib/libnccl.so.2.19.3"]["sass"] == ["90"] and found["lib/libnvblas.so.12"]["no_kernels"]
    table = coverage_table(list(found.values()), ["9.0"])
    assert len(table["9.0"]) == 3  # the empty one is not counted


def test_search_roots_follow_the_loader(monkeypatch, tmp_path):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{tmp_path / 'a'}::{tmp_path / 'missing'}")
    monkeypatch.setattr(libraries, "_ld_so_conf_dirs", lambda: [str(tmp_path / "b"), str(tmp_path / "a")])
    trees, flat = libraries.search_roots()
    assert flat[:2] == [str(tmp_path / "a"), str(tmp_path / "b")]  # in order, each once
    assert all(os.path.isdir(d) for d in trees + flat)


# --- the coverage table -------------------------------------------------------------------------
def test_coverage_table_counts_the_loaded_kernels_and_says_how_much_jit_covers():
    binaries = [
        {
            "component": "cudnn",
            "path": "/a.so",
            "sass": ["70", "80"],
            "ptx": ["70"],
            "modules": 10,
            "ptx_modules": {"70": 2},
        },
        {"component": "cudnn", "path": "/b.so", "sass": ["80"], "ptx": ["80"], "modules": 3, "ptx_modules": {"80": 3}},
        {"component": "cublas", "path": "/old.so", "sass": ["60"], "ptx": [], "shadowed_by": "/new.so"},
        {"component": "cublas", "path": "/stub.so", "sass": [], "ptx": [], "no_kernels": True},
        {"component": "tensorflow", "path": "/tf.so", "sass": ["80"], "ptx": ["80"]},  # a report before modules
    ]
    table = coverage_table(binaries, ["8.6", "12.0"])
    assert set(table["12.0"]) == {"/a.so", "/b.so", "/tf.so"}
    assert table["8.6"]["/a.so"] == {"component": "cudnn", "kind": "sass", "from": "sm_80"}
    assert table["12.0"]["/a.so"] == {"component": "cudnn", "kind": "ptx", "from": "compute_70", "modules": [2, 10]}
    assert table["12.0"]["/b.so"] == {"component": "cudnn", "kind": "ptx", "from": "compute_80"}  # all 3 JIT
    assert table["12.0"]["/tf.so"] == {"component": "tensorflow", "kind": "ptx", "from": "compute_80"}
    assert fatbin.jit_modules(binaries[0], "7.5") == 2 and fatbin.jit_modules(binaries[1], "7.5") == 0


def test_a_library_whose_kernels_are_not_in_its_fatbin_is_listed_not_counted():
    # cuFFT 11.4 (CUDA 12.9): one sm_52 stub module in .nv_fatbin, its kernels loaded from
    # its own data; counting the stub would say cuFFT runs on no GPU newer than Maxwell
    stub = {
        "path": "/x/nvidia/cufft/lib/libcufft.so.11",
        "sass": ["52"],
        "ptx": [],
        "modules": 1,
        "kernels_elsewhere": True,
    }
    assert not fatbin.counted(stub)
    assert "not in .nv_fatbin" in readback._why_not_counted(stub)
    assert fatbin.counted({**stub, "kernels_elsewhere": False})
    assert any(fnmatch.fnmatch("libcufft.so.11", p) for p in fatbin.KERNELS_ELSEWHERE)


def test_a_corrupt_elf_is_one_files_error_never_the_reports(tmp_path):
    # a section-name table that claims 2**62 bytes: read within the file, never allocated
    head = bytearray(64)
    head[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", head, 0x28, 64)  # section headers right after
    struct.pack_into("<HHH", head, 0x3A, 64, 2, 1)  # 2 sections, names in section 1
    names = bytearray(64)
    struct.pack_into("<IIQQQQ", names, 0, 0, 3, 0, 0, 200, 1 << 62)
    path = tmp_path / "libcorrupt.so"
    path.write_bytes(bytes(head) + bytes(64) + bytes(names))
    # never read, never allocated: a header claiming more than the file holds is that file's error
    found = device_code(str(path))
    assert found is not None and "section name table" in found["error"] and found["sass"] == found["ptx"] == []
