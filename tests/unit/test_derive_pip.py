"""`derive --pip`: resolved against the parent's pins before anything is built (uv is
replaced here by a recorder; tests/integration/test_derived.py resolves for real)."""

import pytest

from builder.catalog import lock_resolve
from builder.core.contract import InImage, Label
from builder.core.errors import UserError
from builder.plan import derive

from .fake_engine import FakeEngine

PINS = "# pins\nnumpy==1.19.5\ntensorflow==2.5.0\ntyping-extensions==3.7.4.3\n"
RESOLVED = (
    "numpy==1.19.5 \\\n    --hash=sha256:" + "a" * 64 + "\n"
    "tensorflow-addons==0.13.0 \\\n    --hash=sha256:" + "b" * 64 + "\n"
    "typeguard==2.13.3 \\\n    --hash=sha256:" + "c" * 64 + "\n"
)


def parent(engine: FakeEngine, constraints: str | None, python: str = "3.9.2") -> dict:
    engine.add_image("local/tf:1", labels={Label.PYTHON: python})
    engine.run_handler = lambda image, cmd: (
        (0, constraints)
        if constraints is not None and cmd == ["cat", InImage.PIP_CONSTRAINT]
        else (1, "cat: no such file")
    )
    return {Label.PYTHON: python}


def test_pip_is_resolved_for_the_parents_python_against_its_pins(monkeypatch):
    seen = {}

    def resolve(requested, python, constraints, what, index_url=None, uv=None):
        seen.update(requested=requested, python=python, constraints=constraints, what=what, index=index_url)
        return RESOLVED

    monkeypatch.setattr(lock_resolve, "resolve_beside", resolve)
    engine = FakeEngine()
    labels = parent(engine, PINS)
    spec = derive.DeriveSpec(parent="local/tf:1", pip=["tensorflow-addons==0.13.0"])
    resolved, pins = derive.resolve_pip(engine, spec, "local/tf:1", labels, "https://pypi.example/simple")
    assert (resolved, pins) == (RESOLVED, PINS)
    assert seen == {
        "requested": ["tensorflow-addons==0.13.0"],
        "python": "3.9",
        "constraints": PINS,
        "what": "--pip tensorflow-addons==0.13.0 beside the pins of local/tf:1",
        "index": "https://pypi.example/simple",
    }
    # what it adds, as the label records it: not what the parent already pins
    assert derive.new_pins(resolved, pins) == ["tensorflow-addons==0.13.0", "typeguard==2.13.3"]
    text = derive.render(spec, "local/tf:1", "sha256:" + "0" * 64, labels, derive.new_pins(resolved, pins))
    assert 'dev.tfbuilder.pip-added="tensorflow-addons==0.13.0 typeguard==2.13.3"' in text
    assert "--no-deps --require-hashes $flags -r /opt/tensorflow/locks/derived-pip.txt \\\n && pip-constraints" in text


def test_no_pip_asks_nothing():
    engine = FakeEngine()
    assert derive.resolve_pip(engine, derive.DeriveSpec(parent="p", apt=["jq"]), "p", {}, None) == ("", "")
    assert not [c for c in engine.calls if c[0] == "run_capture"]


def test_a_parent_without_pins_is_refused_in_one_line():
    engine = FakeEngine()
    labels = parent(engine, None)
    with pytest.raises(UserError, match=r"--pip: local/tf:1 has no /etc/pip/constraint.txt .*rebuild it"):
        derive.resolve_pip(engine, derive.DeriveSpec(parent="local/tf:1", pip=["x"]), "local/tf:1", labels, None)


def test_an_impossible_request_is_uvs_one_line(monkeypatch):
    def uv(args, cwd, what, verb="lock"):
        assert verb == "resolve"
        raise UserError(
            f"uv could not {verb} {what}: Because you require numpy==1.21.0 and numpy==1.19.5, "
            "we can conclude that your requirements are unsatisfiable."
        )

    monkeypatch.setattr(lock_resolve, "_run_uv", uv)
    monkeypatch.setattr(lock_resolve, "uv_command", lambda: ["uv"])
    engine = FakeEngine()
    labels = parent(engine, PINS)
    with pytest.raises(UserError) as err:
        derive.resolve_pip(
            engine, derive.DeriveSpec(parent="local/tf:1", pip=["numpy==1.21.0"]), "local/tf:1", labels, None
        )
    assert "\n" not in str(err.value) and "numpy==1.21.0 and numpy==1.19.5" in str(err.value)
