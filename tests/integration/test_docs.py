"""The setup the docs give agrees everywhere: the README's Install section is the one in
``docs/index.md``, every page that says how to install names the distribution
``django-ratelimits``, and each face's page points to that one setup."""

from __future__ import annotations

import re

import pytest

from tests.wheel import REPO

DOCS = REPO / "docs"
FACE_PAGES = ("middleware.md", "decorator.md", "async.md", "ninja.md")


def install_section(text: str) -> str:
    start = text.index("\n## Install\n")
    return text[start : text.index("\n## ", start + 1)]


def test_the_readme_and_the_docs_index_give_the_same_install_section() -> None:
    readme = install_section((REPO / "README.md").read_text(encoding="utf-8"))
    index = install_section((DOCS / "index.md").read_text(encoding="utf-8"))
    assert readme.replace("](docs/", "](") == index


def test_the_readme_and_the_docs_index_open_alike() -> None:
    """Everything above the Install section too: the demo's table drifted once."""

    def opening(text: str) -> str:
        return text[: text.index("\n## Install\n")]

    readme = opening((REPO / "README.md").read_text(encoding="utf-8"))
    index = opening((DOCS / "index.md").read_text(encoding="utf-8"))
    assert readme.replace("](docs/", "](") == index


def test_every_pip_install_names_the_distribution() -> None:
    pages = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]
    installs = {
        page.name: re.findall(r"pip install\s+\"?([\w.-]+)", page.read_text(encoding="utf-8"))
        for page in pages
    }
    wrong = {name: found for name, found in installs.items() if "ratelimits" in found}
    assert wrong == {}
    assert "django-ratelimits" in installs["README.md"]


@pytest.mark.parametrize("page", FACE_PAGES)
def test_each_face_page_points_to_the_one_setup(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    assert "pip install" in text and "django-ratelimits" in text
    assert "(index.md#install)" in text
    # No page repeats the whole MIDDLEWARE list (which drifted from the Install section).
    assert "MIDDLEWARE = [" not in text


def test_the_readme_and_the_docs_index_list_the_same_pages() -> None:
    def pages(text: str, heading: str) -> list[str]:
        start = text.index(f"\n## {heading}\n")
        end = text.find("\n## ", start + 1)
        block = text[start : end if end != -1 else None]
        return [line for line in block.splitlines() if line.startswith("- ")]

    readme = pages((REPO / "README.md").read_text(encoding="utf-8"), "Documentation")
    index = pages((DOCS / "index.md").read_text(encoding="utf-8"), "The pages")
    assert [line.replace("](docs/", "](") for line in readme] == index
    listed = {m for line in index for m in re.findall(r"\]\(([\w-]+\.md)", line)}
    assert listed == {page.name for page in DOCS.glob("*.md")} - {"index.md"}
