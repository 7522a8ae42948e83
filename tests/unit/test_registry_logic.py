"""Pure parts of pushing: target references, where credentials come from, which errors retry."""

import io
import re

import pytest

from builder import registry as reg
from builder.core.errors import UserError


@pytest.mark.parametrize(
    "image,registry,tag,expected",
    [
        ("local/tensorflow:21.08-tf2-py3", "localhost:5000", None, "localhost:5000/tensorflow:21.08-tf2-py3"),
        ("local/tensorflow:21.08-tf2-py3", "reg.corp:443/ml/team", "v1", "reg.corp:443/ml/team/tensorflow:v1"),
        ("tensorflow", "127.0.0.1:5000/x", None, "127.0.0.1:5000/x/tensorflow:latest"),
    ],
)
def test_target_ref(image, registry, tag, expected):
    assert reg.target_ref(image, registry, tag) == expected


@pytest.mark.parametrize(
    "registry,tag,msg",
    [
        ("bad host", None, "is not HOST[:PORT][/NAMESPACE]"),
        ("host:5000/UPPER", None, "is not HOST[:PORT][/NAMESPACE]"),
        ("host:5000", "-bad", "is not a valid image tag"),
    ],
)
def test_bad_targets(registry, tag, msg):
    with pytest.raises(UserError, match=re.escape(msg)):
        reg.target_ref("a/b:c", registry, tag)


def test_credentials_from_env_and_stdin(monkeypatch):
    monkeypatch.setenv("U", "alice")
    monkeypatch.setenv("P", "s3cret")
    creds = reg.credentials_from(None, "U", "P", False)
    assert (creds.username, creds.password) == ("alice", "s3cret")
    assert "s3cret" not in repr(creds)
    monkeypatch.setattr("sys.stdin", io.StringIO("from-stdin\n"))
    assert reg.credentials_from("bob", None, None, True).password == "from-stdin"
    assert reg.credentials_from(None, None, None, False) is None


@pytest.mark.parametrize(
    "args,msg",
    [
        (("bob", None, None, False), "a username needs a password"),
        ((None, None, "P", False), "a password needs a username"),
        (("bob", None, "NOPE", False), "--password-env NOPE: that variable is not set"),
        (("bob", None, "P", True), "exclude each other"),
    ],
)
def test_credential_mistakes(monkeypatch, args, msg):
    monkeypatch.setenv("P", "x")
    monkeypatch.delenv("NOPE", raising=False)
    with pytest.raises(UserError, match=msg):
        reg.credentials_from(*args)


@pytest.mark.parametrize(
    "message,transient",
    [
        ("Get http://127.0.0.1:5000/v2/: dial tcp 127.0.0.1:5000: connect: connection refused", True),
        ("received unexpected HTTP status: 503 Service Unavailable", True),
        ("write tcp: connection reset by peer", True),
        ("manifest invalid: manifest invalid", False),
        ("received unexpected HTTP status: 500 Internal Server Error", True),
        # a port or address that holds 500-504 is not a server error (ports are random in tests)
        ("login attempt to http://127.0.0.1:50213/v2/ failed with status: 400 Bad Request", False),
        ("manifest unknown on 10.0.502.1", False),
    ],
)
def test_transient_classification(message, transient):
    assert bool(reg.TRANSIENT.search(message)) == transient


def test_auth_errors_are_recognised():
    assert reg.AUTH.search("unauthorized: authentication required")
    assert reg.AUTH.search("no basic auth credentials")
    assert reg.AUTH.search("failed with status: 401 Unauthorized")


@pytest.mark.parametrize("port", ["40113", "14010", "401"])
def test_a_port_holding_401_is_not_an_auth_error(port):
    """CI once drew port 40113 for a test registry: the message named the port, not a 401."""
    message = f"login attempt to http://127.0.0.1:{port}/v2/ failed with status: 400 Bad Request"
    assert not reg.AUTH.search(message)


@pytest.mark.parametrize(
    "url,loopback",
    [
        ("http://127.0.0.1:8742/ccache", True),
        ("http://127.3.4.5:1/x", True),
        ("http://localhost:8742/x", True),
        ("http://cache.localhost:1/x", True),
        ("http://[::1]:8742/x", True),
        ("http://172.17.0.1:8742/ccache", False),
        ("https://cache.example.com/ccache", False),
        ("http://10.0.0.5:80/", False),
        (None, False),
        ("", False),
    ],
)
def test_only_a_loopback_compile_cache_puts_a_build_on_the_host_network(url, loopback):
    """Host networking changes every RUN's cache key (BuildKit keys a step by its network
    mode): only a server the default network cannot reach justifies it."""
    from builder.core.urls import on_loopback

    assert on_loopback(url) is loopback


def test_one_rule_puts_any_build_on_the_host_network():
    """build, derive, base and the runtime image all ask Delivery.network_mode."""
    from builder.engine.buildsettings import Delivery

    assert Delivery().network_mode() is None
    assert Delivery().network_mode("http://172.17.0.1:8742/ccache") is None
    assert Delivery().network_mode("http://127.0.0.1:8742/ccache") == "host"
    assert Delivery(url="http://127.0.0.1:40000").network_mode() == "host"  # the legacy builder's settings
