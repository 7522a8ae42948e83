"""Hostile text: secrets found by
structure, catalog parent chains of any length, control characters in catalog free text,
and error lines that quote 10 kB values. No engine (a fake one where a command needs it)."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from builder import catalog
from builder.cli import doctor_report
from builder.cli import main as cli
from builder.core import errors, grammar, quoting, redact, terminal
from builder.core.errors import CatalogError, UserError
from builder.engine import DockerEngine, Progress, buildkit_engine, buildx
from builder.engine.progress import ProgressMode
from builder.in_image import cuda_arch
from tests.unit.conftest import GOOD
from tests.unit.fake_engine import FakeEngine

ROOT = Path(__file__).resolve().parents[2]


def one_line_error(capsys, code: int) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


# --- 9. a proxy password is found by the URL's structure, whatever it holds ----------------
# Each password is made of pieces that appear nowhere else in a plan, so that "no piece of
# it is shown" can be checked piece by piece.
PASSWORDS = {
    "delimiters": ("Zq#Xj/Vk?Wy", ["Zq", "Xj", "Vk", "Wy"]),  # urlsplit ends userinfo at # / ?
    "at-signs": ("Qz@Jx@Kv", ["Qz", "Jx", "Kv"]),  # the URL pattern stopped at the first '@'
    "quote-and-accent": ('Yq"Xé/Wv', ["Yq", "Xé", "Wv"]),  # JSON escapes '"' and 'é'
}


def proxy_value(password: str, scheme: bool = True) -> str:
    return f"{'http://' if scheme else ''}u:{password}@proxy.corp:3128"


def shows_none_of(text: str, pieces: list[str]) -> bool:
    return not [p for p in pieces if p in text or json.dumps(p)[1:-1] in text]


@pytest.mark.parametrize("case", sorted(PASSWORDS))
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("scheme", [True, False], ids=["url", "no-scheme"])
def test_a_proxy_password_never_shows_in_the_dry_run(case, as_json, scheme, monkeypatch, capsys):
    password, pieces = PASSWORDS[case]
    monkeypatch.setattr(cli, "_engine", lambda: FakeEngine())
    code = cli.main(
        [
            "build",
            "--release",
            "21.08",
            "--dry-run",
            "--no-host-ca",
            *(["--json"] if as_json else []),
            "--build-arg",
            f"HTTPS_PROXY={proxy_value(password, scheme)}",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "proxy.corp:3128" in out and shows_none_of(out + err, pieces), out


# Credentials where no option takes them: refused, and the refusal shows no piece of them.
MISPLACED = {
    "pip-index-no-host-after": ["--pip-index", "https://u:Zq#Xj/Vk?Wy@y@/simple"],
    "pip-index-no-scheme": ["--pip-index", "u:Zq@pypi.corp/simple"],
    "tag": ["-t", "u:Zq@127.0.0.1:5000/x:y"],
    "layer-cache": ["--layer-cache", "u:Zq@127.0.0.1:5000/cache"],
}


@pytest.mark.parametrize("case", sorted(MISPLACED))
def test_credentials_in_a_value_that_takes_none_are_refused_unshown(case, monkeypatch, capsys):
    monkeypatch.setattr(cli, "_engine", lambda: FakeEngine())
    code = cli.main(
        ["build", "--release", "21.08", "--variant", "tf2-py3", "--dry-run", "--no-host-ca", *MISPLACED[case]]
    )
    line = one_line_error(capsys, code)
    assert shows_none_of(line, ["Zq", "Xj", "Vk", "Wy"]), line


@pytest.mark.parametrize("case", sorted(PASSWORDS))
def test_a_proxy_password_never_shows_in_the_rawjson_stream(case, monkeypatch, capsys):
    """Both backends' rawjson: the legacy builder's messages (redacted as JSON text) and
    buildx's SolveStatus logs (base64, redacted decoded)."""
    password, pieces = PASSWORDS[case]
    value = proxy_value(password)
    monkeypatch.setattr(cli, "_engine", lambda: FakeEngine())
    assert (
        cli.main(["build", "--release", "21.08", "--dry-run", "--no-host-ca", "--build-arg", f"HTTP_PROXY={value}"])
        == 0
    )
    capsys.readouterr()
    legacy = io.StringIO()
    Progress("b", stream=legacy, mode=ProgressMode.RAWJSON, clock=lambda: 0.0).on_raw(
        {"stream": f"Step 2/9 : ENV HTTP_PROXY={value} no_proxy=localhost\n"}
    )
    kit = io.StringIO()
    progress = Progress("b", stream=kit, mode=ProgressMode.RAWJSON, clock=lambda: 0.0)
    job = buildx.Job([], lambda event: buildkit_engine.record(event, progress, None))
    job.feed(
        {
            "vertexes": [{"digest": "sha256:a", "name": "[1/1] RUN env", "started": "2026-01-01T00:00:00Z"}],
            "logs": [{"vertex": "sha256:a", "data": base64.b64encode(f"HTTP_PROXY={value}\n".encode()).decode()}],
        }
    )
    shown = [json.loads(line) for line in legacy.getvalue().splitlines() + kit.getvalue().splitlines()]
    texts = [shown[0]["stream"], base64.b64decode(shown[1]["logs"][0]["data"]).decode()]
    assert all("proxy.corp:3128" in t and shows_none_of(t, pieces) for t in texts), texts


