"""Property: no value from the catalog or the command line can add a Dockerfile
instruction, a shell command or an env line. Every hostile value (newline, CR, NUL,
quotes, $(), backticks, #, &, ../, very long, undecodable bytes) is either refused with
one line (exit 2 on the command line) or written so that the Dockerfile has as many
instructions as with a benign value and the value reads back byte-identical.

Examples per property: HYPOTHESIS_SCALE (default 1) multiplies them, e.g. 10 for a
thorough run; the defaults keep the unit suite fast.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import subprocess
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from builder import catalog, components, render
from builder.cli import main as cli
from builder.core import grammar, quoting
from builder.core.errors import CatalogError, UserError
from builder.plan import derive

from . import dockerfile_lexer as lex
from .conftest import GOOD

SCALE = int(os.environ.get("HYPOTHESIS_SCALE", "1"))


def many(n: int):
    return settings(max_examples=n * SCALE, deadline=None, suppress_health_check=list(HealthCheck))


HOSTILE_PARTS = [
    "\n",
    "\r",
    "\r\n",
    "\x00",
    '"',
    "'",
    "\\",
    "$(touch /tmp/pwned)",
    "`id`",
    "$HOME",
    "${PATH}",
    "#",
    "&",
    ";",
    "|",
    "../",
    " ",
    "\t",
    "\\\nRUN touch /pwned",
    "\nRUN touch /pwned\n",
    '" \\\n LABEL x="',
    "\x1b[2J",
    "\u2028",
    "\x85",
    "\xa0",
    "\udc80\udcff",
    "=",
    "{{ x }}",
    "%s",
    "-",
    ".",
    "_",
    ":",
    "/",
    "@",
    "a",
    "Z",
    "9",
    "é",
]
hostile = st.one_of(
    st.lists(st.one_of(st.sampled_from(HOSTILE_PARTS), st.text(max_size=4)), max_size=8).map("".join),
    st.text(),
    st.sampled_from(["a" * 300, "x" * 5000, "a/" * 200 + "b", "../../etc/passwd", "latest\n"]),
)
BAD_CHARS = ["\n", "\r", "\x00"]
PATTERNS = {name: value for name, value in vars(grammar).items() if isinstance(value, re.Pattern)}


# --- the grammars ---------------------------------------------------------------------


@many(300)
@given(
    name=st.sampled_from(sorted(PATTERNS)),
    value=st.text(max_size=40),
    bad=st.sampled_from(BAD_CHARS),
    where=st.integers(0, 40),
)
def test_no_grammar_lets_a_line_break_or_nul_through(name, value, bad, where):
    """The `^...$` bug: `$` matches before a trailing newline. No grammar has it."""
    pattern = PATTERNS[name]
    for candidate in (value + bad, bad + value, value[:where] + bad + value[where:]):
        assert pattern.fullmatch(candidate) is None, (name, candidate)


@pytest.mark.parametrize(
    "ref",
    [
        "ubuntu",
        "local/tensorflow:21.08-tf2-py3",
        "nvcr.io/nvidia/cuda:11.8.0-cudnn8-devel-ubuntu20.04",
        "localhost:5000/a/b:c",
        "[::1]:5000/ns/img:1",
        "a__b/c--d/e.f_g:T_a.g-1",
        "Registry.Example.com/x",
        "nvcr.io/nvidia/cuda:11.8.0@sha256:" + "a" * 64,
        "a" * 255,
        "a:" + "t" * 128,
    ],
)
def test_docker_reference_grammar_accepts(ref):
    assert grammar.reference_problem(ref) is None


@pytest.mark.parametrize(
    "ref,why",
    [
        ("", "is empty"),
        ("Local/TF", "repository names are lowercase"),
        ("MyRepo", "repository names are lowercase"),
        ("local/TensorFlow:1", "repository names are lowercase"),
        ("a" * 256, "longer than 255"),
        ("a:" + "t" * 129, "longer than 128"),
        ("a:-x", "invalid tag"),
        ("a:.x", "invalid tag"),
        ("a/", "not a repository"),
        ("a//b", "not a repository"),
        ("-a", "not a repository"),
        ("a_", "not a repository"),
        ("a___b", "not a repository"),
        ("a@sha256:abc", "not an image reference"),
        ("a b", "not"),
        ("a\n", "not"),
        ("a:b\n", "invalid tag"),
    ],
)
def test_docker_reference_grammar_refuses(ref, why):
    assert why in (grammar.reference_problem(ref) or "accepted")


# --- the writers -------------------------------------------------------------------------


@many(300)
@given(value=hostile)
def test_dockerfile_string_reads_back_byte_identical(value):
    try:
        word = quoting.dockerfile_string(value)
    except quoting.QuotingError as exc:
        assert not grammar.TEXT.fullmatch(value) and "\n" not in str(exc)
        return
    text = f"FROM scratch\nENV A={word} B=1\nLABEL k={word}\nARG X={word}\n"
    ins = lex.instructions(text)
    assert [i.cmd for i in ins] == ["FROM", "ENV", "LABEL", "ARG"]
    assert lex.pairs(ins[1]) == {"A": value, "B": "1"}
    assert lex.pairs(ins[2]) == {"k": value} and lex.pairs(ins[3]) == {"X": value}
    assert value.encode("utf-8") == lex.pairs(ins[1])["A"].encode("utf-8")


@many(300)
@given(value=hostile)
def test_other_writers_read_back(value):
    try:
        word = quoting.shell_word(value)
    except quoting.QuotingError:
        assert not grammar.TEXT.fullmatch(value)
    else:
        assert shlex.split(word) == [value] and "\n" not in word
    try:
        line = quoting.env_file_line("NAME", value)
    except quoting.QuotingError:
        assert not grammar.TEXT.fullmatch(value)
    else:
        assert line.count("\n") == 1 and line == f"NAME={value}\n"
    text = quoting.json_string(value)
    assert json.loads(text) == value and all(" " <= c <= "~" for c in text)


@many(3)
@given(values=st.lists(hostile, min_size=50, max_size=80))
def test_shell_words_run_by_bash_echo_back_byte_identical(tmp_path_factory, values):
    """A script of `printf '%s\\0' WORD` lines, one per value: bash -n accepts it and running
    it prints every value back exactly (and nothing it holds was executed)."""
    accepted = []
    for v in values:
        try:
            accepted.append((v, quoting.shell_word(v)))
        except quoting.QuotingError:
            assert not grammar.TEXT.fullmatch(v)
    script = tmp_path_factory.mktemp("sh") / "echo.sh"
    script.write_text("".join(f"printf '%s\\0' {word}\n" for _, word in accepted), encoding="utf-8")
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    out = subprocess.run(["bash", str(script)], capture_output=True, cwd=script.parent, timeout=30)
    assert out.returncode == 0 and not (script.parent / "pwned").exists()
    assert out.stdout.split(b"\0")[:-1] == [v.encode("utf-8") for v, _ in accepted]


# --- rendering: catalog values that reach the templates --------------------------------
# The values are put straight into the release, past the catalog's grammars: the
# templates' filters alone must hold. (The catalog refuses most of them first, below.)

CAT = catalog.load()
REL = CAT.get("21.08")
VAR = REL.variant("tf2-py3")
OPTS = render.RenderOptions(offline_base_image="local/cuda-base:x")
_ENV = render.template_env()
_TEMPLATES = {target: _ENV.get_template(tpl) for target, tpl in render.CONTEXT_TEMPLATES.items()}


def _files(rel=REL, var=VAR, opts=OPTS) -> dict[str, str]:
    """The rendered text files (as render.render, with the templates compiled once)."""
    ctx = render.make_context(rel, var, opts)
    return {target: tpl.render(ctx=ctx) for target, tpl in _TEMPLATES.items()}


BENIGN = _files()
BENIGN_COUNT = len(lex.instructions(BENIGN["Dockerfile"]))


def _refused_or_same_shape(make, value):
    """Files rendered with VALUE, or None when it was refused with one line."""
    try:
        files = make(value)
    except UserError as exc:
        assert "\n" not in grammar.one_line(str(exc))
        return None
    dockerfile = files["Dockerfile"]
    assert len(lex.instructions(dockerfile)) == BENIGN_COUNT, dockerfile
    for name in ("docker-examples/Dockerfile.customtensorflow", "docker-examples/Dockerfile.addpackages"):
        assert len(lex.instructions(files[name])) == len(lex.instructions(BENIGN[name]))
    return files


FIELDS = {
    # field -> (how the value gets in, what must read back)
    "env value": (
        lambda v: _files(replace(REL, env={**REL.env, "X_ENV": v})),
        lambda f, v: lex.merged(f["Dockerfile"], "ENV")["X_ENV"] == v,
    ),
    "variant env value": (
        lambda v: _files(var=replace(VAR, env={"X_ENV": v})),
        lambda f, v: lex.merged(f["Dockerfile"], "ENV")["X_ENV"] == v,
    ),
    "label value": (
        lambda v: _files(replace(REL, labels={"com.example.x": v})),
        lambda f, v: lex.merged(f["Dockerfile"], "LABEL")["com.example.x"] == v,
    ),
    "variant label value": (
        lambda v: _files(var=replace(VAR, labels={"com.example.x": v})),
        lambda f, v: lex.merged(f["Dockerfile"], "LABEL")["com.example.x"] == v,
    ),
    "env name": (
        lambda v: _files(replace(REL, env={v: "1"})),
        lambda f, v: lex.merged(f["Dockerfile"], "ENV")[v] == "1",
    ),
    "label key": (
        lambda v: _files(replace(REL, labels={v: "1"})),
        lambda f, v: lex.merged(f["Dockerfile"], "LABEL")[v] == "1",
    ),
    "framework name": (
        lambda v: _files(var=replace(VAR, framework_name=v)),
        lambda f, v: lex.merged(f["Dockerfile"], "LABEL")["org.opencontainers.image.title"] == f"{v} {VAR.tag}",
    ),
    "framework version": (
        lambda v: _files(var=replace(VAR, framework_version=v)),
        lambda f, v: lex.merged(f["Dockerfile"], "LABEL")["dev.tfbuilder.requested-framework"] == f"{VAR.package}=={v}",
    ),
    "upstream image": (
        lambda v: _files(
            replace(REL, upstream_image=v, upstream_digest=None), opts=replace(OPTS, base="upstream")
        ),  # auto: the offline base
        lambda f, v: lex.pairs(lex.instructions(f["Dockerfile"])[0]) == {"BASE_IMAGE": v},
    ),
    "variant tag": (
        lambda v: _files(var=replace(VAR, tag=v)),
        lambda f, v: lex.merged(f["Dockerfile"], "LABEL")["org.opencontainers.image.version"] == v,
    ),
    "repository": (lambda v: _files(replace(REL, repository=v)), lambda f, v: f"-t {v}:{VAR.tag} ." in f["Dockerfile"]),
    "nvbuildopts flag": (
        lambda v: _files(replace(REL, nvbuildopts=["-c", v])),
        lambda f, v: _nvbuild_flags(f["nvbuildopts"]) == ["--config=v2", "-c", v],
    ),
}


def _nvbuild_flags(text: str) -> list[str]:
    """What nvbuild.sh's `while read -r line` loop makes of the flags file."""
    out = []
    for line in text.split("\n"):
        line = line.strip(" \t")
        if line and not line.startswith("#"):
            out.append(line)
    return out


