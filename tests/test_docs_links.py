"""README.md stays an owner's README, and no link in it or in docs/*.md leads nowhere.

README was once a 780-line lab notebook (issue 40 item 22); its measurements moved to
docs/benchmarks*.md. These checks keep it short, keep the two commands owners copy (CI runs the test
command verbatim, tests/install/test_test_command.py), and catch a link to a doc, image or file that was
moved or renamed, and a ``#section`` anchor that names no heading of the page it points to.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DEMO_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/frame demo"
# Markdown links and images, and HTML <img src>; code spans and blocks are removed before matching.
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|<img[^>]*\bsrc=\"([^\"]+)\"")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def _prose(text: str) -> str:
    return CODE_SPAN.sub("", FENCE.sub("", text))


def _anchors(page: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces to hyphens (duplicates get -1, -2)."""
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", FENCE.sub("", page.read_text(encoding="utf-8")), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower().replace("`", "")).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _links(page: Path) -> list[str]:
    found = LINK.findall(_prose(page.read_text(encoding="utf-8")))
    return [a or b for a, b in found if not re.match(r"[a-z][a-z0-9+.-]*:", a or b)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_an_existing_file_and_heading(page):
    broken = []
    for link in _links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link}: no heading '#{anchor}' in {target.name}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_readme_is_short_and_has_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250, "README is for owners: measurements go to docs/benchmarks*.md"
    ci = (ROOT / ".ci/run").read_text(encoding="utf-8").splitlines()
    test_command = ci[ci.index("# README's test command, verbatim:") + 1].strip()
    lines = text.splitlines()
    assert DEMO_COMMAND in lines and test_command in lines


def test_readme_pictures_are_small_pngs():
    images = [ROOT / link for link in _links(ROOT / "README.md") if link.startswith("docs/images/")]
    assert images, "README shows the phone page and the panel"
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in images)
    assert sum(p.stat().st_size for p in images) <= 400_000, "README's pictures belong in a few hundred KB"


def test_the_link_checker_sees_a_broken_link_and_a_missing_heading(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# A `frame estimate` heading, here\n", encoding="utf-8")
    page.write_text("[a](missing.md) [b](other.md#a-frame-estimate-heading-here) [c](other.md#nope)\n"
                    "`[d](in-code.md)` [e](https://example.org/x.md)\n", encoding="utf-8")
    assert _links(page) == ["missing.md", "other.md#a-frame-estimate-heading-here", "other.md#nope"]
    assert "a-frame-estimate-heading-here" in _anchors(tmp_path / "other.md")


def test_readme_lists_every_docs_page():
    listed = {link for link in _links(ROOT / "README.md") if link.startswith("docs/") and link.endswith(".md")}
    missing = sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md") if f"docs/{p.name}" not in listed)
    assert not missing, f"README's 'Where the docs are' lists no link to {', '.join(missing)}: add one line each"
