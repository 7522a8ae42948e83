"""Registry credentials: from environment variables the user names or standard input
(credentials_from), or from the user's Docker config (config_credentials); never from
the command line. Each secret is registered, so it is never printed or logged."""

from __future__ import annotations

import os
import sys

from builder import engine as engines
from builder.core.errors import UserError
from builder.core.redact import register_secret
from builder.registry.registry_auth import Credentials

MAX_PASSWORD_LINE = 64 * 1024  # a password (or a registry token) is far shorter


def credentials_from(
    username: str | None, username_env: str | None, password_env: str | None, password_stdin: bool
) -> Credentials | None:
    if password_stdin and password_env:
        raise UserError("--password-stdin and --password-env exclude each other")
    user = username or (os.environ.get(username_env) if username_env else None)
    if username_env and not os.environ.get(username_env):
        raise UserError(f"--username-env {username_env}: that variable is not set")
    if password_env:
        if password_env not in os.environ:
            raise UserError(f"--password-env {password_env}: that variable is not set")
        password = os.environ[password_env]
    elif password_stdin:
        line = sys.stdin.readline(MAX_PASSWORD_LINE + 1)  # bounded: a device on stdin is never read to the end
        if len(line) > MAX_PASSWORD_LINE:
            raise UserError(
                f"--password-stdin: the first line is longer than {MAX_PASSWORD_LINE} characters; "
                "give the password alone on one line"
            )
        password = line.rstrip("\r\n")
        if not password:
            raise UserError("--password-stdin: nothing on standard input")
    else:
        if user:
            raise UserError("a username needs a password: --password-env NAME or --password-stdin")
        return None
    if not user:
        raise UserError("a password needs a username: --username or --username-env NAME")
    register_secret(password)
    return Credentials(user, password)


def config_credentials(host: str) -> Credentials | None:
    """What the user's Docker config holds for the registry, resolved as docker resolves
    it (credHelpers, credsStore, auths); an identity token is kept as one."""
    found = engines.client_auth(host)
    if not found:
        return None
    user, secret, token = found
    for value in (secret, token):
        if value:
            register_secret(value)
    return Credentials(user, secret, token)