@pytest.mark.parametrize("field", sorted(FIELDS))
@many(50)
@given(value=hostile)
def test_catalog_values_cannot_add_instructions(field, value):
    make, reads_back = FIELDS[field]
    files = _refused_or_same_shape(make, value)
    if files is not None:
        assert reads_back(files, value), (field, value)


@pytest.mark.parametrize("key", ["title", "upstream_copyright", "shm_recommend"])
@many(2)
@given(values=st.lists(hostile, min_size=20, max_size=30))
def test_entrypoint_texts_are_shown_verbatim_and_never_run(tmp_path_factory, key, values):
    """The entrypoint parts with hostile texts: bash -n accepts them, sourcing them runs
    nothing of the text and prints it byte-identical."""
    tmp = tmp_path_factory.mktemp("entry")
    for i, value in enumerate(values):
        try:
            files = _files(replace(REL, entrypoint={**REL.entrypoint, key: value}))
        except UserError:
            assert not grammar.TEXT.fullmatch(value)
            continue
        for part in ("10-banner.sh", "60-shm-check.sh"):
            script = tmp / f"{i}-{part}"
            script.write_text(files[f"entrypoint/entrypoint.d/{part}"], encoding="utf-8")
            assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
            # df reports the 64 MB default so that the shm advice is printed.
            run = f"df() {{ printf 'Filesystem 1K-blocks\\nshm 65536\\n'; }}; source {shlex.quote(str(script))}"
            out = subprocess.run(
                ["bash", "-c", run], capture_output=True, cwd=tmp, timeout=30, env={"PATH": os.environ["PATH"]}
            )
            assert out.returncode == 0 and not (tmp / "pwned").exists(), out.stderr
            if key == "title":
                assert value.encode() in out.stdout
            if key == "shm_recommend" and part == "60-shm-check.sh":
                assert f"docker run --gpus all {value} ...".encode() in out.stdout
        if key == "upstream_copyright":
            assert value.replace("{year}", "2021") in files["entrypoint/entrypoint.d/15-container-copyright.txt"]