@pytest.mark.parametrize(
    "url,user,password",
    [
        ("http://u:p#a/ss?w@proxy:3128", "u", "p#a/ss?w"),
        ("http://u:p@ss@proxy:3128/", "u", "p@ss"),
        ("u:pw@proxy:3128", "u", "pw"),
        ("http://t0ken-only@proxy", "t0ken-only", ""),
        ("http://me@corp:pw@[::1]:3128", "me@corp", "pw"),
        ("http://proxy:3128", None, None),
    ],
)
def test_userinfo_is_parsed_by_structure(url, user, password):
    assert redact.userinfo(url) == (None if user is None else (user, password))


@pytest.mark.parametrize(
    "text,shown",
    [
        ("via http://bob:Zq#Xj/Vk?Wy@proxy:3128/x then", "via http://bob:***@proxy:3128/x then"),
        ("via http://bob:Qz@Jx@proxy then", "via http://bob:***@proxy then"),
        ('{"a":"http://bob:pw@h","b":"x@y"}', '{"a":"http://bob:***@h","b":"x@y"}'),  # a JSON line stays JSON
        # not userinfo: an image digest, a pip VCS pin, a path with ':'
        ("docker-image://localhost:5000/base@sha256:abc123", "docker-image://localhost:5000/base@sha256:abc123"),
        ("git+https://github.com/org/repo@v1.2", "git+https://github.com/org/repo@v1.2"),
    ],
)
def test_foreign_urls_are_redacted_by_structure(text, shown):
    assert redact.redact(text) == shown


# --- 13. a parent chain of any length is resolved without recursion ------------------------


def chain_files(depth: int, cycle: bool = False) -> dict[str, str]:
    """c0000 <- c0001 <- ... (abstract), then 30.01 (GOOD) on the last; or a cycle of them."""
    files = {}
    for i in range(depth):
        parent = f"c{i - 1:04d}" if i else (f"c{depth - 1:04d}" if cycle else "_common")
        files[f"c{i:04d}.yaml"] = f'release: "c{i:04d}"\nparent: "{parent}"\nabstract: true\n'
    files["30.01.yaml"] = GOOD.replace("parent: _common", f'parent: "c{depth - 1:04d}"')
    return files


def releases_cli(directory: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "builder.cli", "releases"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**__import__("os").environ, "BUILDER_CATALOG": str(directory)},
    )


