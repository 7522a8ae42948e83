"""CUDA binaries in an image, read in pure Python: which shared objects carry device code,
for which GPUs (SASS and PTX per architecture), and what that covers per GPU.

Runs inside images next to image_report.py, which imports it (standard library only, like
cuda_arch.py); the builder imports it from its package.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import stat
import struct
import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the report's shape, for the checker (not copied into images)
    from builder.in_image.report_types import Binary, Coverage, CoverageCell

if __package__:  # imported from the builder package (host side)
    from builder.in_image import cuda_arch
else:  # run in the image: cuda_arch.py sits next to it
    import cuda_arch  # type: ignore[no-redef]

# Every ELF shared object with device code under the Python tree (site-packages, NVIDIA's
# nvidia/* wheels included) and the library path (LD_LIBRARY_PATH, the ld.so.conf
# directories, the system's, /usr/local/cuda*), read in pure Python: no cuobjdump (a
# runtime image has none, and it reads whole files: seconds for each of cuDNN's and
# cuBLASLt's hundreds of MB).
#
# Device code sits in the ELF section .nv_fatbin: the one the CUDA runtime registers
# (.nvFatBinSegment points into it) and the one `cuobjdump --list-elf/--list-ptx` lists.
# It is a chain of fatbin containers. Each is a header (CUDA's fatbinary.h, little-endian)
#     magic u32 0xBA55ED50 | version u16 (1) | header size u16 (16) | size of the rest u64
# followed by entries, each a header and its payload:
#     kind u16 (1 PTX, 2 ELF = SASS) | u16 | header size u32 | payload size u64 |
#     compressed size u32 | u32 | minor u16 | major u16 | arch u32 (80: sm_80 or compute_80) |
#     name offset u32 | name size u32 | flags u64 (0x2000, 0x8000: compressed) | u64 | u64
# (64 bytes; newer toolkits write longer headers, which their header size says). The layout
# as public parsers of the format read it (n-eiling/cuda-fatbin-decompression, jiegec/fatbinary);
# a compressed entry's header still names its architecture. Only the headers are read
# (pread at their offsets), never a payload, so a library costs a few thousand small reads
# whatever its size. __nv_relfatbin, relocatable device code kept for a later device link
# (NCCL's, TensorFlow's), is not loaded at run time and cuobjdump does not list it: not read.
# tests/unit/test_image_report.py checks the parser on synthetic bytes, and
# tests/integration/test_coverage.py against cuobjdump on every binary of a real image.
FATBIN_SECTION = ".nv_fatbin"
FATBIN_MAGIC = 0xBA55ED50
FATBIN_HEADER = struct.Struct("<IHHQ")
FATBIN_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
KIND_PTX, KIND_ELF = 1, 2
# Kind 0x10 is counted as SASS too: a public reading of cuobjdump (nvopen-tools' fatbin
# FORMAT_SPECIFICATION.md) says --list-elf lists it with the ELF entries; no CUDA 11 binary
# has one, so tests/integration/test_coverage.py is where a newer image would show otherwise.
SASS_KINDS = (KIND_ELF, 0x10)
FLAG_COMPRESSED = 0x2000 | 0x8000  # LZ4 (CUDA 11+), zstd (CUDA 12.8+, as public write-ups read it)
# A .nv_fatbin this small is read whole and its modules checked for kernels: NVIDIA ships
# libraries whose only device code is one empty sm_52 module (libnvblas, libcufftw, libnppc,
# libaccinj64: 1 KB); a module without kernels is no device code. A larger section holds kernels.
SMALL_FATBIN = 64 * 1024
DT_SONAME = 14


# Bounds on what a header may make the scanner read (a corrupt or hostile file names any
# size): a shared object has tens of sections (65536 is far past any linked library) and a
# section name table of a few kB. A header claiming more, or more than the file holds, makes
# the file one unreadable binary, never a read sized by the header.
MAX_SECTIONS = 1 << 16
MAX_SECTION_NAMES = 1 << 20
HEADER_CHUNK = 1024  # section headers read this many at a time
ZEROS = bytes(1 << 16)  # padding between fatbin containers, read this much at a time


class FatbinError(ValueError):
    """A .nv_fatbin whose containers cannot be walked (or an ELF file whose headers lie)."""


def _within(offset: int, length: int, size: int | None, what: str) -> None:
    """OFFSET + LENGTH must lie inside a file of SIZE bytes (None: not known)."""
    if offset < 0 or length < 0 or (size is not None and offset + length > size):
        raise FatbinError(f"{what} at offset {offset:#x} ({length} bytes) runs past the end of the file")


def _section_headers(read, shoff: int, shentsize: int, shnum: int):
    """Each section header's (name, type, flags, addr, offset, size), read HEADER_CHUNK at a time."""
    for first in range(0, shnum, HEADER_CHUNK):
        count = min(HEADER_CHUNK, shnum - first)
        table = read(shentsize * count, shoff + first * shentsize)
        if len(table) < shentsize * count:
            raise FatbinError(f"the section header table at offset {shoff:#x} is cut short")
        for i in range(count):
            yield struct.unpack_from("<IIQQQQ", table, i * shentsize)


