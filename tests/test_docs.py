"""The documentation cannot go stale: every runnable example of README.md and docs/ runs on a
tiny budget (`docs/examples.py` says which blocks run and how), the site builds with
`mkdocs build --strict`, its Config reference lists every field of `Config`, and, where
Chromium is installed, every page opens in it with its navigation, images and links intact."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xiaoyarl.config import Config

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT / "docs" / "examples.py"  # the docs' example runner, a script beside check_site.py


def _load_runner():
    spec = importlib.util.spec_from_file_location("docs_examples", RUNNER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_RUNNER = _load_runner()
pages, steps = _RUNNER.pages, _RUNNER.steps


def run_steps(found: list[dict], folder: Path) -> list[dict]:
    """Run the steps in one fresh process in `folder`; one outcome per step."""
    todo = [s for s in found if s["kind"] in ("python", "cli", "file")]
    (folder / "steps.json").write_text(json.dumps(todo))
    done = subprocess.run([sys.executable, str(RUNNER), "steps.json"], cwd=folder,
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    outcomes = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(outcomes) == len(todo), done.stderr[-3000:]
    return outcomes


PAGES = [p for p in pages() if steps(p)]


@pytest.mark.docs
@pytest.mark.timeout(900)
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_examples_run(page: Path, tmp_path: Path):
    found = steps(page)
    unknown = [f"{s['where']}: {s['what']}" for s in found if s["kind"] in ("unknown", "missing")]
    assert not unknown, "commands that are neither run nor marked `not run`:\n" + "\n".join(unknown)
    outcomes = run_steps(found, tmp_path)
    failed = [f"{o['where']}:\n{o['output']}" for o in outcomes if o["status"] == "failed"]
    assert not failed, "\n\n".join(failed)
    skipped = [f"{o['where']}: {o['why']}" for o in outcomes if o["status"] == "skipped"]
    ran = [o for o in outcomes if o["status"] == "ok"]
    print(f"{len(ran)} examples ran; skipped: {skipped or 'none'}")


def test_a_broken_example_fails(tmp_path: Path):
    """The runner reports a broken Python block and a broken command as failures, so a page
    with either fails its test."""
    page = tmp_path / "broken.md"
    page.write_text(
        "```python\nfrom xiaoyarl import Config\nConfig(learning_rat=1)\n```\n\n"
        "```bash\nxiaoyarl train ppo CartPole-v1 --no-such-flag\n```\n\n"
        "```bash\nxiaoyarl list\n```\n"
    )
    found = steps(page, root=tmp_path)
    assert [s["kind"] for s in found] == ["python", "cli", "cli"]
    assert [o["status"] for o in run_steps(found, tmp_path)] == ["failed", "failed", "ok"]


def test_not_run_blocks_give_their_reason_and_commands_are_known():
    for page in pages():
        for step in steps(page):
            assert step["kind"] not in ("unknown", "missing"), step
            if step["kind"] == "skip":
                assert step["what"].strip(), f"{step['where']}: `not run` without a reason"


def test_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move the details to docs/"
    text = "\n".join(lines)
    assert "make demo" in text and "make test" in text and "make docs" in text


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")
    pytest.importorskip("mkdocstrings")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d",
                           str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**__import__("os").environ,
                                            "NO_MKDOCS_2_WARNING": "1"})  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.mark.docs
def test_config_reference_lists_every_field(site: Path):
    page = (site / "reference" / "config.html").read_text()
    listed = re.findall(r'id="field-(\w+)"', page)
    assert listed == [f.name for f in dataclasses.fields(Config)]


@pytest.mark.docs
def test_cli_reference_lists_every_command(site: Path):
    from xiaoyarl.cli import build_parser

    page = (site / "reference" / "cli.html").read_text()
    commands = next(a for a in build_parser()._actions if hasattr(a, "choices") and a.choices)
    for name in commands.choices:
        assert f"xiaoyarl {name}</code>" in page, name


@pytest.mark.docs
def test_site_fetches_nothing_from_the_network(site: Path):
    remote = []
    for path in site.rglob("*.html"):
        text = path.read_text()
        for tag in re.findall(r"<(?:script|link|img)\b[^>]*>", text):
            if re.search(r"(?:src|href)=\"(?:https?:)?//", tag):
                remote.append(f"{path.relative_to(site)}: {tag}")
    assert not remote, "\n".join(remote[:20])


@pytest.mark.docs
@pytest.mark.timeout(600)
def test_site_in_a_headless_browser(site: Path, tmp_path: Path):
    """docs/check_site.py: every page in Chromium, links, images, highlighting, screenshots."""
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    pytest.importorskip("selenium")
    shots = tmp_path / "shots"
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "check_site.py"), str(site),
                           "--screenshots", str(shots)], capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert {p.name for p in shots.glob("*.png")} == {"home.png", "guide.png", "reference.png"}