@pytest.mark.parametrize("key", ["name", "maintainer", "copyright_holder"])
@many(2)
@given(values=st.lists(hostile, min_size=20, max_size=30))
def test_vendor_texts_are_shown_verbatim_and_never_run(tmp_path_factory, key, values):
    """The catalog's vendor (banner, copyright line) with hostile texts: the banner sourced
    runs nothing of them and prints the name and maintainer byte-identical."""
    tmp = tmp_path_factory.mktemp("vendor")
    for i, value in enumerate(values):
        fields = {"name": "ACME", key: value}
        try:
            files = _files(replace(REL, vendor=catalog.Vendor(**fields)))
        except UserError:
            assert not grammar.TEXT.fullmatch(value)
            continue
        script = tmp / f"{i}-10-banner.sh"
        script.write_text(files["entrypoint/entrypoint.d/10-banner.sh"], encoding="utf-8")
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
        out = subprocess.run(
            ["bash", "-c", f"source {shlex.quote(str(script))}"],
            capture_output=True,
            cwd=tmp,
            timeout=30,
            env={"PATH": os.environ["PATH"]},
        )
        assert out.returncode == 0 and not (tmp / "pwned").exists(), out.stderr
        if key == "copyright_holder":
            assert value in files["entrypoint/entrypoint.d/15-container-copyright.txt"]
        else:
            assert value.encode() in out.stdout


