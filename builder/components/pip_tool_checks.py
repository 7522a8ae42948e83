"""What the conformance tests of the tools installed from the lock (builder/components/
pip_tool.py) share, for their test_NAME.py: their report entry, or a skip where the image is
not meant to hold one; the catalog's version read back three ways; a server's answer."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from builder.components.pip_tool import PipTool
from builder.core.contract import Label


def held(tool: type[PipTool], report: Any, release_data: Any, labels: Any) -> dict:
    """TOOL's entry in the image's report; skips where the image is not meant to hold it
    (and checks then that it does not)."""
    release = release_data[0]
    found = (report.get("components") or {}).get(tool.NAME)
    if tool.NAME not in release.components:
        assert not found, f"the image holds {tool.TITLE}, the catalog names none"
        pytest.skip(f"the release has no {tool.TITLE}: {release.components_absent.get(tool.NAME, 'none named')}")
    if tool.NAME in labels.get(Label.WITHOUT, "").split(","):
        assert not found, f"left out (--without {tool.NAME}), yet the image reports it"
        dist = tool.distribution(release.components[tool.NAME])
        assert dist not in {k.replace("_", "-").lower() for k in report.get("packages") or {}}, dist
        pytest.skip(f"built --without {tool.NAME}")
    if tool.LABEL not in labels:
        pytest.skip(f"built before {tool.TITLE} was a component (no {tool.LABEL} label)")
    return found or {}


def check_installed_and_labelled(tool: type[PipTool], found: dict, release_data: Any, labels: Any, report: Any) -> None:
    """The catalog's version, as the installed metadata and the label say, and pip's own list."""
    spec = release_data[0].components[tool.NAME]
    assert tool.problems(spec, found) == [], found
    assert labels[tool.LABEL] == tool.versions_text(found)
    dist = tool.distribution(spec)
    packages = {k.replace("_", "-").lower(): v for k, v in (report.get("packages") or {}).items()}
    assert packages.get(dist) == found[dist]["version"]


def wait_for_http(host: Any, url: str, seconds: int = 90) -> str:
    """The body at URL, fetched inside the container (HOST) once the server there answers."""
    code = (
        "import sys, time, urllib.request\n"
        f"for _ in range({seconds * 2}):\n"
        "    try:\n"
        f"        print(urllib.request.urlopen({url!r}, timeout=5).read().decode()); sys.exit(0)\n"
        "    except Exception as exc:\n"
        "        err = exc; time.sleep(0.5)\n"
        "print(err, file=sys.stderr); sys.exit(1)"
    )
    out = host.run(f"python3 -c {shlex.quote(code)}")
    assert out.rc == 0, out.stderr
    return out.stdout