def elf_sections(read, size: int | None = None) -> dict[str, tuple[int, int]] | None:
    """{section name: (file offset, size)} of a 64-bit little-endian ELF file, or None when
    it is not one. READ(n, offset) returns bytes; SIZE is the file's (None: not known).
    FatbinError when its headers claim more than the file holds or than MAX_SECTIONS."""
    head = read(64, 0)
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return None
    (shoff,) = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
    if not shoff or shentsize < 64:
        return {}
    if shnum == 0 or shstrndx == 0xFFFF:  # extended numbering: the counts sit in section 0
        first = read(64, shoff)
        shnum = shnum or struct.unpack_from("<Q", first, 0x20)[0]
        shstrndx = struct.unpack_from("<I", first, 0x28)[0] if shstrndx == 0xFFFF else shstrndx
    if not shnum or shstrndx >= shnum:
        return {}
    if shnum > MAX_SECTIONS:
        raise FatbinError(f"the ELF header claims {shnum} sections (more than {MAX_SECTIONS})")
    _within(shoff, shentsize * shnum, size, "the section header table")
    names_header = next(_section_headers(read, shoff + shstrndx * shentsize, shentsize, 1))
    names_offset, names_size = names_header[4], names_header[5]
    if names_size > MAX_SECTION_NAMES:
        raise FatbinError(f"the section name table claims {names_size} bytes (more than {MAX_SECTION_NAMES})")
    _within(names_offset, names_size, size, "the section name table")
    names = read(names_size, names_offset)
    out: dict[str, tuple[int, int]] = {}
    for name, _type, _flags, _addr, offset, length in _section_headers(read, shoff, shentsize, shnum):
        end = names.find(b"\0", name)
        out.setdefault(names[name : end if end >= 0 else len(names)].decode("latin-1"), (offset, length))
    return out


