"""A tool named by a range: which versions `builder lock` tries, in which order, what it
reports, and when it declares the tool absent. uv and the index are replaced (no network)."""

from __future__ import annotations

import pytest

from builder import catalog
from builder.catalog import lock, tool_versions
from builder.catalog import lock_resolve as resolve
from builder.core.errors import UserError

INDEX = ["2.3.2", "3.0.0", "3.0.16", "3.1.0rc1", "3.6.7", "3.6.8", "4.0.0", "4.5.9", "4.6.6", "4.7.0.dev1", "junk!"]


def test_exact_pins_are_not_ranges():
    assert tool_versions.exact_version("jupyterlab==3.0.16") == "3.0.16"
    assert tool_versions.exact_version("jupyterlab >= 3, < 4") is None
    assert tool_versions.exact_version("jupyterlab==3.0.*") is None
    assert tool_versions.exact_version("jupyterlab") is None


def test_candidates_are_the_newest_final_release_of_each_minor_line_in_the_range():
    assert tool_versions.candidates("jupyterlab>=3,<5", INDEX) == ["4.6.6", "4.5.9", "4.0.0", "3.6.8", "3.0.16"]
    assert tool_versions.candidates("jupyterlab<3.1", INDEX) == ["3.0.16", "2.3.2"]
    assert tool_versions.candidates("jupyterlab>=9", INDEX) == []
    assert tool_versions.candidates("jupyterlab", INDEX, limit=2) == ["4.6.6", "4.5.9"]


def test_choose_locks_the_first_that_resolves_and_reports_each_refusal():
    tried: list[str] = []

    def resolves(pin: str) -> str | None:
        tried.append(pin)
        return None if pin == "jupyterlab==3.6.8" else f"{pin} needs jupyter-server>=2"

    choice = tool_versions.choose("jupyterlab>=3,<5", INDEX, resolves)
    assert choice.version == "3.6.8"
    assert tried == ["jupyterlab==4.6.6", "jupyterlab==4.5.9", "jupyterlab==4.0.0", "jupyterlab==3.6.8"]
    assert choice.lines() == [
        "jupyterlab 4.6.6: refused (jupyterlab==4.6.6 needs jupyter-server>=2)",
        "jupyterlab 4.5.9: refused (jupyterlab==4.5.9 needs jupyter-server>=2)",
        "jupyterlab 4.0.0: refused (jupyterlab==4.0.0 needs jupyter-server>=2)",
        "jupyterlab 3.6.8: locked (jupyterlab>=3,<5)",
    ]


def test_choose_with_nothing_that_resolves_says_why_for_each():
    choice = tool_versions.choose("jupyterlab>=4", INDEX, lambda pin: "conflict")
    assert choice.version is None
    assert choice.absent_reason() == (
        "no version of 'jupyterlab>=4' resolves with the release (4.6.6: conflict; 4.5.9: conflict; 4.0.0: conflict)"
    )
    assert "no version on the index" in tool_versions.choose("jupyterlab>=9", INDEX, lambda p: None).absent_reason()


# --- builder lock with a ranged tool, uv replaced ------------------------------------------


def _release(make_catalog, jupyter: str | None):
    """21.08 as shipped (with its parent 21.06), its JupyterLab entry replaced by JUPYTER."""
    texts = {name: (catalog.RELEASES_DIR / name).read_text() for name in ("21.06.yaml", "21.08.yaml")}
    if jupyter:
        texts["21.08.yaml"] += f"jupyter: {jupyter}\n"
    return catalog.load(make_catalog(texts)).get("21.08")


@pytest.fixture
def ranged_target(make_catalog):
    release = _release(make_catalog, '{requirement: "jupyterlab>=3,<5", pins: ["jsonschema<4.18"]}')
    return lock.Target(release, release.variants["tf2-py3"], "3.9")


