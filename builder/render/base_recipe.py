"""The offline base recipe of a release, rendered purely, and the tag derived from it.

The tag carries a hash of everything that decides the image (the rendered recipe and
the root file system it starts from), so asking for the same base again finds it
and a changed recipe gives a new tag.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from types import SimpleNamespace

from builder.catalog import OfflineBase, Release
from builder.catalog.policy import cuda_from_wheels
from builder.core import layer_cache, paths
from builder.render.job import FilesContext, ImageJob
from builder.render.templating import template_env

BASE_REPOSITORY = "local/cuda-base"
ROOTFS_REPOSITORY = "local/debian-rootfs"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# nvcc 11.8 accepts host compilers up to GCC 11; bookworm's default is GCC 12. trixie's
# toolkit is CUDA 12.4, which accepts up to GCC 13 (its default g++ 14 fails in
# libstdc++-14's headers even with -allow-unsupported-compiler: docs/explanation/release-26.11.md).
HOST_COMPILER = {"bullseye": ("g++", None), "bookworm": ("g++ g++-11", "g++-11"), "trixie": ("g++ g++-13", "g++-13")}
# trixie's nvidia-cuda-dev also accepts this name for the driver library it depends on.
EXTRA_DRIVER_PROVIDES = {"trixie": ("libcuda-12.4-1",)}


def host_compiler(debian: str) -> tuple[list[str], str | None]:
    """(the host compiler's packages, the g++ nvcc must be told to use or None) for a suite."""
    packages, ccbin = HOST_COMPILER.get(debian, ("g++", None))
    return packages.split(), ccbin


@dataclass(frozen=True)
class BaseRecipe:
    """The recipe of one offline base. Corporate settings are not part of it: they
    change how packages are fetched, not what is built, so they do not change the tag."""

    offline: OfflineBase
    # no CUDA toolkit: the devel stage installs it above the Python layers (cuda_from_wheels)
    bare: bool = False

    @classmethod
    def for_release(cls, release: Release) -> BaseRecipe:
        return cls(release.offline, bare=cuda_from_wheels(release))

    @property
    def rootfs_image(self) -> str:
        return f"{ROOTFS_REPOSITORY}:{self.offline.debian}"

    def _render(self, recipe_id: str) -> str:
        packages, ccbin = host_compiler(self.offline.debian)
        env = template_env()
        base = SimpleNamespace(
            debian=self.offline.debian,
            cuda=self.offline.cuda,
            python=self.offline.python,
            rootfs_image=self.rootfs_image,
            host_compiler_packages=packages,
            nvcc_ccbin=ccbin,
            recipe_id=recipe_id,
            bare=self.bare,
            extra_provides=EXTRA_DRIVER_PROVIDES.get(self.offline.debian, ()),
        )
        return env.get_template("base/Dockerfile.j2").render(base=base)

    @functools.cached_property  # a render and a hash: asked for on every tag lookup
    def recipe_id(self) -> str:
        """Hash of everything that decides the image: the recipe and the files it copies."""
        h = hashlib.sha256(self._render("").encode())
        h.update((paths.templates_dir() / "with-build-settings").read_bytes())
        return h.hexdigest()[:12]

    @property
    def tag(self) -> str:
        o = self.offline
        return f"{BASE_REPOSITORY}:{o.debian}-cuda{o.cuda}-py{o.python}-{self.recipe_id}"

    def dockerfile(self) -> str:
        return self._render(self.recipe_id)

    def files_context(self) -> FilesContext:
        """The base's build context: the recipe's Dockerfile and the settings wrapper it copies in."""
        return FilesContext(
            {"Dockerfile": self.dockerfile()}, {"with-build-settings": paths.templates_dir() / "with-build-settings"}
        )

    def job(self) -> ImageJob:
        """The base's image job: its files context; nothing to read back (it holds no
        framework yet), tagged by its recipe."""
        return ImageJob(
            "base",
            self.files_context(),
            f"base-{self.tag.split(':')[-1]}.log",
            cache_key=layer_cache.base_name(self.tag),
            refs=(self.tag,),
        )