def elf_soname(read, sections: dict[str, tuple[int, int]]) -> str:
    """The DT_SONAME of a shared object ('' when it has none)."""
    if ".dynamic" not in sections or ".dynstr" not in sections:
        return ""
    offset, size = sections[".dynamic"]
    dynamic = read(min(size, 1 << 16), offset)
    for tag, value in struct.iter_unpack("<qQ", dynamic[: len(dynamic) // 16 * 16]):
        if tag == 0:
            break
        if tag == DT_SONAME:
            strings, _ = sections[".dynstr"]
            raw = read(256, strings + value)
            return raw.split(b"\0", 1)[0].decode("latin-1")
    return ""


def fatbin_entries(read, start: int, size: int):
    """(container offset, kind, arch, flags, payload offset, payload size) of each entry of
    the fatbin containers in [start, start + size) of what READ(n, offset) reads."""
    end = start + size
    pos = start
    while pos + FATBIN_HEADER.size <= end:
        magic, _version, header_size, rest = FATBIN_HEADER.unpack(read(FATBIN_HEADER.size, pos))
        if magic != FATBIN_MAGIC:  # padding between containers: find the next one
            chunk = read(min(end - pos, len(ZEROS)), pos)
            found = chunk.find(FATBIN_HEADER.pack(FATBIN_MAGIC, 0, 0, 0)[:4], 1)
            if found < 0:
                if chunk != ZEROS[: len(chunk)]:  # a compare, not a strip: a hostile section is all zeros
                    raise FatbinError(f"no fatbin container at offset {pos:#x}")
                pos += max(len(chunk) - 3, 1)
            else:
                pos += found
            continue
        if header_size < FATBIN_HEADER.size or pos + header_size + rest > end:
            raise FatbinError(f"the fatbin container at offset {pos:#x} overruns its section")
        container_end = pos + header_size + rest
        entry = pos + header_size
        while entry + FATBIN_ENTRY.size <= container_end:
            fields = FATBIN_ENTRY.unpack(read(FATBIN_ENTRY.size, entry))
            kind, entry_header, payload, arch, flags = fields[0], fields[2], fields[3], fields[8], fields[11]
            if entry_header < FATBIN_ENTRY.size or entry + entry_header + payload > container_end:
                raise FatbinError(f"the fatbin entry at offset {entry:#x} overruns its container")
            yield pos, kind, arch, flags, entry + entry_header, payload
            entry += entry_header + payload
        pos = container_end


def _has_kernels(kind: int, flags: int, payload: bytes) -> bool:
    """Does a module define a kernel? A compressed one is taken to (it is not unpacked)."""
    if flags & FLAG_COMPRESSED:
        return True
    if kind == KIND_PTX:
        return b".entry" in payload
    try:
        sections = elf_sections(lambda n, off: payload[off : off + n], len(payload))
    except (struct.error, IndexError, ValueError):  # FatbinError is a ValueError
        return True
    return sections is None or any(name.startswith(".text.") for name in sections)


# Libraries whose .nv_fatbin is a stub and whose kernels are data they load themselves
# (cuFFT 10+: its .nv_fatbin holds one sm_52 module; cuobjdump lists no more): what they
# run on cannot be read from the file, so they are listed, not counted.
KERNELS_ELSEWHERE = ("libcufft.so*", "libcufftw.so*")


def device_code(path: str) -> Binary | None:
    """What one file carries: None when it is no ELF object with a .nv_fatbin section; else
    {"path", "sass": ["50", ...], "ptx": ["80"], "modules": N, "ptx_modules": {"80": n},
    "soname"?, "no_kernels"?, "error"?}: the architectures as digit strings (cuobjdump's
    sm_XY and compute_XY); its modules (fatbin containers, one per compiled source file,
    each loaded whole), and how many of them carry PTX, by the oldest PTX each carries. A
    GPU with no SASS in a binary runs by JIT only the modules with PTX: NVIDIA's libraries
    carry many modules of one architecture's SASS alone (cuDNN 8's and cuBLASLt's kernels
    for one GPU generation), and PTX in a few."""
    fd = _open_regular(path)
    if fd is None:
        return None
    try:
        fsize = os.fstat(fd).st_size
        # every read within the file: sizes and offsets come from headers a corrupt file may fake
        read = lambda n, offset: os.pread(fd, max(0, min(n, fsize - offset)), offset) if 0 <= offset < fsize else b""  # noqa: E731
        sections = elf_sections(read, fsize)
        if not sections or FATBIN_SECTION not in sections:
            return None
        out: Binary = {"path": path, "sass": [], "ptx": []}
        soname = elf_soname(read, sections)
        if soname:
            out["soname"] = soname
        start, size = sections[FATBIN_SECTION]
        _within(start, size, fsize, f"the {FATBIN_SECTION} section")
        whole = read(size, start) if size <= SMALL_FATBIN else None
        if whole is not None:
            read = lambda n, offset: whole[offset - start : offset - start + n]  # noqa: E731
        sass: set[str] = set()
        ptx: set[str] = set()
        empty: set[int] = set()
        modules: dict[int, list[int]] = {}  # container offset -> its PTX architectures
        for container, kind, arch, flags, at, length in fatbin_entries(read, start, size):
            if kind not in SASS_KINDS and kind != KIND_PTX:
                continue
            if whole is not None and not _has_kernels(kind, flags, read(length, at)):
                empty.add(arch)
                continue
            (ptx if kind == KIND_PTX else sass).add(str(arch))
            modules.setdefault(container, []).extend([arch] if kind == KIND_PTX else [])
        out["sass"], out["ptx"] = sorted(sass, key=int), sorted(ptx, key=int)
        out["modules"] = len(modules)
        oldest = [str(min(archs)) for archs in modules.values() if archs]
        out["ptx_modules"] = {a: oldest.count(a) for a in sorted(set(oldest), key=int)}
        if empty and not sass and not ptx:
            out["no_kernels"] = True
        if any(fnmatch.fnmatch(os.path.basename(path), p) for p in KERNELS_ELSEWHERE):
            out["kernels_elsewhere"] = True
        return out
    except (OSError, struct.error, ValueError, OverflowError, MemoryError) as exc:  # FatbinError is a ValueError
        return {"path": path, **_cuobjdump_listing(path), "error": str(exc)[:200]}
    finally:
        os.close(fd)


def _open_regular(path: str) -> int | None:
    """A read-only descriptor of PATH when it is a regular file, else None. Opened without
    blocking: a fifo (or a device) named like a library must not hold the scan."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _cuobjdump_listing(path: str) -> dict:
    """The slow way, for a .nv_fatbin the parser cannot walk: cuobjdump's listings of it,
    where the image has cuobjdump ("read_by" says so); none otherwise."""
    tool = shutil.which("cuobjdump") or (
        "/usr/local/cuda/bin/cuobjdump" if os.access("/usr/local/cuda/bin/cuobjdump", os.X_OK) else None
    )
    if not tool:
        return {"sass": [], "ptx": []}
    out: dict = {"read_by": "cuobjdump"}
    for kind, flag in (("sass", "--list-elf"), ("ptx", "--list-ptx")):
        try:
            listing = subprocess.run([tool, flag, path], capture_output=True, text=True, timeout=600).stdout
        except (OSError, subprocess.SubprocessError):
            listing = ""
        out[kind] = sorted(set(re.findall(r"\.sm_(\d+)[a-z]?\.(?:cubin|ptx)", listing)), key=int)
    return out


def counted(binary: Binary) -> bool:
    """Does a binary count for coverage (kernels the loader's copy carries)?"""
    return not binary.get("no_kernels") and not binary.get("shadowed_by") and not binary.get("kernels_elsewhere")


def jit_modules(binary: Binary, arch: str) -> int:
    """How many of a binary's modules a GPU of ARCH can JIT-compile (PTX no newer than it)."""
    gpu = cuda_arch.order(arch)
    return sum(n for a, n in (binary.get("ptx_modules") or {}).items() if cuda_arch.order(a) <= gpu)


def coverage_table(binaries: list[Binary], requested: list[str]) -> Coverage:
    """For each requested capability and each CUDA binary that counts (kernels, the copy
    the loader takes): native SASS, PTX JIT, or none."""
    table: Coverage = {}
    for arch in requested:
        row: dict[str, CoverageCell] = {}
        for b in binaries:
            if not counted(b):
                continue
            kind, source = cuda_arch.coverage(arch, b["sass"], b["ptx"])
            cell: CoverageCell = {"component": b["component"], "kind": kind, "from": source}
            row[b["path"]] = cell
            if kind == "ptx" and b.get("modules"):
                jit = jit_modules(b, arch)
                if jit < b["modules"]:  # the modules without PTX (for older GPUs alone) do not load
                    cell["modules"] = [jit, b["modules"]]
        table[arch] = row
    return table
