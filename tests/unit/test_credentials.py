"""Credentials: never from argv, always redacted; URLs checked against one whole-string
grammar; the in-image wrapper reads settings as data, whatever the server sends."""

from __future__ import annotations

import functools
import http.server
import os
import string
import subprocess
import threading

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from builder.cli import main as cli
from builder.core import paths, urls
from builder.core.errors import BuildError, UserError
from builder.core.redact import redact, register_secret
from builder.core.terminal import say
from builder.engine import BuildRequest, DockerEngine, ProgressMode, buildsettings

WRAPPER = paths.templates_dir() / "with-build-settings"
HOSTILE = ["'", '"', "$", "`", " ", "\n", "\r", "\0", "#", "?", "&", ";", "\\", "(", ")", "<", ">", "|", "\t", "\x7f"]


# --- the URL grammar -------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://deb.debian.org/debian",
        "https://pypi.corp:8443/simple/",
        "http://127.0.0.1:8742/ccache",
        "https://[::1]:5000/a%20b/c~d",
    ],
)
def test_plain_urls_pass(url):
    assert urls.check_url(url, "--pip-index", "hint") == url


@settings(max_examples=2000)
@given(
    prefix=st.text(alphabet=string.ascii_letters + "/.", max_size=20),
    bad=st.sampled_from(HOSTILE),
    suffix=st.text(max_size=20),
)
def test_any_structure_character_is_refused(prefix, bad, suffix):
    url = f"https://pypi.corp/{prefix}{bad}{suffix}"
    with pytest.raises(UserError) as exc:
        urls.check_url(url, "--pip-index", "hint")
    assert "\n" not in str(exc.value).replace("\\n", "")  # one line, the value shown escaped


@settings(max_examples=2000)
@given(st.text(max_size=80))
def test_what_the_grammar_accepts_carries_no_structure(text):
    url = "https://h/" + text
    if urls.URL.fullmatch(url):
        assert not any(c in url for c in HOSTILE) and url.isascii()