# --- the catalog refuses hostile values where they are written ------------------------------

RESOLVED = CAT.get("21.08").resolved  # the shipped release, resolved through its parents
CATALOG_FIELDS = [
    ("repository",),
    ("os", "distro"),
    ("os", "version"),
    ("python",),
    ("cuda",),
    ("base", "upstream", "image"),
    ("base", "offline", "cuda"),
    ("base", "offline", "python"),
    ("env", "X_ENV"),
    ("labels", "com.example.x"),
    ("entrypoint", "title"),
    ("vendor", "name"),
    ("vendor", "maintainer"),
    ("vendor", "url"),
    ("vendor", "copyright_holder"),
    ("entrypoint", "upstream_copyright"),
    ("entrypoint", "shm_recommend"),
    ("variants", "tf2-py3", "framework", "name"),
    ("variants", "tf2-py3", "framework", "version"),
    ("variants", "tf2-py3", "tag"),
    ("variants", "tf2-py3", "env", "X_ENV"),
    ("variants", "tf2-py3", "labels", "com.example.x"),
    ("components", "cudnn"),
    # every field of every component of builder/components/ that 21.08 holds (Nsight's Debian
    # versions reach a RUN line); one it lacks would add its steps, which is no injection.
    # JupyterLab's requirement is TensorBoard's type (pip_tool.PipToolSpec).
    *[(c.NAME, key) for c in components.REGISTRY if c.NAME in REL.components for key in c.MODEL.model_fields],
]


