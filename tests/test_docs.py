"""The README and docs/ are run and read as a newcomer would.

Every Python block of a Markdown page is executed, in order, in one namespace per page (Sybil). A block that
needs a GPU, a server, a model download or a long run is preceded by Sybil's own
``<!-- skip: next "why" -->`` comment. Every relative link and every repository path a page names in
backticks must exist, so a moved file cannot leave a page pointing nowhere.
"""

from __future__ import annotations

import os
import re
import unittest
from pathlib import Path

import pytest
from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *ROOT.glob("docs/**/*.md")])
PAGE_IDS = [str(page.relative_to(ROOT)) for page in PAGES]

# A Markdown link's target, without its "#anchor"; absolute URLs and pure anchors are not files.
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")
TOP_LEVEL = sorted(p.name for p in ROOT.iterdir() if not p.name.startswith(".") or p.name == ".ci")
# A path in backticks that starts at a top-level entry of the repository and names a file (`vtb_env/env.py`,
# `scripts/x.sh`) or a folder (`vtb_env/sandbox/`); `rewards/vtb_env_reward/mean` (a logged metric) is no path.
# A path after "not " is named as one that does not exist ("a sibling folder (not `vtb_env/app/`)").
NAMED_PATH = re.compile(r"(?<!not )`(" + "|".join(re.escape(name) for name in TOP_LEVEL) + r")(/[^`\s]*)?`")
# Where a page may name a path it creates or that is not in the repository (run outputs, downloaded data).
NOT_IN_REPOSITORY = ("runs/", "data/", "shared/", ".venv")


def _documents() -> Sybil:
    return Sybil(parsers=[PythonCodeBlockParser(), SkipParser()])


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_python_blocks_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each page's Python blocks run top to bottom in a scratch directory (files they write land there)."""
    monkeypatch.chdir(tmp_path)
    document = _documents().parse(page)
    for example in document.examples():
        try:
            example.evaluate()
        except unittest.SkipTest:  # a block marked to skip; the page's later blocks still run
            continue


def _link_targets(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    return [target for target in LINK.findall(text) if "://" not in target and not target.startswith("mailto:")]


def _named_paths(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    names = [top + (rest or "") for top, rest in NAMED_PATH.findall(text)]
    return [name for name in names if "." in name.rsplit("/", 1)[-1] or name.endswith("/")]


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_relative_links_exist(page: Path) -> None:
    missing = [t for t in _link_targets(page) if not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to files that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_named_repository_paths_exist(page: Path) -> None:
    names = [n.rstrip(".,:;") for n in _named_paths(page) if not n.startswith(NOT_IN_REPOSITORY)]
    missing = [n for n in names if not _exists(n)]
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


def _exists(name: str) -> bool:
    """A named path exists: a file or directory, a test's node id (`tests/x.py::test_y`: the file names the test),
    a brace list (`a.{png,json}`: each of them), or a glob (`shared/seeds/000_*.txt`: something matches)."""
    path, _, test = name.partition("::")
    if test:
        name = re.escape(test.split("::")[-1].split("[")[0])
        defined = rf"^\s*(def {name}\b|class {name}\b|{name}\s*[:=])"
        return os.path.isfile(ROOT / path) and re.search(defined, (ROOT / path).read_text(), re.M) is not None
    braces = re.fullmatch(r"(.*)\{([^}]*)\}(.*)", path)
    if braces:
        head, options, tail = braces.groups()
        return all(_exists(head + option + tail) for option in options.split(","))
    if any(ch in path for ch in "*?["):
        return any(ROOT.glob(path))
    return os.path.exists(ROOT / path)


def test_the_checks_would_fail() -> None:
    """The readers find what they look for, and a missing file or test is reported missing."""
    page = ROOT / "docs" / "rewards.md"
    assert "results/rewards.md" in _link_targets(page)
    assert "vtb_env/sandbox/boot.py" in _named_paths(page)
    assert not _exists("vtb_env/no_such_module.py")
    assert _exists("tests/test_docs.py::test_the_checks_would_fail")
    assert not _exists("tests/test_docs.py::test_no_such_test")
    assert _exists("docs/figures/learning_check_reading.{png,json}")
