"""What the user's Docker client config holds for a registry (client-side: no engine)."""

from __future__ import annotations

from builder.engine.docker_engine import docker_config_auth


def client_auth(host: str) -> tuple[str, str, str] | None:
    """(user, password, identity token) the user's Docker client config holds for registry
    HOST, resolved as docker-py resolves it: the host's credential helper (`credHelpers`)
    or, without one, `credsStore`; else `auths`; a helper's user `<token>` and an
    `identitytoken` entry are identity tokens. None when it holds none or cannot be read."""
    found = docker_config_auth(host)
    if found is None:
        return None
    token = found.get("IdentityToken") or found.get("identitytoken")
    if isinstance(token, str) and token:
        return found.get("Username") or found.get("username") or "<token>", "", token
    for user_key, password_key in (("Username", "Password"), ("username", "password")):
        if found.get(user_key) and found.get(password_key):
            return found[user_key], found[password_key], ""
    return None
