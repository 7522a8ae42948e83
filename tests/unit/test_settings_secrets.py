"""The builder's BuildKit mounts. Corporate settings as secrets: the wrapper reads them
from its mount directory, every RUN that calls the wrapper mounts them, a build on the
BuildKit backend hands them over as secret files, never as build arguments. nvbuild.sh's
local compile cache: every RUN of nvbuild.sh mounts it. The legacy builder gets the same
Dockerfile without the builder's mounts (and the settings over loopback)."""

import functools
import os
import stat
import subprocess
from pathlib import Path

import pytest

from builder.catalog import load
from builder.core import contract, paths
from builder.engine import ProgressMode, buildsettings, legacy_dockerfile, without_builder_mounts
from builder.engine.buildsettings import BuildSettings
from builder.render import RenderOptions, render
from tests.unit.dockerfile_lexer import instructions
from tests.unit.fake_engine import FakeEngine

WRAPPER = paths.templates_dir() / "with-build-settings"
SOURCES = (
    "deb http://deb.debian.org/debian bookworm main\ndeb http://deb.debian.org/debian-security bookworm-security main\n"
)
# the wrapper's outputs, which this machine may set for itself (pip through the proxy)
HOST_ENV = {
    k: v
    for k, v in os.environ.items()
    if k not in ("PIP_INDEX_URL", "PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "APT_CONFIG")
}
PEM = "-----BEGIN CERTIFICATE-----\nSECRETCAUNIQUE\n-----END CERTIFICATE-----\n"


def wrapper(secrets_dir: Path, command: str, url: str = "") -> subprocess.CompletedProcess:
    sources = secrets_dir.parent / "sources.list"
    sources.write_text(SOURCES)
    return subprocess.run(
        ["bash", str(WRAPPER), "bash", "-c", command],
        capture_output=True,
        text=True,
        timeout=30,
        env={
            **HOST_ENV,
            "BUILD_SETTINGS": url,
            "WITH_BUILD_SETTINGS_DIR": str(secrets_dir),
            "WITH_BUILD_SETTINGS_SOURCES": str(sources),
        },
    )


def test_the_wrapper_uses_mounted_secrets_and_keeps_nothing(tmp_path):
    mounted = tmp_path / "run-builder-settings"
    mounted.mkdir()
    files = BuildSettings(
        apt_mirror="http://mirror.corp/debian",
        pip_index="https://u:s3cret@pypi.corp/simple",
        ca_bundles=(tmp_path / "corp.pem",),
    )
    (tmp_path / "corp.pem").write_text(PEM)
    for name, data in files.files().items():
        if name in contract.SETTINGS_SECRETS:
            (mounted / name).write_bytes(data)
    # A dead BUILD_SETTINGS URL as well: mounted secrets win, the server is never asked.
    out = wrapper(
        mounted,
        'echo "$PIP_INDEX_URL"; grep -c SECRETCAUNIQUE "$PIP_CERT"; '
        'cat "$(dirname "$APT_CONFIG")/sources.list"; dirname "$APT_CONFIG"',
        url="http://127.0.0.1:1",
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == ["https://u:s3cret@pypi.corp/simple", "1"]
    assert lines[2:4] == [
        "deb http://mirror.corp/debian bookworm main",
        "deb http://deb.debian.org/debian-security bookworm-security main",
    ]
    assert not Path(lines[-1]).exists()


def test_secrets_work_without_a_build_settings_argument(tmp_path):
    """A user's own Dockerfile with the secrets and no `ARG BUILD_SETTINGS` (the wrapper runs
    with `set -u`)."""
    mounted = tmp_path / "m"
    mounted.mkdir()
    (mounted / "pip-index").write_text("https://pypi.corp/simple\n")
    env = {k: v for k, v in HOST_ENV.items() if k != "BUILD_SETTINGS"}
    out = subprocess.run(
        ["bash", str(WRAPPER), "bash", "-c", 'echo "[$PIP_INDEX_URL]"'],
        capture_output=True,
        text=True,
        timeout=30,
        env={**env, "WITH_BUILD_SETTINGS_DIR": str(mounted)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[https://pypi.corp/simple]"


def test_only_the_mounted_settings_are_used(tmp_path):
    mounted = tmp_path / "m"
    mounted.mkdir()
    (mounted / "pip-index").write_text("https://pypi.corp/simple\n")
    out = wrapper(mounted, 'echo "[$PIP_INDEX_URL] [${PIP_CERT:-}] [${APT_CONFIG:-}]"')
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[https://pypi.corp/simple] [] []"


def test_without_secrets_or_url_the_command_runs_as_it_is(tmp_path):
    out = wrapper(tmp_path / "absent", 'echo "[${PIP_INDEX_URL:-}]"; exit 4')
    assert out.returncode == 4 and out.stdout.strip() == "[]"


@functools.lru_cache(maxsize=1)  # the same renders for every test here
def rendered_dockerfiles() -> list[tuple[str, str]]:
    """Every template's Dockerfile: the committed release ones (a test keeps them in step),
    each release's offline base, a derived one with packages, the user example."""
    from builder.plan import derive
    from builder.render.base_recipe import BaseRecipe

    root = paths.project_root()
    out = [(str(p), p.read_text()) for p in sorted(root.glob("dockerfiles/*/*.Dockerfile"))]
    out += [(f"base {r.name}", BaseRecipe(r.offline).dockerfile()) for r in load().releases.values()]
    spec = derive.DeriveSpec(parent="p:1", apt=["jq"], pip=["tabulate"])
    out.append(("derived", derive.render(spec, "p:1", "sha256:" + "a" * 64, {})))
    rel = load().get("21.08")
    r = render(rel, rel.variant("tf2-py3"), RenderOptions(offline_base_image=BaseRecipe(rel.offline).tag))
    out += [(name, text) for name, text in r.files.items() if name.startswith("docker-examples/Dockerfile.")]
    return out


def runs(text: str) -> list[str]:
    """The RUN instructions' arguments (continuations joined as Docker joins them)."""
    return [i.args for i in instructions(text) if i.cmd == "RUN"]


def runs_calling(needle: str) -> list[tuple[str, str]]:
    """(Dockerfile, RUN arguments) of every RUN in every rendered Dockerfile that calls NEEDLE."""
    return [(name, args) for name, text in rendered_dockerfiles() for args in runs(text) if needle in args]


def test_every_run_that_calls_the_wrapper_mounts_the_settings():
    found = runs_calling("with-build-settings ")
    assert len(found) >= len(rendered_dockerfiles())
    for name, args in found:
        assert args.startswith(contract.settings_mounts() + " "), (name, args[:120])


def test_every_nvbuild_run_mounts_the_local_compile_cache():
    found = runs_calling("./nvbuild.sh")
    # every release Dockerfile compiles (twice with Horovod); a runtime image compiles nothing
    devel = {
        p.name
        for p in paths.project_root().glob("dockerfiles/*/*.Dockerfile")
        if not p.name.endswith(".runtime.Dockerfile")
    }
    assert len(found) >= len(devel)
    for name, args in found:
        assert contract.compile_cache_mount() + " ./nvbuild.sh" in args, (name, args[:160])


def test_the_legacy_builder_gets_the_dockerfile_without_the_mounts():
    for name, text in rendered_dockerfiles():
        legacy = without_builder_mounts(text)
        assert "--mount" not in legacy, name
        # Nothing else changed: the same instructions once the mounts are taken out.
        ours = [
            (i.cmd, i.args.replace(contract.settings_mounts(), "").replace(contract.compile_cache_mount(), "").strip())
            for i in instructions(text)
        ]
        assert ours == [(i.cmd, i.args.strip()) for i in instructions(legacy)], name


def test_a_user_mount_is_left_to_the_legacy_builder_to_refuse():
    text = "FROM x\nRUN --mount=type=secret,id=corp,target=/run/corp true\n"
    assert without_builder_mounts(text) == text


def test_legacy_dockerfile_copy_is_removed_after(tmp_path):
    (tmp_path / "Dockerfile").write_text(f"FROM x\nRUN {contract.settings_mounts()} \\\n    true\n")
    with legacy_dockerfile(tmp_path) as name:
        assert Path(name).is_absolute() and "--mount" not in Path(name).read_text()
    assert not Path(name).exists()
    (tmp_path / "Dockerfile").write_text("FROM x\nRUN true\n")
    with legacy_dockerfile(tmp_path) as name:
        assert name == "Dockerfile"


def test_buildkit_delivery_is_secret_files_that_vanish(tmp_path):
    (tmp_path / "corp.pem").write_text(PEM)
    settings = BuildSettings(apt_mirror="http://mirror.corp/debian", ca_bundles=(tmp_path / "corp.pem",))
    with buildsettings.deliver(settings, "buildkit") as delivery:
        assert delivery.url is None
        assert sorted(delivery.secrets) == ["builder-apt-mirror", "builder-ca.crt"]
        path = delivery.secrets["builder-ca.crt"]
        assert PEM in path.read_text()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not path.exists() and not path.parent.exists()


def test_no_settings_deliver_nothing():
    for backend in ("buildkit", "legacy"):
        with buildsettings.deliver(BuildSettings(), backend) as delivery:
            assert delivery.url is None and delivery.secrets == {}


@pytest.mark.parametrize("backend", ["buildkit", "legacy"])
def test_a_derive_hands_settings_over_the_backends_way(tmp_path, monkeypatch, backend):
    from builder import catalog, image
    from builder.core.contract import Label
    from builder.plan import derive

    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "cache"))
    engine = FakeEngine()
    engine.backend = backend
    engine.add_image("local/parent:1", labels={Label.RELEASE: "21.08", Label.VARIANT: "tf2-py3"})
    seen = {}

    def capture(request, progress=None):
        seen["request"] = request
        seen["files"] = {k: Path(v).read_text() for k, v in request.secrets.items()}
        return FakeEngine.build(engine, request, progress)

    engine.build = capture
    spec = derive.DeriveSpec(parent="local/parent:1", apt=["jq"])
    job = derive.job(
        spec,
        "local/parent:1",
        engine.inspect("local/parent:1"),
        catalog.load(),
        "me/tf:1",
        "derive-me_tf_1.log",
        compile_cache=None,
        no_cache=False,
    )
    image.build(engine, job, BuildSettings(pip_index="https://pypi.corp/simple"), progress=ProgressMode.QUIET)
    request = seen["request"]
    if backend == "buildkit":
        assert seen["files"] == {"builder-pip-index": "https://pypi.corp/simple\n"}
        assert request.buildargs["BUILD_SETTINGS"] == "" and request.network_mode is None
    else:
        assert request.secrets == {} and request.buildargs["BUILD_SETTINGS"].startswith("http://127.0.0.1:")
        assert request.network_mode == "host"
