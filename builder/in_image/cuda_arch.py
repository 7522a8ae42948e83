"""Compute-capability policy: the one place that knows which GPU architectures a
CUDA toolkit can compile and how a list of them turns into nvcc code.

Standard library only: the same file is copied into every image as
/opt/tensorflow/cuda_arch.py, where nvbuild.sh runs it, so host-side validation
and the in-image compile cannot disagree.

Rule (as JAX-Toolbox and NGC do it): native code (SASS) for every listed
capability, PTX only for the newest one. Every listed GPU starts without JIT,
and a future GPU can still JIT the newest PTX, while the binary carries a single
PTX copy instead of one per architecture.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass


class ArchError(ValueError):
    """A compute-capability list the policy rejects; the message is one user-facing line."""


def _shown(value: object, quoted: bool = True, limit: int = 80) -> str:
    """VALUE as a message may show it: on one line (repr, which escapes every control, when
    QUOTED or unprintable), cut to LIMIT characters with its length (a 10 kB option stays
    one short line). Here, not the builder's printer: this module also runs inside images,
    on its own."""
    text = str(value)
    start = text[:limit]
    body = repr(start) if quoted or not start.isprintable() else start
    return body if len(text) <= limit else f"{body}... ({len(text)} characters)"


# Every architecture nvcc has ever accepted for -arch=sm_XY (major, minor).
KNOWN_ARCHS: tuple[tuple[int, int], ...] = (
    (3, 0),
    (3, 2),
    (3, 5),
    (3, 7),
    (5, 0),
    (5, 2),
    (5, 3),
    (6, 0),
    (6, 1),
    (6, 2),
    (7, 0),
    (7, 2),
    (7, 5),
    (8, 0),
    (8, 6),
    (8, 7),
    (8, 9),
    (9, 0),
    (10, 0),
    (10, 1),
    (10, 3),
    (11, 0),
    (12, 0),
    (12, 1),
)

# (first CUDA release, lowest arch, highest arch) for each toolkit generation,
# newest first; a toolkit supports the KNOWN_ARCHS within its bounds.
_TOOLKIT_RANGES: tuple[tuple[tuple[int, int], tuple[int, int], tuple[int, int]], ...] = (
    ((13, 0), (7, 5), (12, 1)),
    ((12, 9), (5, 0), (12, 1)),
    ((12, 8), (5, 0), (12, 0)),
    ((12, 0), (5, 0), (9, 0)),
    ((11, 8), (3, 5), (9, 0)),
    ((11, 4), (3, 5), (8, 7)),
    ((11, 1), (3, 5), (8, 6)),
    ((11, 0), (3, 5), (8, 0)),
    ((10, 0), (3, 0), (7, 5)),
    ((9, 0), (3, 0), (7, 2)),
)
# Architectures whose code 13.0 renamed (sm_101 became sm_110) are not listed for 13.x.
_DROPPED_IN_13 = {(10, 1)}

SPECIAL = ("all", "local")


@dataclass(frozen=True, order=True)
class Arch:
    major: int
    minor: int

    def __str__(self) -> str:  # "8.6", TF_CUDA_COMPUTE_CAPABILITIES form
        return f"{self.major}.{self.minor}"

    @property
    def digits(self) -> str:  # "86", nvcc form
        return f"{self.major}{self.minor}"


def cuda_major_minor(version: str) -> tuple[int, int]:
    m = re.match(r"^(\d+)\.(\d+)", str(version))
    if not m:
        raise ArchError(f"{_shown(version)} is not a CUDA version (expected MAJOR.MINOR[.PATCH])")
    return int(m.group(1)), int(m.group(2))


def supported_archs(cuda_version: str) -> list[Arch]:
    """Every architecture the given CUDA toolkit can compile, oldest first."""
    cuda = cuda_major_minor(cuda_version)
    for since, low, high in _TOOLKIT_RANGES:
        if cuda >= since:
            archs = [Arch(*a) for a in KNOWN_ARCHS if low <= a <= high]
            if cuda >= (13, 0):
                archs = [a for a in archs if (a.major, a.minor) not in _DROPPED_IN_13]
            return archs
    raise ArchError(f"CUDA {_shown(cuda_version, quoted=False)} is older than any toolkit this builder knows (9.0+)")


def supported_range(cuda_version: str) -> str:
    archs = supported_archs(cuda_version)
    return f"{archs[0]}-{archs[-1]} ({', '.join(str(a) for a in archs)})"


def order(text: str) -> Arch:
    """Sort key of a capability written "8.6" (as text, "10.0" sorts before "6.0")."""
    return _parse_one(text)


def _parse_one(token: str) -> Arch:
    t = token.strip().lower().removeprefix("sm_").removeprefix("compute_")
    if re.fullmatch(r"\d+\.\d", t):
        major, minor = t.split(".")
        return Arch(int(major), int(minor))
    if re.fullmatch(r"\d{2,3}", t):  # "86", "100": the last digit is the minor
        return Arch(int(t[:-1]), int(t[-1]))
    raise ArchError(f"{_shown(token.strip())} is not a compute capability (write 8.6, 86 or sm_86)")


def parse(spec: str | list, default: list[str] | None = None) -> list[str] | str:
    """Parse a user's list into sorted unique 'X.Y' strings.

    `all` gives `default` (the release's list); `local` is returned as-is, to be
    probed by nvbuild.sh on the GPUs visible at build time.
    """
    if isinstance(spec, list):
        spec = ",".join(str(s) for s in spec)
    text = str(spec).strip()
    if text.lower() == "local":
        return "local"
    if text.lower() == "all":
        if default is None:
            raise ArchError("'all' needs the release's default list, and there is none")
        text = ",".join(default)
    tokens = [t for t in re.split(r"[,;\s]+", text) if t]
    if not tokens:
        raise ArchError("the compute capability list is empty")
    archs = sorted({_parse_one(t) for t in tokens})
    return [str(a) for a in archs]


# The rows a coverage report always answers: the GPUs fleets run today (Turing to
# Blackwell: B200 is 10.0, RTX 50 / RTX PRO are 12.0), whatever the image was built for.
FLEET = ("7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0")


def first_toolkit_for(arch: Arch) -> str | None:
    """The oldest CUDA release (MAJOR.MINOR) whose nvcc compiles ARCH, if any does."""
    for since, low, high in reversed(_TOOLKIT_RANGES):
        if low <= (arch.major, arch.minor) <= high and (
            since < (13, 0) or (arch.major, arch.minor) not in _DROPPED_IN_13
        ):
            return f"{since[0]}.{since[1]}"
    return None


def check(
    archs: list[str] | str,
    cuda_version: str,
    allow_ptx_jit: bool = False,
    opt_in: str | None = "--allow-ptx-jit",
    ptxas: str | None = None,
) -> list[str]:
    """Return a problem line for each arch the toolkit cannot compile. With ALLOW_PTX_JIT
    an arch newer than the toolkit's newest is accepted: it runs the newest PTX by JIT.
    OPT_IN names the option that accepts it (None where there is none, e.g. a catalog)."""
    if archs == "local":
        return []
    supported = supported_archs(cuda_version)
    ok = {str(a) for a in supported} | set(assembled(archs, cuda_version, ptxas))
    bad = [a for a in archs if a not in ok and not (allow_ptx_jit and _parse_one(a) > supported[-1])]
    if not bad:
        return []
    known = {f"{m}.{n}" for m, n in KNOWN_ARCHS}
    what = ", ".join(bad)
    kind = "is not a GPU architecture" if all(b not in known for b in bad) else "cannot be compiled"
    line = f"compute capability {what} {kind} for CUDA {_shown(cuda_version, quoted=False)}; supported: {supported_range(cuda_version)}"
    newer = [_parse_one(b) for b in bad if b in known and _parse_one(b) > supported[-1]]
    if newer:
        toolkit = first_toolkit_for(max(newer))
        line += f"; CUDA {toolkit} or newer compiles {', '.join(str(a) for a in newer)}" if toolkit else ""
        if opt_in:
            line += f"{',' if toolkit else ';'} or {opt_in} runs it by PTX JIT of compute_{supported[-1].digits}"
    return [line]


def compiled(archs: list[str] | str, cuda_version: str, ptxas: str | None = None) -> list[str] | str:
    """What gets machine code for ARCHS: those nvcc compiles and those a newer ptxas
    assembles (assembled()). The ones newer than both run by PTX JIT, so nvcc's newest
    is compiled too: the PTX a binary carries is its newest arch's, and JIT from
    compute_90 beats JIT from compute_80."""
    if archs == "local":
        return archs
    supported = supported_archs(cuda_version)
    ok = {str(a) for a in supported} | set(assembled(archs, cuda_version, ptxas))
    kept = [a for a in archs if a in ok]
    if jit_only(archs, cuda_version, ptxas) and str(supported[-1]) not in kept:
        kept.append(str(supported[-1]))
    return sorted(kept, key=order)


def jit_only(archs: list[str] | str, cuda_version: str, ptxas: str | None = None) -> list[str]:
    """ARCHS that neither nvcc nor a newer ptxas can compile and that run by PTX JIT
    (newer than nvcc's newest)."""
    if archs == "local":
        return []
    newest = supported_archs(cuda_version)[-1]
    by_ptxas = set(assembled(archs, cuda_version, ptxas))
    return [a for a in archs if _parse_one(a) > newest and a not in by_ptxas]


def resolve(
    spec: str | list,
    cuda_version: str,
    default: list[str] | None,
    allow_ptx_jit: bool = False,
    ptxas: str | None = None,
) -> list[str] | str:
    """parse + check, raising one ArchError naming the supported range; with
    ALLOW_PTX_JIT, the list that gets machine code (compiled())."""
    archs = parse(spec, default)
    problems = check(archs, cuda_version, allow_ptx_jit, ptxas=ptxas)
    if problems:
        raise ArchError(problems[0])
    return compiled(archs, cuda_version, ptxas) if allow_ptx_jit else archs


def assembled(archs: list[str] | str, cuda_version: str, ptxas: str | None) -> list[str]:
    """ARCHS newer than the toolkit's nvcc compiles that a newer ptxas of the same CUDA
    major (NVIDIA's nvidia-cuda-nvcc wheel: ptxas alone) assembles into machine code from
    the newest PTX nvcc writes. The cubins go into nvcc's own fatbin (an options file
    for its fatbinary), so the binary keeps CUDA's fatbin layout and needs only the
    toolkit's runtime. Another major is refused: a CUDA 13 ptxas reads no CUDA 12 PTX
    newer than its own and its code is not supported on a CUDA 12 runtime."""
    if archs == "local" or not ptxas:
        return []
    nvcc_major, _ = cuda_major_minor(cuda_version)
    if cuda_major_minor(ptxas)[0] != nvcc_major:
        return []
    newest = supported_archs(cuda_version)[-1]
    can = {str(a) for a in supported_archs(ptxas)}
    return [a for a in archs if _parse_one(a) > newest and a in can]


def gencode_flags(archs: list[str], cuda_version: str | None = None) -> list[str]:
    """nvcc -gencode flags: SASS for each arch, PTX for the newest. With CUDA_VERSION,
    only the archs that toolkit's nvcc compiles (the newer ones are assembled()); when
    there are none, the PTX of its newest, which the assembled ones come from."""
    if cuda_version is not None:
        newest_nvcc = supported_archs(cuda_version)[-1]
        archs = [a for a in archs if _parse_one(a) <= newest_nvcc]
        if not archs:  # all assembled: nvcc writes only the PTX they come from, its newest
            return [f"-gencode=arch=compute_{newest_nvcc.digits},code=compute_{newest_nvcc.digits}"]
    parsed = sorted({_parse_one(a) for a in archs})
    flags = [f"-gencode=arch=compute_{a.digits},code=sm_{a.digits}" for a in parsed]
    newest = parsed[-1]
    flags.append(f"-gencode=arch=compute_{newest.digits},code=compute_{newest.digits}")
    return flags


def coverage(arch: str, sass: list[str], ptx: list[str]) -> tuple[str, str]:
    """How a GPU of compute capability `arch` runs a binary that carries SASS for the
    `sass` architectures and PTX for the `ptx` ones (digit strings such as "80").

    SASS built for X.y runs on X.z with z >= y (same major); PTX compute_N is JIT-compiled
    by the driver for any GPU at least as new as N. Returns ("sass", "sm_80"),
    ("ptx", "compute_80") or ("none", "").
    """
    gpu = _parse_one(arch)
    native = [a for a in (_parse_one(s) for s in sass) if a.major == gpu.major and a.minor <= gpu.minor]
    if native:
        return "sass", f"sm_{max(native).digits}"
    jit = [a for a in (_parse_one(p) for p in ptx) if a <= gpu]
    if jit:
        return "ptx", f"compute_{max(jit).digits}"
    return "none", ""


def main(argv: list[str]) -> int:
    """In-image use: `cuda_arch.py resolve LIST CUDA_VERSION [DEFAULT] [--allow-ptx-jit] [--ptxas V]`
    prints the X.Y list to compile; `cuda_arch.py gencode LIST [CUDA_VERSION]` prints nvcc flags,
    one per line; `cuda_arch.py assemble LIST CUDA_VERSION --ptxas V` the archs ptxas V assembles."""
    allow_ptx_jit = "--allow-ptx-jit" in argv
    argv = [a for a in argv if a != "--allow-ptx-jit"]
    ptxas = None
    if "--ptxas" in argv[:-1]:  # --ptxas VERSION: the newer ptxas beside nvcc (assembled())
        at = argv.index("--ptxas")
        ptxas = argv[at + 1] or None
        del argv[at : at + 2]
    try:
        if len(argv) >= 3 and argv[0] == "resolve":
            default = argv[3].split(",") if len(argv) > 3 and argv[3] else None
            result = resolve(argv[1], argv[2], default, allow_ptx_jit, ptxas)
            print(result if isinstance(result, str) else ",".join(result))
            return 0
        if len(argv) in (2, 3) and argv[0] == "gencode":
            print("\n".join(gencode_flags(parse(argv[1]), argv[2] if len(argv) == 3 else None)))  # type: ignore[arg-type]
            return 0
        if len(argv) == 3 and argv[0] == "assemble":  # the digits ptxas assembles, space-separated
            print(" ".join(_parse_one(a).digits for a in assembled(parse(argv[1]), argv[2], ptxas)))
            return 0
        if len(argv) == 2 and argv[0] == "supported":
            print(",".join(str(a) for a in supported_archs(argv[1])))
            return 0
    except ArchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        "usage: cuda_arch.py resolve LIST CUDA_VERSION [DEFAULT] [--allow-ptx-jit] [--ptxas VERSION] | "
        "gencode LIST [CUDA_VERSION] | assemble LIST CUDA_VERSION --ptxas VERSION | supported CUDA_VERSION",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
