"""What the components' conformance tests (builder/components/NAME/test_NAME.py) share: the
component's entry in the image's report, or a skip where the image is not meant to hold it;
for a tool from the lock, the catalog's version read back three ways; a server's answer."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from builder.components import Component
from builder.components.pip_tool import PipTool
from builder.core.contract import Label


def held(component: type[Component], report: Any, release_data: Any, labels: Any) -> dict:
    """COMPONENT's entry in the image's report; skips where the image is not meant to hold it
    (the catalog names none, --without, a runtime image of a devel-only one), and checks
    then that it does not."""
    release = release_data[0]
    found = (report.get("components") or {}).get(component.NAME)
    if component.NAME not in release.components:
        assert not found, f"the image holds {component.TITLE}, the catalog names none"
        why = release.components_absent.get(component.NAME, "none named")
        pytest.skip(f"the release has no {component.TITLE}: {why}")
    left_out = component.NAME in labels.get(Label.WITHOUT, "").split(",")
    runtime = bool(labels.get(Label.RUNTIME_OF)) and not component.RUNTIME
    if left_out or runtime:
        assert not found, f"left out (--without {component.NAME}, or a runtime image), yet the image reports it"
        pytest.skip(f"built --without {component.NAME}" if left_out else f"a runtime image: no {component.TITLE}")
    if component.LABEL not in labels:
        pytest.skip(f"built before images held {component.TITLE} (no {component.LABEL} label)")
    return found or {}


def tool_held(tool: type[PipTool], report: Any, release_data: Any, labels: Any) -> dict:
    """`held`, for a tool from the lock: left out, its distribution is not installed either."""
    release = release_data[0]
    if tool.NAME in release.components and tool.NAME in labels.get(Label.WITHOUT, "").split(","):
        dist = tool.distribution(release.components[tool.NAME])
        assert dist not in {k.replace("_", "-").lower() for k in report.get("packages") or {}}, dist
    return held(tool, report, release_data, labels)


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
