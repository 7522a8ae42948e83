"""Everything checkable before a build is checked before it: nvbuild.sh's options in
--nvbuild-args (known options, capabilities that exist and that the parent's CUDA
compiles) and the -k expression of `builder test`. No engine: a fake one that fails
the test when a build or a container would start."""

import pytest

from builder.cli import main as cli
from builder.core.errors import UserError
from builder.in_image import cuda_arch
from builder.plan import derive


@pytest.mark.parametrize(
    "text,pairs",
    [
        ("--sm 8.6", [("--sm", "8.6")]),
        ("--sm=7.0,8.6 --noclean", [("--sm", "7.0,8.6"), ("--noclean", "")]),
        (
            "--only horovod --clean --v2 --python3.10",
            [("--only", "horovod"), ("--clean", ""), ("--v2", ""), ("--python3.10", "")],
        ),
        ("", []),
    ],
)
def test_known_options_parse(text, pairs):
    args = derive.parse_nvbuild_args(text)
    derive.check_nvbuild_args(args)
    assert derive.nvbuild_options(args) == pairs


@pytest.mark.parametrize(
    "text,message",
    [
        ("--sm 9.9", "--nvbuild-args --sm: compute capability 9.9 is not a GPU architecture"),
        ("--sm 8.6,7.7", "compute capability 7.7 is not a GPU architecture"),
        ("--sm banana", "'banana' is not a compute capability"),
        ("--sm", "--sm needs a value"),
        ("--only tests", "--only 'tests': expected 'extension', 'dali', 'horovod'"),
        ("--frobnicate", "unknown nvbuild.sh option '--frobnicate'"),
        ("8.6", "unknown nvbuild.sh option '8.6'"),
        ("--python3", "unknown nvbuild.sh option '--python3'"),
        ("--configonly", "would not build the framework"),
        ("--cache http://user:pw@cache:8742/", "give the compile cache as --compile-cache URL"),
        ("'--sm 8.6", "--nvbuild-args: No closing quotation"),
    ],
)
def test_bad_nvbuild_args_are_refused(text, message):
    with pytest.raises(UserError, match=None) as exc:
        derive.DeriveSpec(parent="p", nvbuild_args=derive.parse_nvbuild_args(text)).validate()
    assert message in str(exc.value)


def parent(labels=None, env=None):
    return {"Id": "sha256:" + "1" * 64, "Config": {"Labels": labels or {}, "Env": env or []}}


@pytest.mark.parametrize(
    "info,sm,refused",
    [
        (parent({"dev.tfbuilder.cuda": "11.4.1"}), "8.6", False),
        (parent({"dev.tfbuilder.cuda": "11.4.1"}), "8.9", True),  # Ada needs CUDA 11.8
        (parent(env=["CUDA_VERSION=11.4.1"]), "9.0", True),  # the base's env when no label
        (parent(env=["CUDA_VERSION=12.2.0"]), "9.0", False),
        (parent(env=["CUDA_VERSION=11.4.1"]), "all", False),  # the parent's own list
        (parent(), "8.9", False),  # nothing known: nvbuild.sh decides
    ],
)
def test_capabilities_against_the_parents_cuda(info, sm, refused):
    spec = derive.DeriveSpec(parent="p", nvbuild_args=["--sm", sm])
    if refused:
        with pytest.raises(
            UserError, match=rf"compute capability {sm} cannot be compiled for CUDA .*\(the CUDA of p\)"
        ):
            derive.check_capabilities(spec, "p", info)
    else:
        derive.check_capabilities(spec, "p", info)


def test_a_derived_image_may_leave_blackwell_to_ptx_jit_when_it_says_so():
    info = parent({"dev.tfbuilder.cuda": "12.4.1"})
    with pytest.raises(UserError, match=r"12.0 cannot be compiled for CUDA 12.4.1.*--allow-ptx-jit"):
        derive.check_capabilities(derive.DeriveSpec(parent="p", nvbuild_args=["--sm", "8.0,12.0"]), "p", info)
    derive.check_capabilities(
        derive.DeriveSpec(parent="p", nvbuild_args=["--sm", "8.0,12.0", "--allow-ptx-jit"]), "p", info
    )


def test_a_parent_whose_nvbuild_assembles_takes_blackwell_natively():
    """A 26.11 image says (label) that its nvbuild.sh has the cuda_nvcc wheel's ptxas 12.9
    beside nvcc 12.4: --sm 10.0,12.0 is machine code there, no opt-in. An image without
    the label (built before, or another release) is not."""
    spec = derive.DeriveSpec(parent="p", nvbuild_args=["--sm", "9.0,10.0,12.0"])
    assembles = {"dev.tfbuilder.cuda": "12.4.1", "dev.tfbuilder.ptxas": "12.9"}
    derive.check_capabilities(spec, "p", parent(assembles))
    assert derive._label_capabilities(spec, assembles) == "9.0,10.0,12.0"
    with pytest.raises(UserError, match="12.0 cannot be compiled"):
        derive.check_capabilities(spec, "p", parent({"dev.tfbuilder.cuda": "12.4.1", "dev.tfbuilder.release": "26.11"}))
    jit = derive.DeriveSpec(parent="p", nvbuild_args=["--sm", "9.0,12.0", "--allow-ptx-jit"])
    assert derive._label_capabilities(jit, {"dev.tfbuilder.cuda": "12.4.1"}) == "9.0"  # what it really compiles