def _with(path, value):
    data = copy.deepcopy(RESOLVED)
    node = data
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):  # absent ("absent: WHY") or not there yet
            node[key] = {}
        node = node[key]
    node[path[-1]] = value
    return data


@pytest.mark.parametrize("path", CATALOG_FIELDS, ids=".".join)
@many(25)
@given(value=hostile)
def test_catalog_fields_refuse_or_render_safely(path, value):
    problems: list = []
    release = catalog._check_release("21.08", "21.08.yaml", _with(path, value), problems)
    if release is None:
        assert problems and all(p.file == "21.08.yaml" and "\n" not in str(p) for p in problems)
        # a new framework version also un-describes the wheel's measured device code
        where = {".".join(path)} | (
            {"variants.tf2-py3.framework.device_code.version"}
            if path == ("variants", "tf2-py3", "framework", "version")
            else set()
        )
        assert any(p.key in where for p in problems), problems
        assert all(len(p.message) < 400 for p in problems)  # a huge value is never printed whole
        return
    assert grammar.TEXT.fullmatch(value), "a control character passed the catalog"
    files = _refused_or_same_shape(lambda _: _files(release, release.variant("tf2-py3")), value)
    if files is not None and path[0] in ("env", "labels"):
        assert lex.merged(files["Dockerfile"], {"env": "ENV", "labels": "LABEL"}[path[0]])[path[-1]] == value


@many(100)
@given(name=hostile)
def test_release_names_are_paths_and_tags_so_they_are_plain(name):
    ok = grammar.RELEASE.fullmatch(name) is not None
    assert not ok or ("/" not in name and ".." not in name and not name.startswith((".", "-")))


@pytest.mark.parametrize("name", ["../x", "a/b", "..", "x\n", "a..b", ".hidden", ""])
def test_release_names_with_paths_are_refused(make_catalog, name):
    d = make_catalog({"x.yaml": GOOD.replace('release: "30.01"', f"release: {json.dumps(name)}")})
    with pytest.raises(CatalogError) as exc:
        catalog.load(d)
    assert any(p.file == "x.yaml" and p.key == "release" for p in exc.value.problems)


# --- catalog loading ----------------------------------------------------------------------

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(9)
)


def _load_problems(make_catalog, files):
    with pytest.raises(CatalogError) as exc:
        catalog.load(make_catalog(files))
    return exc.value.problems


def test_an_alias_bomb_is_refused_at_once(make_catalog):
    import time

    start = time.monotonic()
    problems = _load_problems(make_catalog, {"bomb.yaml": 'release: "30.02"\n' + ALIAS_BOMB})
    assert time.monotonic() - start < 5
    assert [(p.file, "anchors and aliases" in p.message) for p in problems] == [("bomb.yaml", True)]


def test_anchors_are_refused_even_without_aliases(make_catalog):
    problems = _load_problems(make_catalog, {"30.01.yaml": GOOD.replace('python: "3.10"', 'python: &p "3.10"')})
    assert [p.file for p in problems] == ["30.01.yaml"] and "line 4" in problems[0].message


def test_oversized_and_deep_files_are_refused(make_catalog):
    big = GOOD + "# " + "x" * catalog.MAX_FILE_BYTES + "\n"
    deep = 'release: "30.03"\nx: ' + "[" * 200 + "]" * 200 + "\n"
    problems = _load_problems(make_catalog, {"big.yaml": big, "deep.yaml": deep})
    by_file = {p.file: p.message for p in problems}
    assert "larger than" in by_file["big.yaml"] and "nested deeper" in by_file["deep.yaml"]
    assert all(len(str(p)) < 300 for p in problems)