@pytest.mark.parametrize("cycle", [False, True], ids=["chain", "cycle"])
def test_a_1500_deep_parent_chain_is_one_line_not_a_recursion_error(make_catalog, cycle):
    result = releases_cli(make_catalog(chain_files(1500, cycle)))
    lines = result.stderr.splitlines()
    assert result.returncode == 2 and lines[0] == "error: invalid release catalog:", result.stderr[-2000:]
    assert len(lines) == 2 and len(lines[1]) < 300, lines
    if cycle:
        assert (
            lines[1].startswith("  c") and "parent: inheritance cycle: " in lines[1] and "(1500 releases)" in lines[1]
        )
    else:
        assert lines[1].startswith(
            f"  c{catalog.MAX_PARENTS:04d}.yaml: parent: inherits through more than {catalog.MAX_PARENTS} parents"
        ), lines


def test_a_chain_within_the_bound_loads(make_catalog):
    files = chain_files(catalog.MAX_PARENTS - 1)
    files["c0005.yaml"] += 'env: {FROM_AN_ANCESTOR: "c5"}\n'
    release = catalog.load(make_catalog(files)).get("30.01")
    assert release.env["FROM_AN_ANCESTOR"] == "c5" and release.parent == f"c{catalog.MAX_PARENTS - 2:04d}"


def test_a_short_cycle_and_an_unknown_parent_are_one_problem_each(make_catalog):
    files = {
        "30.01.yaml": GOOD.replace("parent: _common", 'parent: "30.02"'),
        "30.02.yaml": 'release: "30.02"\nparent: "30.01"\n',
        "30.03.yaml": GOOD.replace('release: "30.01"', 'release: "30.03"').replace("parent: _common", 'parent: "nope"'),
    }
    with pytest.raises(CatalogError) as exc:
        catalog.load(make_catalog(files))
    assert [str(p) for p in exc.value.problems] == [
        "30.01.yaml: parent: inheritance cycle: 30.01 -> 30.02 -> 30.01",
        "30.03.yaml: parent: unknown parent 'nope'",
    ]


# --- 14. catalog free text holds no control, C0, C1 or separator -----------------------------
# YAML escapes, so the file itself is plain: \x85 (NEL), \x9b (CSI), \u2028/\u2029 (line and
# paragraph separators), \t, \u202e (right-to-left override), \x1b.
HOSTILE = [
    r"\x85",
    r"\x9b",
    r"\u2028",
    r"\u2029",
    r"\t",
    r"\u202e",
    r"\x1b",
    r"\u200b",
    r"\ufeff",
    r"\xad",
    r"\U000e0041",
]  # invisible: zero-width space, BOM, soft hyphen, a tag
FIELDS = {
    "entrypoint.title": ('entrypoint: {title: "My{c}Title"}\n', "one line of text"),
    "vendor.name": ('vendor: {name: "Acme{c}Corp"}\n', "one line of text"),
    "env.GREETING": ('env: {GREETING: "hi{c}there"}\n', "a value an image can carry"),
    "labels.com.example.note": ('labels: {com.example.note: "a{c}b"}\n', "label text"),
    "variants.tf2-py3.env.X": (None, "a value an image can carry"),
    "jupyter": ('jupyter: "absent: not{c}here"\n', "absent: WHY"),
}


@pytest.mark.parametrize("char", HOSTILE)
@pytest.mark.parametrize("field", sorted(FIELDS))
def test_catalog_free_text_with_a_control_is_a_located_problem(make_catalog, field, char):
    extra, what = FIELDS[field]
    if extra is None:
        text = GOOD.replace(
            'framework: {version: "2.14.1"}', 'framework: {version: "2.14.1"}\n    env: {X: "a%sb"}' % char
        )
    else:
        text = GOOD + extra.replace("{c}", char)
    with pytest.raises(CatalogError) as exc:
        catalog.load(make_catalog({"30.01.yaml": text}))
    (problem,) = [str(p) for p in exc.value.problems]
    assert problem.startswith(f"30.01.yaml: {field}: ") and what in problem, problem
    assert terminal.escape(problem).isprintable()


