"""The README is a front door (at most 400 lines, linking every docs/ page), and every relative
link of the README and the docs/ pages resolves, anchors included (GitHub's anchor rules)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.paths import DOC_FILES, DOCS
from helpers.paths import REPO as ROOT

README_MAX_LINES = 400

# --- the README is a front door, and every link lands -----------------------------------------------------


LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def headings_outside_code(text: str) -> list[str]:
    found, fence = [], None
    for line in text.splitlines():
        stripped = line.strip()
        match = re.match(r"^(`{3,}|~{3,})", stripped)
        if match and (fence is None or stripped.startswith(fence)):
            fence = match.group(1) if fence is None else None
            continue
        if fence is None and re.match(r"^#{1,6} ", line):
            found.append(line.lstrip("#").strip())
    return found


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a markdown file, and explicit <a id=...> / <a name=...> ones."""
    text = path.read_text(encoding="utf-8")
    seen: dict[str, int] = {}
    result = set(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
    for heading in headings_outside_code(text):
        plain = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
        slug = re.sub(r"[^\w\- ]", "", plain.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def links_of(path: Path) -> list[tuple[int, str]]:
    found, fence = [], None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = re.match(r"^(`{3,}|~{3,})", line.strip())
        if match and (fence is None or line.strip().startswith(fence)):
            fence = match.group(1) if fence is None else None
            continue
        if fence is None:
            line = re.sub(r"`[^`]*`", "", line)  # links inside inline code are text
            found += [(number, a or b) for a, b in LINK.findall(line)]
    return found


def test_the_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; at most {README_MAX_LINES}: move detail to docs/"


def test_the_readme_links_every_docs_page_and_each_exists() -> None:
    linked = set()
    for number, target in links_of(ROOT / "README.md"):
        file_part = target.split("#")[0]
        if file_part.startswith("docs/") and file_part.endswith(".md"):
            assert (ROOT / file_part).is_file(), f"README.md:{number}: {target} does not exist"
            linked.add(file_part)
    pages = {f"docs/{page.name}" for page in DOCS.glob("*.md")}
    assert pages, "docs/ has no pages"
    assert not pages - linked, f"README.md links no {sorted(pages - linked)}"


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_and_anchor_resolves(path: Path) -> None:
    broken = []
    for number, target in links_of(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if not destination.exists():
            broken.append(f"{path.relative_to(ROOT)}:{number}: {target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{path.relative_to(ROOT)}:{number}: {target}: no heading #{anchor}")
    assert not broken, "\n".join(broken)
