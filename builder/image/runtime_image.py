"""The runtime image of a release variant (`builder build --runtime`): the `runtime` stage
of the variant's layered Dockerfile (templates/Dockerfile.j2): the base, Python and the
locked wheels (the `core` stage the devel image stands on too, layer for layer) plus what
nvbuild.sh built, its entrypoint, examples, environment and labels, without the compiler
toolchain or the CUDA toolkit. Built after the devel image from the same render (plan.py
makes its job), read back like it (image.py), then tagged `<tag>-runtime`. Here: its
names, and the probes its read-back runs.

Only a release whose every CUDA library TensorFlow loads comes from NVIDIA's wheels can
have one (policy.why_no_runtime_image).
"""

from __future__ import annotations

from builder.core.errors import BuildError

# what a runtime image must not hold (found on PATH in a container of it)
TOOLCHAIN = ("nvcc", "gcc", "g++", "cc", "c++", "make", "cuobjdump")
SUFFIX = "-runtime"
STAGE = "runtime"


def refs_for(devel_refs: list[str] | tuple[str, ...]) -> list[str]:
    return [f"{ref}{SUFFIX}" for ref in devel_refs]


def toolchain_found(engine, image: str) -> list[str]:
    """The compilers and CUDA tools on the image's PATH (none, in a runtime image)."""
    script = "for t in " + " ".join(TOOLCHAIN) + '; do command -v "$t" || true; done'
    code, out = engine.run_capture(image, ["/bin/sh", "-c", script], stdout_only=True, timeout=120)
    if code != 0:
        raise BuildError(
            f"{image}: could not look for a compiler in the runtime image (exit {code})", step="read-back check"
        )
    return [line for line in out.split() if line]


def extension_library(engine, image: str) -> str | None:
    """The extension's shared library in IMAGE, or None when it has none."""
    code, out = engine.run_capture(
        image, ["python3", "-c", "import tfext.sysconfig as s; print(s.get_library())"], stdout_only=True, timeout=300
    )
    return out.strip().splitlines()[-1] if code == 0 and out.strip() else None


def file_digest(engine, image: str, path: str) -> str:
    code, out = engine.run_capture(image, ["sha256sum", path], stdout_only=True, timeout=120)
    return out.split()[0] if code == 0 and out.split() else f"unreadable ({code})"