def test_a_ranged_tool_is_pinned_to_the_first_version_that_locks(ranged_target, monkeypatch):
    asked: list[list[str]] = []

    def fake_compile(t, existing=None, uv=None, pinned=None):
        reqs = [(pinned or {}).get(r, r) for r in lock.requirements(t.release, t.variant)]
        asked.append(reqs)
        if "jupyterlab==3.6.8" not in reqs:
            raise UserError("uv could not lock 21.08/tf2-py3 py3.9: jupyterlab needs jupyter-server>=2")
        return "lock text\n"

    monkeypatch.setattr(resolve, "compile_lock", fake_compile)
    logged: list[str] = []
    text = resolve.compile_with_tools(ranged_target, None, ["uv"], logged.append, versions=lambda name: INDEX)
    assert text == "lock text\n"
    assert "jsonschema<4.18" in asked[-1] and "jupyterlab>=3,<5" not in asked[-1]
    assert logged[0] == "  21.08/tf2-py3 py3.9: jupyterlab 4.6.6: refused (jupyterlab needs jupyter-server>=2)"
    assert logged[-1] == "  21.08/tf2-py3 py3.9: jupyterlab 3.6.8: locked (jupyterlab>=3,<5)"


def test_a_ranged_tool_that_never_locks_is_one_error_naming_every_try(ranged_target, monkeypatch):
    def refuse(t, existing=None, uv=None, pinned=None):
        raise UserError("uv could not lock it: typing-extensions conflict")

    monkeypatch.setattr(resolve, "compile_lock", refuse)
    with pytest.raises(UserError) as e:
        resolve.compile_with_tools(ranged_target, None, ["uv"], lambda m: None, versions=lambda name: INDEX)
    message = str(e.value)
    assert "\n" not in message and message.startswith("21.08/tf2-py3 py3.9: no version of 'jupyterlab>=3,<5'")
    assert message.count("typing-extensions conflict") == 5 and "name the tool absent" in message


def test_exact_tools_resolve_once_without_the_index(monkeypatch, make_catalog):
    release = _release(make_catalog, None)
    target = lock.Target(release, release.variants["tf2-py3"], "3.9")
    calls: list[object] = []
    monkeypatch.setattr(
        resolve, "compile_lock", lambda t, existing=None, uv=None, pinned=None: calls.append(pinned) or "x"
    )

    def no_index(name: str) -> list[str]:
        raise AssertionError("the index is asked for an exact pin")

    assert resolve.compile_with_tools(target, None, ["uv"], lambda m: None, versions=no_index) == "x"
    assert calls == [None]


# --- the index's versions, from a server on loopback ----------------------------------------


@pytest.fixture
def index(tmp_path, monkeypatch, loopback_http):
    """A PEP 700 answer for jupyterlab where loopback_http serves (the working directory)."""
    page = tmp_path / "simple" / "jupyterlab"
    page.mkdir(parents=True)
    (page / "index.html").write_text('{"meta": {"api-version": "1.1"}, "versions": ["3.0.16", "4.6.6"], "files": []}')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("UV_INDEX_URL", f"{loopback_http}/simple")
    return loopback_http


def test_the_index_lists_a_tools_versions(index):
    assert resolve.index_versions("JupyterLab") == ["3.0.16", "4.6.6"]


def test_an_index_answer_over_the_limit_or_the_deadline_is_one_line(index, monkeypatch):
    monkeypatch.setattr(resolve, "INDEX_LIMIT", 10)
    with pytest.raises(UserError, match=r"^the index http://127\.0\.0\.1/simple answered more than 0 MiB"):
        resolve.index_versions("jupyterlab")
    monkeypatch.setattr(resolve, "INDEX_LIMIT", 64 << 20)
    monkeypatch.setattr(resolve, "INDEX_DEADLINE", -1.0)
    with pytest.raises(UserError, match=r"took over -1 s to list jupyterlab$"):
        resolve.index_versions("jupyterlab")


def test_an_index_without_the_json_api_or_unreachable_is_one_line(tmp_path, monkeypatch, loopback_http):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("UV_INDEX_URL", f"{loopback_http}/simple")
    with pytest.raises(UserError, match=r"^cannot list the versions of jupyterlab on http://127\.0\.0\.1/simple: "):
        resolve.index_versions("jupyterlab")  # 404
    monkeypatch.setenv("UV_INDEX_URL", "http://user:secret@127.0.0.1:9/simple")
    with pytest.raises(UserError) as e:
        resolve.index_versions("jupyterlab")
    assert "secret" not in str(e.value)
