"""Corporate build settings (apt mirror, pip index, extra CA bundle), read by the
in-image `with-build-settings` wrapper for one RUN and deleted after it.

Build args end up in image history, so on BuildKit the settings are secrets (deliver()).
The legacy builder has no secret mounts: for it they are served over loopback instead,
the build runs on the host network, and the wrapper fetches them.

One small daemon per state directory (user, BUILDER_CACHE_DIR) serves every concurrent
build on a port of its own, recorded in the state directory; each distinct set of
settings lives under an unguessable path derived from its hash, so the URL a build sees
(and with it every layer's cache key) is the same each time the same settings are used. A build
holds a shared lock on its settings while it runs; the daemon deletes settings nobody
holds (secrets included) and exits when it has none left.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from builder.core import layer_cache, urls
from builder.core.contract import SETTINGS_SECRETS, settings_secret_id
from builder.core.errors import UserError
from builder.core.redact import redact
from builder.core.urls import URL
from builder.core.userfiles import MAX_CA_BUNDLE, read_user_text, shown
from builder.engine import COMPRESSIONS
from builder.engine.settings_server import serve_settings

# What this machine trusts; builds trust it too unless --no-host-ca.
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


def read_ca_bundle(path: Path) -> str:
    """The PEM text of one --ca-bundle file (what is delivered and what --bake-ca installs),
    read through the one reader of users' files: a regular UTF-8 file of at most 8 MiB."""
    text = read_user_text(path, "--ca-bundle", MAX_CA_BUNDLE)
    if "BEGIN CERTIFICATE" not in text:
        raise UserError(f"--ca-bundle {shown(path)}: not a PEM certificate bundle")
    return text


@dataclass(frozen=True)
class BackendAsks:
    """What the build-settings options ask of the build backend: each only BuildKit does."""

    layer_cache: str | None = None  # --layer-cache: BuildKit's registry cache
    builder: str | None = None  # --builder: another buildx builder
    compression: str = "gzip"  # --compression zstd: BuildKit's exporter


@dataclass(frozen=True)
class BuildSettings:
    apt_mirror: str | None = None
    pip_index: str | None = None
    ca_bundles: tuple[Path, ...] = field(default_factory=tuple)
    layer_cache: str | None = None  # a registry repository (builder/core/layer_cache.py); not delivered into builds
    builder: str | None = None  # a buildx builder to build on (None: the engine's own)
    compression: str = "gzip"  # of the image's layers (builder/engine/buildx.py: output)

    def cache_ref(self, name: str) -> str | None:
        """The layer cache's reference for the image called NAME, when there is a cache."""
        return layer_cache.ref_for(self.layer_cache, name) if self.layer_cache else None

    def __bool__(self) -> bool:  # is there anything to deliver into the build?
        return bool(self.apt_mirror or self.pip_index or self.ca_bundles)

    def validate(self) -> None:
        for url, what in ((self.apt_mirror, "--apt-mirror"), (self.pip_index, "--pip-index")):
            # Whole-string grammar (credentials, percent-encoded, allowed here: the command
            # line refuses them before they get this far).
            if url is not None and not URL.fullmatch(url):
                raise UserError(f"{what} {redact(url)[:100]!r} is not an http:// or https:// URL")
        for path in self.ca_bundles:
            read_ca_bundle(path)

    def files(self) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        # One value per file, one line each: the wrapper reads them with `read -r`, never
        # sources or evaluates them.
        if self.apt_mirror:
            out["apt-mirror"] = (self.apt_mirror.rstrip("/") + "\n").encode()
        if self.pip_index:
            out["pip-index"] = (self.pip_index + "\n").encode()
        if self.ca_bundles:
            out["ca.crt"] = "\n".join(read_ca_bundle(p) for p in self.ca_bundles).encode()
        out["index"] = ("\n".join(sorted(out)) + "\n").encode()
        return out

    def digest(self) -> str:
        h = hashlib.sha256()
        for name, data in sorted(self.files().items()):
            h.update(name.encode() + b"\0" + data + b"\0")
        return h.hexdigest()[:16]


