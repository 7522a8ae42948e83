"""JupyterLab's conformance tests: the catalog's version installed and labelled; `jupyter
lab` serves /workspace on $JUPYTER_PORT with the token the container is given and refuses
anonymous requests; with a password it serves who logs in with it, and no one else; with no
token or password it makes a random one."""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import shlex

import pytest

from builder.components.conformance import check_installed_and_labelled, tool_held, wait_for_http
from builder.components.jupyter import Jupyter
from builder.core.contract import InImage


@pytest.fixture(scope="module")
def jupyter(report, release_data, labels):
    return tool_held(Jupyter, report, release_data, labels)


def test_jupyterlab_is_the_catalogs_and_labelled(jupyter, release_data, labels, report):
    check_installed_and_labelled(Jupyter, jupyter, release_data, labels, report)


@contextlib.contextmanager
def jupyter_lab(host, env: str, cwd: str = InImage.WORKSPACE):
    """`jupyter lab` started in the container with ENV (`env` arguments), its log's path
    without the suffix yielded; stopped at the end."""
    run = f"/tmp/jupyter-{secrets.token_hex(4)}"
    host.run(f"sh -c 'cd {cwd} && env {env} jupyter lab > {run}.log 2>&1 & echo $! > {run}.pid'")
    try:
        yield run
    finally:
        host.run(f"kill $(cat {run}.pid)")


def test_jupyterlab_starts_on_its_port_with_the_token_from_the_environment(jupyter, host, image_env):
    port = image_env["JUPYTER_PORT"]
    token = secrets.token_hex(16)
    with jupyter_lab(host, f"JUPYTER_TOKEN={token}"):
        status = json.loads(wait_for_http(host, f"http://127.0.0.1:{port}/api/status?token={token}"))
        assert "started" in status, status
        contents = json.loads(wait_for_http(host, f"http://127.0.0.1:{port}/api/contents?token={token}"))
        assert {c["name"] for c in contents["content"]} >= {"nvidia-examples", "docker-examples"}
        anonymous = (
            "import urllib.request, urllib.error\ntry:\n"
            f"    urllib.request.urlopen('http://127.0.0.1:{port}/api/contents'); print('open')\n"
            "except urllib.error.HTTPError as e:\n    print(e.code)"
        )
        assert host.run(f"python3 -c {shlex.quote(anonymous)}").stdout.strip() == "403"


# In the container: /login's form (its _xsrf cookie), then the API with the session cookie
# a right password gets; a wrong one gets a 401 and no session. Prints "<wrong> <right>" status codes.
LOGIN = """
import http.cookiejar, json, sys, time, urllib.parse, urllib.request
base = 'http://127.0.0.1:%s' % sys.argv[1]
def session(password):
    jar = http.cookiejar.CookieJar()
    web = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    web.open(base + '/login', timeout=5).read()
    xsrf = next(c.value for c in jar if c.name == '_xsrf')
    form = urllib.parse.urlencode({'_xsrf': xsrf, 'password': password}).encode()
    try:
        web.open(base + '/login', form, timeout=5).read()
    except urllib.error.HTTPError:  # a wrong password: 401, and no session
        pass
    try:
        return web.open(base + '/api/contents', timeout=5).status
    except urllib.error.HTTPError as e:
        return e.code
for _ in range(180):
    try:
        urllib.request.urlopen(base + '/login', timeout=5); break
    except Exception:
        time.sleep(0.5)
print(session('not-' + sys.argv[2]), session(sys.argv[2]))
"""


def test_jupyterlab_serves_who_logs_in_with_the_password_from_the_environment(jupyter, host, image_env):
    port = image_env["JUPYTER_PORT"]
    password = secrets.token_hex(8)
    with jupyter_lab(host, f"-u JUPYTER_TOKEN JUPYTER_PASSWORD={password}") as run:
        out = host.run(f"python3 -c {shlex.quote(LOGIN)} {port} {password}")
        assert out.rc == 0, out.stderr[-2000:] + host.file(f"{run}.log").content_string[-2000:]
        assert out.stdout.split() == ["403", "200"], out.stdout


def test_jupyterlab_without_a_token_makes_its_own(jupyter, host, image_env):
    """No JUPYTER_TOKEN or JUPYTER_PASSWORD: jupyter makes a random token, never a fixed one."""
    port = image_env["JUPYTER_PORT"]
    with jupyter_lab(host, "-u JUPYTER_TOKEN -u JUPYTER_PASSWORD", cwd="/") as run:
        found = host.run(f"for i in $(seq 120); do grep -o 'token=[0-9a-f]*' {run}.log && break; sleep 0.5; done")
        token = found.stdout.split("token=")[-1].strip()
        assert re.fullmatch(r"[0-9a-f]{32,}", token), host.file(f"{run}.log").content_string[-2000:]
        status = json.loads(wait_for_http(host, f"http://127.0.0.1:{port}/api/status?token={token}"))
        assert "started" in status