@pytest.mark.parametrize("option", ["--pip-index", "--apt-mirror", "--compile-cache"])
def test_credentials_in_an_argv_url_are_refused_with_one_line(option, capsys):
    code = cli.main(["build", "--release", "21.08", "--dry-run", option, "https://bob:hunter2-argv@h.corp/x"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith(f"error: {option}: credentials in a URL")
    assert "hunter2-argv" not in err[0]
    if option == "--compile-cache":
        assert "docker history" in err[0]
    else:
        assert f"{option}-credentials-file" in err[0] and f"{option}-credentials-env" in err[0]


def test_credentials_from_a_file_or_the_environment_reach_the_url(tmp_path, monkeypatch):
    f = tmp_path / "pip.creds"
    f.write_text("bob:p@ss:w/rd\n")
    monkeypatch.setenv("MIRROR_CREDS", "apt-user:m1rror-pw")
    s = buildsettings.from_options(
        "http://mirror.corp/debian", "https://pypi.corp/simple", None, False, (None, "MIRROR_CREDS", f, None)
    )
    assert s.pip_index == "https://bob:p%40ss%3Aw%2Frd@pypi.corp/simple"
    assert s.apt_mirror == "http://apt-user:m1rror-pw@mirror.corp/debian"
    s.validate()  # still inside the grammar, percent-encoded
    # Both spellings of the password are redacted from now on.
    assert redact("pip said p@ss:w/rd and p%40ss%3Aw%2Frd") == "pip said *** and ***"


@pytest.mark.parametrize(
    "content,env,msg",
    [
        ("no-colon\n", None, "expected one line USER:PASSWORD"),
        (":nouser\n", None, "expected one line USER:PASSWORD"),
        ("u:pw\twith-tab\n", None, "expected one line USER:PASSWORD"),
        (None, "UNSET_CREDS_VAR", "that variable is not set"),
    ],
)
def test_credential_sources_fail_with_one_line_and_never_echo(tmp_path, monkeypatch, content, env, msg):
    monkeypatch.delenv("UNSET_CREDS_VAR", raising=False)
    f = None
    if content is not None:
        f = tmp_path / "c"
        f.write_text(content)
    with pytest.raises(UserError, match=msg) as exc:
        urls.read_credentials(f, env, "--pip-index")
    assert "with-tab" not in str(exc.value) and "nouser" not in str(exc.value)


def test_credentials_without_their_url_and_both_sources_are_refused(tmp_path, monkeypatch):
    f = tmp_path / "c"
    f.write_text("u:p\n")
    monkeypatch.setenv("C", "u:p")
    with pytest.raises(UserError, match="go with --pip-index URL"):
        buildsettings.from_options(None, None, None, False, (None, None, f, None))
    with pytest.raises(UserError, match="exclude each other"):
        buildsettings.from_options(None, "https://x/simple", None, False, (None, None, f, "C"))


# --- redaction -------------------------------------------------------------------------


@settings(max_examples=1000)
@given(
    user=st.text(alphabet=string.ascii_letters + string.digits + "._-", min_size=1, max_size=12),
    password=st.text(alphabet=string.ascii_letters + string.digits + "%!*~_.-+", min_size=1, max_size=24),
    scheme=st.sampled_from(["http", "https", "socks5", "ftp"]),
)
def test_url_passwords_are_redacted_anywhere_in_a_text(user, password, scheme):
    secret = "PW" + password
    text = f"proxyconnect tcp: dial {scheme}://{user}:{secret}@proxy.corp:3128: connection refused"
    # A password that is also the user name (user "PW0", password "PW0") stays visible as
    # the user name, which is kept: only the password's own place is redacted.
    assume(secret not in text.replace(f":{secret}@", ":***@"))
    out = redact(text)
    assert secret not in out and f"{scheme}://{user}:***@proxy.corp:3128" in out


def test_registered_secrets_are_redacted_and_the_error_printer_uses_it(capsys):
    register_secret("tok-registered-123")
    say("error: the engine said tok-registered-123 and https://a:b-inline@h/x")
    err = capsys.readouterr().err
    assert "tok-registered-123" not in err and "b-inline" not in err and "***" in err
    assert cli.main(["show", "tok-registered-123"]) == 2  # the CLI's one handler prints through say()
    err = capsys.readouterr().err
    assert "unknown release" in err and "tok-registered-123" not in err


def test_engine_errors_and_the_build_log_are_redacted(tmp_path):
    class API:
        def build(self, **kw):
            yield {"stream": "Step 1/1 : RUN pip install x\n"}
            yield {"stream": "Looking in indexes: https://bob:log-s3cret@pypi.corp/simple\n"}
            yield {"error": "proxyconnect tcp: dial http://proxyuser:proxy-s3cret@proxy:3128: refused"}

    engine = object.__new__(DockerEngine)
    engine.api = API()
    log = tmp_path / "build.log"
    with pytest.raises(BuildError) as exc:
        engine.build(BuildRequest(context=tmp_path, log_path=log, progress=ProgressMode.QUIET))
    text = log.read_text()
    assert "log-s3cret" not in text and "proxy-s3cret" not in text and "proxyuser:***@proxy" in text
    report = redact(exc.value.report())  # what the error printer shows
    assert "proxy-s3cret" not in report and "log-s3cret" not in report


# --- the wrapper reads values as data --------------------------------------------------


@pytest.fixture
def stub_server(tmp_path):
    """Serves tmp_path/site/ as a settings server would, whatever is put there."""
    site = tmp_path / "site" / "s"
    site.mkdir(parents=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "site"))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield site, f"http://127.0.0.1:{httpd.server_address[1]}/s"
    httpd.shutdown()


HOSTILE_VALUES = [
    "https://x.corp/simple'$(touch PWNED)'",
    'https://x.corp/simple"; touch PWNED; "',
    "https://x.corp/`touch PWNED`",
    "https://x.corp/$(touch PWNED)#&\\1",
    "https://x.corp/a b\tc",
]


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_wrapper_takes_a_hostile_pip_index_byte_for_byte_and_runs_nothing(stub_server, tmp_path, value):
    site, url = stub_server
    (site / "index").write_text("pip-index\napt-mirror\n")
    (site / "pip-index").write_text(value + "\n")
    (site / "apt-mirror").write_text(value + "\n")
    sources = tmp_path / "sources.list"
    sources.write_text("deb http://deb.debian.org/debian bookworm main\n")
    out = subprocess.run(
        [
            "bash",
            str(WRAPPER),
            "bash",
            "-c",
            'printf "%s\\n" "$PIP_INDEX_URL"; cat "$(dirname "$APT_CONFIG")/sources.list"',
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=30,
        env={**os.environ, "BUILD_SETTINGS": url, "WITH_BUILD_SETTINGS_SOURCES": str(sources)},
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert lines[0] == value  # not emptied, not evaluated
    assert lines[1] == f"deb {value.rstrip('/')} bookworm main"  # sed took it literally
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("option", ["--pip-index", "--apt-mirror", "--compile-cache"])
def test_hostile_url_options_on_the_command_line_are_one_line_exit_2(option, monkeypatch, capsys):
    monkeypatch.setattr(cli, "_engine", lambda: pytest.fail("reached the engine"))

    @settings(max_examples=40, deadline=None)  # the wiring; the grammar itself gets 2000 above
    @given(head=st.text(max_size=15), bad=st.sampled_from([c for c in HOSTILE if c != "\0"]), tail=st.text(max_size=15))
    def check(head, bad, tail):
        value = f"https://h.corp/{head}{bad}{tail}".replace("\0", "")
        code = cli.main(["build", "--release", "21.08", "--dry-run", option, value])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err

    check()