def test_a_parents_problem_is_reported_once_at_the_parent(make_catalog):
    parent = 'release: base\nabstract: true\nparent: _common\nlabels: {"Bad Key": "1"}\n'
    child = GOOD.replace("parent: _common", "parent: base")
    problems = _load_problems(
        make_catalog, {"base.yaml": parent, "30.01.yaml": child, "30.02.yaml": child.replace('"30.01"', '"30.02"')}
    )
    assert [(p.file, p.key) for p in problems] == [("base.yaml", "labels.Bad Key")]


def test_messages_never_print_a_huge_value(make_catalog):
    problems = _load_problems(make_catalog, {"30.01.yaml": GOOD.replace('python: "3.10"', f'python: "{"9" * 100000}"')})
    assert len(problems) == 1 and len(str(problems[0])) < 200


# --- the command line: options are checked before anything is built ------------------------


class _Engine(BaseException):
    """Raised where the command would talk to the engine: the checks have all passed."""


@pytest.fixture
def no_engine(monkeypatch):
    def refuse():
        raise _Engine()

    monkeypatch.setattr(cli, "_engine", refuse)


@pytest.fixture
def cached_catalog(monkeypatch):
    monkeypatch.setattr(cli, "_catalog", lambda: CAT)  # loading is tested above; this is about options


def _main(capsys, args) -> tuple[int | None, str, str]:
    try:
        code = cli.main(args)
    except _Engine:
        code = None
    out, err = capsys.readouterr()
    return code, out, err


def _assert_refused(code, out, err):
    assert code == 2 and out == "", (code, out, err)
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err


RENDER = ["render", "-r", "21.08", "-v", "tf2-py3"]
CLI_RENDER = {
    "--env": (lambda v: ["--env", f"X_ENV={v}"], lambda df, v: lex.merged(df, "ENV")["X_ENV"] == v),
    "--env name": (lambda v: ["--env", f"{v}=1"], lambda df, v: lex.merged(df, "ENV")[v] == "1"),
    "--repo": (lambda v: ["--repo", v], lambda df, v: f"-t {v}:{VAR.tag} ." in df),
    "--base": (lambda v: ["--base", v], lambda df, v: lex.pairs(lex.instructions(df)[0]) == {"BASE_IMAGE": v}),
    "--cuda-cc": (
        lambda v: ["--cuda-cc", v],
        lambda df, v: re.fullmatch(r"[0-9.,]+|all|local", lex.merged(df, "ENV")["TF_CUDA_COMPUTE_CAPABILITIES"]),
    ),
}


@pytest.mark.parametrize("option", sorted(CLI_RENDER))
@many(30)
@given(value=hostile)
def test_render_options_refused_or_written_safely(capsys, cached_catalog, option, value):
    args, reads_back = CLI_RENDER[option]
    assume(not value.startswith("-"))  # an option, not a value, to the parser
    assume(option != "--env name" or "=" not in value)
    code, out, err = _main(capsys, RENDER + args(value))
    if code != 0:
        _assert_refused(code, out, err)
        return
    assert len(lex.instructions(out)) == BENIGN_COUNT
    assert reads_back(out, value), (option, value)


BUILD = ["build", "-r", "21.08", "--dry-run"]
CLI_BUILD = {
    "--build-id": lambda v: ["--build-id", v],
    "--tag": lambda v: ["--tag", v],
    "--repo": lambda v: ["--repo", v],
    "--env": lambda v: ["--env", f"X={v}"],
}


@pytest.mark.parametrize("option", sorted(CLI_BUILD))
@many(25)
@given(value=hostile)
def test_build_options_are_checked_before_the_engine(capsys, cached_catalog, no_engine, option, value):
    assume(not value.startswith("-"))
    code, out, err = _main(capsys, BUILD + CLI_BUILD[option](value))
    if code is None:  # it got as far as the engine: the value is valid for its target
        assert {
            "--build-id": grammar.BUILD_ID.fullmatch(value),
            "--tag": grammar.reference_problem(value) is None,
            "--repo": grammar.repository_problem(value) is None,
            "--env": grammar.TEXT.fullmatch(value),
        }[option], (option, value)
        return
    _assert_refused(code, out, err)


