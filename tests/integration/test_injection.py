"""Hostile ENV and LABEL values on a real engine: a tiny image FROM the local Debian root
file system (no release image needed), its Dockerfile written by builder/core/quoting.py. The
values come back byte-identical from `docker inspect` and from a file a RUN line wrote,
and nothing they hold ran: no extra instruction, no file made by an injected command.
Run alone: `python3 -m pytest tests/integration/test_injection.py` (about a minute)."""

import json
import os
import uuid

import pytest

from builder.core import grammar, quoting

from .conftest import docker, run

BASE = "local/debian-rootfs:bullseye"
REPO = os.environ.get("INJECTION_TEST_REPO", "itest/injection")

ACCEPTED = [
    '"; touch /pwned-1; echo "',
    "$(touch /pwned-2)",
    "`touch /pwned-3`",
    "${PATH} $HOME $",
    "\\",
    '\\\\"\\$',
    "# RUN touch /pwned-4",
    "' && touch /pwned-5 && '",
    "a \\",
    "x\\ RUN touch /pwned-6",
    "&;|<>",
    "../../etc/passwd",
    "tab\there",
    "é ü \xa0 ünïcødé",
    "=",
    " leading and trailing ",
    "",
    "a" * 5000,
]
REFUSED = [
    "a\nRUN touch /pwned-7",
    "a\rb",
    "nul\x00byte",
    "\x1b[2J",
    "\\\nRUN touch /pwned-8",
    "\udc80",
    "a\u2028b",
    "a\x85b",
    "\x9b2J",
]  # C1 controls and separators end a line or drive a terminal too


@pytest.fixture
def image_tag():
    ref = f"{REPO}:{uuid.uuid4().hex[:8]}"
    yield ref
    docker("rmi", "-f", ref)


def _dockerfile(values):
    names = [f"V{i}" for i in range(len(values))]
    env = " \\\n    ".join(f"{n}={quoting.dockerfile_string(v)}" for n, v in zip(names, values))
    labels = " \\\n      ".join(f"com.example.v{i}={quoting.dockerfile_string(v)}" for i, v in enumerate(values))
    words = " ".join(quoting.shell_word(v) for v in values)
    return (f"FROM {BASE}\nENV {env}\nLABEL {labels}\nRUN printf '%s\\0' {words} > /values\n"), names


def test_refused_values_never_reach_a_dockerfile():
    for value in REFUSED:
        for write in (quoting.dockerfile_string, quoting.shell_word):
            with pytest.raises(quoting.QuotingError):
                write(value)
        assert not grammar.TEXT.fullmatch(value)


def test_hostile_values_come_back_byte_identical(tmp_path, image_tag):
    if docker("image", "inspect", BASE).returncode != 0:
        pytest.fail(f"{BASE} is missing: `builder base` (or scripts/setup.sh) imports it")
    text, names = _dockerfile(ACCEPTED)
    (tmp_path / "Dockerfile").write_text(text, encoding="utf-8")
    out = run(
        "docker", "build", "-q", "-t", image_tag, str(tmp_path), timeout=600, env={**os.environ, "DOCKER_BUILDKIT": "0"}
    )  # the legacy builder, as docker-py drives it
    assert out.returncode == 0, out.stderr

    config = json.loads(docker("image", "inspect", "--format", "{{json .Config}}", image_tag).stdout)
    env = dict(e.split("=", 1) for e in config["Env"])
    assert [env[n] for n in names] == ACCEPTED
    assert [config["Labels"][f"com.example.v{i}"] for i in range(len(ACCEPTED))] == ACCEPTED

    # The shell words: printed back exactly by the RUN line, and nothing in them ran.
    values = run("docker", "run", "--rm", "--entrypoint", "cat", image_tag, "/values")
    assert values.stdout.encode("utf-8", "surrogateescape").split(b"\0")[:-1] == [v.encode() for v in ACCEPTED]
    pwned = docker("run", "--rm", "--entrypoint", "sh", image_tag, "-c", "ls / | grep -c pwned || true")
    assert pwned.stdout.strip() == "0"

    # Exactly the three instructions written: FROM's history plus ENV, LABEL and RUN.
    base_layers = len(docker("history", "-q", BASE).stdout.split())
    assert len(docker("history", "-q", image_tag).stdout.split()) == base_layers + 3
