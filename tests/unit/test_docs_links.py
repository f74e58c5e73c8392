"""Every relative link in README.md, CHANGELOG.md and docs/ leads to a file that exists, and to a heading
of it where the link names one (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#+ (.+)$")
CODE_SPAN = re.compile(r"`[^`\n]*`")


def anchor(heading: str) -> str:
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    in_code = False
    found: set[str] = set()
    for line in lines:
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (match := HEADING.match(line)):
            found.add(anchor(match.group(1)))
    return found


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in LINK.findall(CODE_SPAN.sub("", path.read_text(encoding="utf-8"))):
        if "://" in target or target.startswith("mailto:"):
            continue
        file_part, _, fragment = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists() or (fragment and linked.suffix == ".md" and fragment not in anchors(linked)):
            broken.append(target)
    return broken


def test_every_relative_link_of_the_docs_resolves() -> None:
    # Given the README, the changelog and every page under docs/
    # Then no link points at a missing file or heading
    broken = {path.name: links for path in DOCS if (links := broken_links(path))}
    assert broken == {}
