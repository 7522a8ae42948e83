"""Pushing to a registry that speaks the Distribution token protocol, as Harbor, GitLab,
GHCR, Quay and the cloud registries do: Debian's docker-registry in token mode over TLS,
its token service written for the tests (token_service.py), with a CA of the tests' own.
The builder trusts it through certs.d, as the engine does for the registry; but dockerd on
the containerd image store fetches tokens trusting the system bundle only, so the pushes
run on an engine of the tests' own (engines.py) whose system bundle holds the CA, as a
user with a private CA sets theirs up. The main engine, without it, shows what such a
user meets first. A small image (the 21.08 base's root file system) is pushed: what is
tested is the conversation, not the bytes.

The digest `builder push` prints is compared with what a separate client reads: curl,
with a token it asked the token service for itself."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from pathlib import Path

import pytest

from builder import catalog
from builder.render.base_recipe import BaseRecipe

from .conftest import builder, docker, image_id
from .engines import second_engine
from .registries import token_registry
from .token_service import SERVICE

PASSWORD = "al1ce-t0ken-registry-pw"
IDENTITY_TOKEN = "idtok-4c1d-alice-refresh"


def policy(who: str | None, repo: str) -> set[str]:
    if repo.startswith("public/"):
        return {"pull"}
    if repo.startswith("anon/"):  # a project anyone may push to (the case that once failed its read-back)
        return {"pull", "push"}
    if who is None:
        return set()
    if repo.startswith("locked/"):
        return {"pull"}
    return {"pull", "push"}


@pytest.fixture(scope="module")
def token_reg(tmp_path_factory):
    with token_registry(
        tmp_path_factory.mktemp("token-registry"),
        {"alice": PASSWORD, "brief": PASSWORD},
        policy,
        refresh_tokens={IDENTITY_TOKEN: "alice"},
        lifetimes={"brief": 2},
    ) as (reg, service):
        yield reg, service


@pytest.fixture(scope="module")
def small_image(offline_base) -> str:
    """The 21.08 base's root file system (200 MB), which building the base leaves."""
    rootfs = BaseRecipe.for_release(catalog.load().get("21.08")).rootfs_image
    assert image_id(rootfs), f"{rootfs}: the base build keeps it"
    return rootfs