DERIVE = ["derive", "--from", "local/tensorflow:21.08-tf2-py3", "--tag", "my/tf:1"]
CLI_DERIVE = {
    "--apt": lambda v: ["--apt", v],
    "--pip": lambda v: ["--pip", v],
    "--nvbuild-args": lambda v: ["--nvbuild-args", shlex.quote(v)],
    "--tag": lambda v: ["--apt", "jq", "--tag", v],
    "--from": lambda v: ["--apt", "jq", "--from", v],
}
BENIGN_DERIVED = derive.render(
    derive.DeriveSpec(parent="p", apt=["jq"], pip=["tabulate"], nvbuild_args=["--sm", "8.6"]),
    "local/tensorflow:21.08-tf2-py3",
    "sha256:" + "0" * 64,
    {},
)


@pytest.mark.parametrize("option", sorted(CLI_DERIVE))
@many(25)
@given(value=hostile)
def test_derive_options_refused_or_written_safely(capsys, cached_catalog, no_engine, option, value):
    assume(not value.startswith("-") or option == "--nvbuild-args")
    code, out, err = _main(capsys, DERIVE + CLI_DERIVE[option](value))
    if code is not None:
        _assert_refused(code, out, err)
        return
    if option not in ("--apt", "--pip", "--nvbuild-args"):
        return  # --tag and --from passed Docker's grammar (checked in the tests above)
    spec = derive.DeriveSpec(parent="p", apt=["jq"], pip=["tabulate"], nvbuild_args=["--sm", "8.6"])
    spec = replace(
        spec,
        **{
            "--apt": {"apt": [value]},
            "--pip": {"pip": [value]},
            "--nvbuild-args": {"nvbuild_args": ["--sm", "8.6", value]},
        }[option],
    )
    try:
        text = derive.render(spec, "local/tensorflow:21.08-tf2-py3", "sha256:" + "0" * 64, {})
    except UserError:
        return  # e.g. --nvbuild-args with a bad --sm: refused before the engine too
    ins = lex.instructions(text)
    assert len(ins) == len(lex.instructions(BENIGN_DERIVED))
    if option == "--pip":  # resolved by the builder; the Dockerfile names the request in a comment only
        assert any(line.startswith("# --pip ") and value in line for line in text.splitlines())
    else:
        assert any(value in shlex.split(i.args) for i in ins if i.cmd == "RUN")


# --- the real console script, with bytes that are not UTF-8 ----------------------------------


@pytest.mark.parametrize(
    "args",
    [
        [b"--repo", b"local/x\nRUN touch /tmp/pwned"],
        [b"--repo", b"Local/TF"],
        [b"--repo", b"local/\xff\xfe"],
        [b"--env", b"X=\xff\xfe"],
        [b"--env", b"X=a\rb"],  # (argv cannot hold NUL: in-process tests do)
        [b"--base", b"a\nRUN id"],
    ],
)
def test_console_script_refuses_with_one_line(args):
    result = subprocess.run(
        [b"builder", b"render", b"-r", b"21.08", b"-v", b"tf2-py3", *args], capture_output=True, timeout=60
    )
    assert result.returncode == 2 and result.stdout == b"", result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(b"error: ") and b"Traceback" not in result.stderr


def test_console_script_round_trips_a_hostile_env_value():
    value = "a\"b'c$(touch /tmp/pwned)`id`#&\\ ${PATH} ../ é"
    result = subprocess.run(
        ["builder", "render", "-r", "21.08", "-v", "tf2-py3", "--env", f"X_ENV={value}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert len(lex.instructions(result.stdout)) == BENIGN_COUNT
    assert lex.merged(result.stdout, "ENV")["X_ENV"] == value


def test_a_bad_value_in_a_parent_fails_every_child_without_a_crash(make_catalog):
    parent = 'release: base\nabstract: true\nparent: _common\npython: "x"\n'
    child = GOOD.replace("parent: _common", "parent: base").replace('python: "3.10"\n', "")
    problems = _load_problems(
        make_catalog, {"base.yaml": parent, "30.01.yaml": child, "30.02.yaml": child.replace('"30.01"', '"30.02"')}
    )
    assert [(p.file, p.key) for p in problems] == [("base.yaml", "python")]