class NoBuildEngine:
    """Answers questions about the parent; building or running anything fails the test."""

    def __init__(self, info):
        self.info = info

    def image_labels(self, ref):
        return dict(self.info["Config"]["Labels"])

    def inspect(self, ref):
        return self.info

    def __getattr__(self, name):
        pytest.fail(f"engine.{name} called: something ran before the checks")


def one_line_error(capsys, code):
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_derive_refuses_a_capability_the_parents_cuda_cannot_compile(monkeypatch, capsys):
    info = parent({"dev.tfbuilder.release": "21.08", "dev.tfbuilder.cuda": "11.4.1"})
    monkeypatch.setattr(cli, "_engine", lambda: NoBuildEngine(info))
    code = cli.main(
        [
            "derive",
            "--from",
            "local/tensorflow:21.08-tf2-py3",
            "--tag",
            "my/tf:1",
            "--nvbuild-args",
            "--sm 8.9",
            "--no-host-ca",
        ]
    )
    assert "compute capability 8.9 cannot be compiled for CUDA 11.4.1" in one_line_error(capsys, code)


def test_derive_refuses_an_unknown_capability_before_reaching_the_engine(monkeypatch, capsys):
    monkeypatch.setattr(cli, "_engine", lambda: pytest.fail("the engine was reached"))
    code = cli.main(["derive", "--from", "x:1", "--tag", "my/tf:1", "--nvbuild-args", "--sm 9.9"])
    assert "9.9 is not a GPU architecture" in one_line_error(capsys, code)


@pytest.mark.parametrize("expr", ["foo(", "a and", "not", "(x or y", "x y"])
def test_a_malformed_k_expression_is_one_line_before_anything_runs(monkeypatch, capsys, expr):
    monkeypatch.setattr(cli, "_engine", lambda: pytest.fail("the engine was reached"))
    code = cli.main(["test", "some/image:1", "-k", expr])
    line = one_line_error(capsys, code)
    assert line.startswith(f"error: -k {expr!r} is not a pytest expression")


@pytest.mark.parametrize("expr", ["gpu", "not gpu and banner", "test_x or (a and not b)"])
def test_valid_k_expressions_pass_the_check(expr):
    from builder.image.conformance import runner

    runner.check_select(expr)


@pytest.mark.parametrize("option", ["--patch", "--horovod-patch"])
@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_an_empty_patch_is_refused(tmp_path, monkeypatch, capsys, option, content):
    p = tmp_path / "empty.patch"
    p.write_text(content)
    monkeypatch.setattr(cli, "_engine", lambda: pytest.fail("the engine was reached"))
    code = cli.main(["derive", "--from", "x:1", "--tag", "my/tf:1", option, str(p)])
    assert one_line_error(capsys, code) == f"error: {option} {p}: the patch is empty"


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ARGS = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "--sm",
                "--only",
                "--cache",
                "--noclean",
                "--clean",
                "--v1",
                "--v2",
                "--python3.9",
                "--configonly",
                "8.6",
                "9.9",
                "all",
                "local",
                "horovod",
                "--sm=8.6",
                "--sm=",
                "-x",
                "$(id)",
                "a;b",
                "\n",
            ]
        ),
        st.text(max_size=12),
    ),
    max_size=6,
)


@settings(max_examples=2000, deadline=None)
@given(ARGS)
def test_nvbuild_args_are_refused_or_all_known(args):
    try:
        derive.check_nvbuild_args(args)
    except UserError as exc:
        assert "\n" not in str(exc)  # one line, whatever the arguments hold
        return
    for name, value in derive.nvbuild_options(args):
        assert name in derive.NVBUILD_VALUE_OPTIONS + derive.NVBUILD_FLAGS or name.startswith("--python3.")
        if name == "--only":
            assert value in ("extension", "horovod")
        if name == "--sm" and value not in ("all", "local"):
            assert all(a in {f"{m}.{n}" for m, n in cuda_arch.KNOWN_ARCHS} for a in cuda_arch.parse(value))


def test_a_derived_image_says_what_it_compiled_when_blackwell_is_left_to_ptx_jit():
    labels = {"dev.tfbuilder.cuda": "11.2"}
    text = derive.render(
        derive.DeriveSpec(parent="p", nvbuild_args=["--sm", "8.6,12.0", "--allow-ptx-jit"]),
        "p:1",
        "sha256:" + "a" * 64,
        labels,
    )
    assert 'ENV TF_CUDA_COMPUTE_CAPABILITIES="8.6"' in text  # CUDA 11.2 compiles up to 8.6; 12.0 JITs compute_86
    assert "--sm 8.6,12.0 --allow-ptx-jit" in text  # nvbuild.sh resolves the same list in the image
    plain = derive.render(
        derive.DeriveSpec(parent="p", nvbuild_args=["--sm", "8.0,8.6"]), "p:1", "sha256:" + "a" * 64, labels
    )
    assert 'ENV TF_CUDA_COMPUTE_CAPABILITIES="8.0,8.6"' in plain