@pytest.fixture(scope="module")
def engine(token_reg, small_image, tmp_path_factory) -> dict[str, str]:
    """An engine of the tests' own (containerd image store, as the main one) whose system
    CA bundle holds the registry's CA, with the small image: its DOCKER_HOST."""
    reg, _ = token_reg
    bundle = tmp_path_factory.mktemp("ca-bundle") / "ca-certificates.crt"
    bundle.write_bytes(Path("/etc/ssl/certs/ca-certificates.crt").read_bytes() + b"\n" + reg.ca.read_bytes())
    with second_engine(
        {"features": {"containerd-snapshotter": True}}, in_host_netns=True, daemon_env={"SSL_CERT_FILE": str(bundle)}
    ) as env:
        moved = subprocess.run(
            f"docker save {small_image} | DOCKER_HOST={env['DOCKER_HOST']} docker load -q",
            shell=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert moved.returncode == 0, moved.stderr
        yield {"DOCKER_HOST": env["DOCKER_HOST"]}


@pytest.fixture
def docker_config(tmp_path, monkeypatch) -> Path:
    """A Docker client config of the test's own (empty: no credentials of the machine's)."""
    d = tmp_path / "docker-config"
    d.mkdir()
    (d / "config.json").write_text("{}")
    return d


@pytest.fixture
def env_with(docker_config, engine):
    """The environment of a command on the tests' engine with the test's Docker config."""

    def make(config: Path | None = None, **extra: str) -> dict[str, str]:
        return {**os.environ, **engine, "DOCKER_CONFIG": str(config or docker_config), **extra}

    return make


def curl_digest(reg, service, repo: str, tag: str, user: str | None = None) -> str:
    """The manifest digest as curl reads it, with a token curl asked for itself."""
    ca = str(reg.ca)
    auth = ["-u", f"{user}:{PASSWORD}"] if user else []
    got = subprocess.run(
        [
            "curl",
            "-sf",
            "--cacert",
            ca,
            *auth,
            "-G",
            service.realm,
            "--data-urlencode",
            f"service={SERVICE}",
            "--data-urlencode",
            f"scope=repository:{repo}:pull",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert got.returncode == 0, got.stderr
    token = json.loads(got.stdout)["token"]
    head = subprocess.run(
        [
            "curl",
            "-sfI",
            "--cacert",
            ca,
            "-H",
            f"Authorization: Bearer {token}",
            "-H",
            "Accept: application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json",
            f"https://{reg.host}/v2/{repo}/manifests/{tag}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert head.returncode == 0, head.stderr
    return re.search(r"^docker-content-digest:\s*(\S+)", head.stdout, re.I | re.M).group(1)


class ArgvWatch:
    """Every process's command line, sampled while a command runs: a secret must never be in one."""

    def __init__(self, secret: str) -> None:
        self.secret, self.seen, self._stop = secret.encode(), [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for proc in Path("/proc").glob("[0-9]*/cmdline"):
                try:
                    line = proc.read_bytes()
                except OSError:
                    continue
                if self.secret in line:
                    self.seen.append(line.replace(b"\0", b" ").decode(errors="replace"))
            self._stop.wait(0.05)

    def __enter__(self) -> ArgvWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def test_an_anonymous_push_the_registry_allows_is_read_back_with_an_anonymous_token(
    token_reg, small_image, docker_config, env_with
):
    """First of the pushes: once the engine has pushed these layers to a repository an
    anonymous token cannot read, it asks to mount them from there, and the registry
    refuses the whole request for want of that scope (insufficient_scope)."""
    reg, service = token_reg
    out = builder("push", small_image, "--registry", f"{reg.host}/anon", "--tag", "a1", env=env_with())
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().split("@")[1] == curl_digest(reg, service, "anon/debian-rootfs", "a1")
    assert any(i.who is None and i.grant == "anonymous" and i.granted for i in service.issued)


def test_a_user_pushes_to_a_three_level_path_and_curl_reads_the_same_digest(
    token_reg, small_image, docker_config, env_with
):
    reg, service = token_reg
    with ArgvWatch(PASSWORD) as argv:
        out = builder(
            "push",
            small_image,
            "--registry",
            f"{reg.host}/team/ml",
            "--tag",
            "t1",
            "--username",
            "alice",
            "--password-env",
            "REG_PW",
            env=env_with(REG_PW=PASSWORD),
        )
    assert out.returncode == 0, out.stderr
    ref, digest = out.stdout.strip().split("@")
    assert ref == f"{reg.host}/team/ml/debian-rootfs:t1"
    assert digest == curl_digest(reg, service, "team/ml/debian-rootfs", "t1", "alice")
    assert argv.seen == [] and PASSWORD not in out.stdout + out.stderr
    # the read-back asked the token service for a pull token as alice, her password as Basic
    ours = [i for i in service.issued if i.who == "alice" and i.asked == ["repository:team/ml/debian-rootfs:pull"]]
    assert ours and ours[-1].granted == [{"type": "repository", "name": "team/ml/debian-rootfs", "actions": ["pull"]}]


def test_a_scope_that_allows_pull_but_not_push_is_refused_in_one_line_and_moves_no_tag(
    token_reg, small_image, docker_config, env_with
):
    reg, _ = token_reg
    out = builder(
        "push",
        small_image,
        "--registry",
        f"{reg.host}/locked",
        "--tag",
        "l1",
        "--username",
        "alice",
        "--password-env",
        "REG_PW",
        env=env_with(REG_PW=PASSWORD),
    )
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith(
        f"error: registry {reg.host} refused the push of {reg.host}/locked/debian-rootfs:l1"
    ), out.stderr
    assert docker("image", "inspect", f"{reg.host}/locked/debian-rootfs:l1", env=env_with()).returncode != 0


def test_a_wrong_password_is_one_line_naming_the_user(token_reg, small_image, docker_config, env_with):
    reg, _ = token_reg
    out = builder(
        "push",
        small_image,
        "--registry",
        f"{reg.host}/team",
        "--tag",
        "w1",
        "--username",
        "alice",
        "--password-env",
        "REG_PW",
        env=env_with(REG_PW="not-her-password"),
    )
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "'alice'" in out.stderr and "not-her-password" not in out.stderr


def test_tokens_that_live_two_seconds_are_fetched_again_as_they_run_out(
    token_reg, small_image, docker_config, env_with
):
    reg, service = token_reg
    out = builder(
        "push",
        small_image,
        "--registry",
        f"{reg.host}/team/brief",
        "--tag",
        "b1",
        "--username",
        "brief",
        "--password-env",
        "REG_PW",
        env=env_with(REG_PW=PASSWORD),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().split("@")[1] == curl_digest(reg, service, "team/brief/debian-rootfs", "b1", "brief")
    assert len([i for i in service.issued if i.who == "brief"]) >= 2


def test_a_credential_helper_in_the_docker_config_is_used_and_no_secret_is_shown(
    token_reg, small_image, docker_config, env_with, tmp_path
):
    reg, service = token_reg
    bin_dir, calls = tmp_path / "bin", tmp_path / "helper-calls.log"
    bin_dir.mkdir()
    helper = bin_dir / "docker-credential-tfbtest"
    helper.write_text(
        "#!/bin/sh\n"
        f'read server\necho "$1 $server" >> {calls}\n'
        f'[ "$1" = get ] && printf \'%s\' \'{{"ServerURL": "\'$server\'", "Username": "alice", '
        f'"Secret": "{PASSWORD}"}}\'\n'
    )
    helper.chmod(0o755)
    (docker_config / "config.json").write_text(json.dumps({"credHelpers": {reg.host: "tfbtest"}}))
    env = env_with(PATH=f"{bin_dir}:{os.environ['PATH']}")
    with ArgvWatch(PASSWORD) as argv:
        out = builder("push", small_image, "--registry", f"{reg.host}/team/helper", "--tag", "h1", env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().split("@")[1] == curl_digest(reg, service, "team/helper/debian-rootfs", "h1", "alice")
    assert calls.read_text().split("\n")[0] == f"get {reg.host}"
    assert argv.seen == [] and PASSWORD not in out.stdout + out.stderr + calls.read_text()


def test_an_identity_token_in_the_docker_config_is_traded_for_tokens(token_reg, small_image, docker_config, env_with):
    reg, service = token_reg
    (docker_config / "config.json").write_text(json.dumps({"auths": {reg.host: {"identitytoken": IDENTITY_TOKEN}}}))
    out = builder("push", small_image, "--registry", f"{reg.host}/team/idtok", "--tag", "i1", env=env_with())
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().split("@")[1] == curl_digest(reg, service, "team/idtok/debian-rootfs", "i1", "alice")
    assert any(i.grant == "refresh_token" and i.who == "alice" for i in service.issued)
    assert IDENTITY_TOKEN not in out.stdout + out.stderr


def test_the_pushed_image_is_read_by_docker_from_the_token_registry(token_reg, small_image, docker_config, env_with):
    """The engine itself, pulling after a login: what was pushed is what is served."""
    reg, _ = token_reg
    ref = f"{reg.host}/team/ml/debian-rootfs:t1"
    env = env_with()
    login = subprocess.run(
        ["docker", "login", "-u", "alice", "--password-stdin", reg.host],
        input=PASSWORD,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert login.returncode == 0, login.stderr
    docker("rmi", ref, env=env)
    pulled = docker("pull", "-q", ref, env=env)
    assert pulled.returncode == 0, pulled.stderr
    ids = [docker("image", "inspect", "--format", "{{.Id}}", r, env=env).stdout.strip() for r in (ref, small_image)]
    assert ids[0] == ids[1] and ids[0]


def test_the_main_engine_without_the_ca_in_its_bundle_is_told_what_to_do(token_reg, small_image, docker_config):
    """What a user with a private CA in certs.d only meets on the containerd store: the
    engine cannot fetch a token; one line, exit 2, saying where the CA must go."""
    reg, _ = token_reg
    out = builder(
        "push",
        small_image,
        "--registry",
        f"{reg.host}/team",
        "--tag",
        "m1",
        "--username",
        "alice",
        "--password-env",
        "REG_PW",
        env={**os.environ, "DOCKER_CONFIG": str(docker_config), "REG_PW": PASSWORD},
    )
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "token service" in out.stderr and "update-ca-certificates" in out.stderr, out.stderr
    assert image_id(f"{reg.host}/team/debian-rootfs:m1") is None