def test_catalog_text_refuses_every_invisible_format_character():
    """Unicode's Cf (format) characters print as nothing: each would hide text in a banner
    or a label. Checked against the running Python's Unicode database, not a copy."""
    import sys
    import unicodedata

    admitted = [
        hex(ord(c))
        for c in map(chr, range(sys.maxunicode + 1))
        if unicodedata.category(c) == "Cf" and grammar.matches(grammar.CATALOG_TEXT, f"a{c}b")
    ]
    assert admitted == []


def test_the_shipped_catalog_and_plain_unicode_still_load(make_catalog):
    catalog.load()
    text = GOOD + 'vendor: {name: "Ünïcødé Café 日本 — ok"}\nenv: {GREETING: "héllo wörld"}\n'
    assert catalog.load(make_catalog({"30.01.yaml": text})).get("30.01").vendor.name == "Ünïcødé Café 日本 — ok"


@pytest.mark.parametrize("char", ["\x85", "\x9b", "\u2028", "\u2029"])
def test_no_writer_takes_a_c1_control_or_a_separator(char):
    """The writers' last check (scripts, Dockerfiles, env files) is the same grammar."""
    for write in (quoting.shell_word, quoting.dockerfile_string, quoting.comment_text):
        with pytest.raises(quoting.QuotingError):
            write(f"a{char}b")
    assert not grammar.matches(grammar.TEXT, f"a{char}b") and not grammar.matches(grammar.NVBUILD_FLAG, f"-a{char}")
    assert grammar.printable(f"a{char}b").isprintable() and terminal.escape(f"a{char}b").isprintable()


# --- 15. error lines cut long values; doctor's lines are escaped ---------------------------


def test_a_10_kb_option_value_is_cut_in_its_error_line(monkeypatch, capsys):
    monkeypatch.setattr(cli, "_engine", lambda: pytest.fail("the engine was reached"))
    line = one_line_error(capsys, cli.main(["build", "--release", "21.08", "--dry-run", "--cuda-cc", "x" * 10000]))
    assert len(line) < 300 and "(10000 characters)" in line and "is not a compute capability" in line, line[:400]


def test_cuda_arch_messages_are_short_inside_images_too():
    """cuda_arch runs in images on its own: its messages bound and escape a value themselves."""
    for bad in (
        lambda: cuda_arch.parse("8" * 10000 + "x"),
        lambda: cuda_arch.supported_archs("8.0" + "y" * 9000),
        lambda: cuda_arch.parse("\x1b[2J\x9b"),
    ):
        with pytest.raises(cuda_arch.ArchError) as exc:
            bad()
        assert len(str(exc.value)) < 200 and str(exc.value).isprintable(), str(exc.value)


def test_the_one_printer_cuts_every_long_value_and_line(capsys):
    """engine.inspect's `cannot inspect 'REF': EXPLANATION` and any other error quoting
    what it was given: each long word shows its start and length, each line is bounded."""
    terminal.say(UserError(f"cannot inspect '{'r' * 10000}': {'e' * 10000}").report())
    terminal.say(errors.CatalogError([errors.Problem("a.yaml", "env.X", "word " * 3000)]).report())
    terminal.say("error: " + "\x1b" * 5000)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 4 and all(len(line) <= terminal.LINE_MAX + 100 and line.isprintable() for line in lines)
    assert lines[0].startswith("error: cannot inspect 'rrrr") and "... (10003 characters)" in lines[0]
    assert "(10000 characters)" in lines[0] and "characters left out" in lines[2]


def test_doctor_shows_docker_host_escaped_and_redacted(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://bob:Hq7pw@x\x1b[31mred\x9b2J\u2028:2375")
    with pytest.raises(UserError) as exc:
        DockerEngine(timeout=5)
    text, healthy = doctor_report.report(
        [doctor_report.Check("engine", False, str(exc.value), advice="see \x1b]0;t\x07")]
    )
    assert not healthy and "Hq7pw" not in text and all(line.isprintable() for line in text.split("\n")), text
    assert "\\x1b[31mred\\x9b2J\\u2028" in text
    shown = json.dumps(doctor_report.report_json([doctor_report.Check("engine", False, str(exc.value))]))
    assert "Hq7pw" not in shown and "\\u001b" in shown
