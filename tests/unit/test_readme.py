"""README.md stays short and true: under 250 lines, its two commands exactly what a fresh
machine and CI run, the first one planning the image it then tests, and every link of the
README and docs/ pointing at a page (and heading) that exists."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SETUP_AND_BUILD = (
    "bash scripts/setup.sh && builder build --release 21.08 --variant tf2-py3 "
    "&& builder test local/tensorflow:21.08-tf2-py3"
)
TEST = "bash scripts/test.sh"
GUIDE = (
    "first-image",
    "patch-and-rebuild",
    "add-packages",
    "private-registries",
    "sign-and-verify",
    "private-catalog",
    "new-gpus-and-coverage",
    "caches-and-builders",
    "running-on-a-gpu",
    "tensorflow-from-source",
)


def test_the_readme_is_under_250_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 250, f"README.md has {len(lines)} lines: move detail into docs/guide/"


def test_the_two_commands_are_the_readmes_and_ci_runs_the_second():
    text = README.read_text(encoding="utf-8")
    block = text.split("## Two commands", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert commands == [SETUP_AND_BUILD, TEST]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^exec bash scripts/test\.sh\s*$", ci, re.M), ".ci/run must run README's test command"
    assert (ROOT / "scripts" / "setup.sh").is_file() and (ROOT / "scripts" / "test.sh").is_file()


def test_the_first_command_builds_the_tag_it_tests():
    """`builder build --release 21.08 --variant tf2-py3` plans (no engine) the tag the same
    command line then hands to `builder test`."""
    out = subprocess.run(
        [sys.executable, "-m", "builder.cli", "build", "--release", "21.08", "--variant", "tf2-py3", "--dry-run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    plans = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    tested = SETUP_AND_BUILD.rsplit(" ", 1)[1]
    assert any(tested in plan["tags"] for plan in plans), plans


def _anchors(page: Path) -> set[str]:
    out = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def test_the_guide_pages_exist_and_every_link_resolves():
    for name in GUIDE:
        assert (ROOT / "docs" / "guide" / f"{name}.md").is_file(), name
    broken = []
    for page in [README, *sorted((ROOT / "docs").rglob("*.md"))]:
        for link in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", link):
                continue
            path, _, fragment = link.partition("#")
            target = (page.parent / path).resolve() if path else page
            if not target.exists():
                broken.append(f"{page.relative_to(ROOT)}: {link}")
            elif fragment and target.suffix == ".md" and fragment not in _anchors(target):
                broken.append(f"{page.relative_to(ROOT)}: {link} (no such heading)")
    assert broken == []