def _cache_repository(repo: str | None) -> str | None:  # from_options' parameter hides the module
    return layer_cache.check(repo) if repo else None


def _check_reachable(repo: str) -> None:
    layer_cache.check_reachable(repo)


def from_options(
    apt_mirror: str | None,
    pip_index: str | None,
    ca_bundles,
    host_ca: bool = False,
    credentials=(None, None, None, None),
    layer_cache: str | None = None,
    builder: str | None = None,
    compression: str = "gzip",
) -> BuildSettings:
    """The build settings of the shared options; mirror and index credentials come from a
    file or an environment variable (never argv) and are put into the URLs the build sees."""
    apt_file, apt_env, pip_file, pip_env = credentials
    given = {}
    for url, what, file, env in (
        (apt_mirror, "--apt-mirror", apt_file, apt_env),
        (pip_index, "--pip-index", pip_file, pip_env),
    ):
        creds = urls.read_credentials(file, env, what)
        if url is None:
            if creds is not None:
                raise UserError(f"{what}-credentials-file/-env go with {what} URL")
            continue
        urls.check_url(
            url,
            what,
            f"give them with {what}-credentials-file FILE or {what}-credentials-env NAME (one line USER:PASSWORD)",
        )
        given[what] = urls.with_credentials(url, creds)
    bundles = list(ca_bundles or ())
    if host_ca and HOST_CA_BUNDLE.is_file() and HOST_CA_BUNDLE not in bundles:
        bundles.append(HOST_CA_BUNDLE)
    if compression not in COMPRESSIONS:
        raise UserError(f"--compression {compression[:20]!r}: use one of {', '.join(COMPRESSIONS)}")
    settings = BuildSettings(
        apt_mirror=given.get("--apt-mirror"),
        pip_index=given.get("--pip-index"),
        ca_bundles=tuple(bundles),
        layer_cache=_cache_repository(layer_cache),
        builder=builder,
        compression=compression,
    )
    settings.validate()
    if settings.layer_cache:
        _check_reachable(settings.layer_cache)
    return settings


@dataclass(frozen=True)
class Delivery:
    """How one build gets its settings: BuildKit secret files (id -> path), or, for the
    legacy builder, the loopback URL (BUILD_SETTINGS, which needs the host network)."""

    url: str | None = None
    secrets: dict[str, Path] = field(default_factory=dict)

    def network_mode(self, compile_cache: str | None = None) -> str | None:
        """ "host" when the build must reach this machine's loopback (the legacy builder's
        settings URL, a compile cache on loopback), else None: the default network, whose
        steps share their cache keys with every other build's (BuildKit keys a RUN by its
        network mode too)."""
        return "host" if self.url or urls.on_loopback(compile_cache) else None


@contextmanager
def deliver(settings: BuildSettings, backend: str) -> Iterator[Delivery]:
    """The settings for one build while the block runs. BuildKit: each file as a secret in
    a private temporary directory, removed afterwards (only ids and paths reach buildx's
    argv; nothing reaches a build argument, so nothing reaches image history). Legacy
    builder: served on loopback (settings_server.serve_settings())."""
    import tempfile

    if not settings:
        yield Delivery()
        return
    if backend != "buildkit":
        with serve_settings(settings) as url:
            yield Delivery(url=url)
        return
    with tempfile.TemporaryDirectory(prefix="tfbuilder-settings-") as tmp:  # mode 0700
        found: dict[str, Path] = {}
        for name, data in settings.files().items():
            if name in SETTINGS_SECRETS:
                path = Path(tmp) / name
                path.touch(mode=0o600)
                path.write_bytes(data)
                found[settings_secret_id(name)] = path
        yield Delivery(secrets=found)
