"""Every relative Markdown link in README.md and docs/ leads somewhere in the repository.

A link `[text](path)` or `![alt](path)` must name a file or directory that exists, relative
to the document (a leading `/` is the repository's root) and inside the repository;
`[text](path#anchor)` and `[text](#anchor)` must also name a heading of the Markdown file
it points to, as GitHub makes anchors of headings: lower case, every character other than
letters, digits, spaces, `-` and `_` dropped, spaces turned into `-`, and `-1`, `-2`, ...
appended to repeated headings. Links with a scheme (`https:`, `mailto:`), links inside code
(spans or fenced blocks) and ATX headings inside fenced blocks are not links or headings.
Exit status 1 with `file:line: link` for each broken one.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"!?\[(?:[^\[\]\\]|\\.|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'][^)]*)?\)")
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)")
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
INLINE_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def prose_lines(text: str) -> Iterable[tuple[int, str]]:
    """The document's lines outside fenced code blocks, numbered from 1."""
    fence: str | None = None
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m:
            mark = m.group(1)
            if fence is None:
                fence = mark
                continue
            if mark[0] == fence[0] and len(mark) >= len(fence):
                fence = None
                continue
        if fence is None:
            yield n, line


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading's text (before de-duplication)."""
    text = INLINE_LINK.sub(r"\1", heading)  # a link in a heading counts by its text
    text = text.replace("`", "").replace("*", "")
    text = "".join(ch for ch in text.lower() if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor the headings of a Markdown document produce."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for _, line in prose_lines(text):
        m = HEADING.match(line)
        if not m:
            continue
        base = github_anchor(m.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def links(text: str) -> list[tuple[int, str]]:
    """(line, target) of every link outside code, in document order."""
    found: list[tuple[int, str]] = []
    for n, line in prose_lines(text):
        spans = [m.span() for m in CODE_SPAN.finditer(line)]
        for m in LINK.finditer(line):
            if any(a <= m.start() < b for a, b in spans):
                continue
            found.append((n, m.group(1)))
    return found


def is_relative(target: str) -> bool:
    return not SCHEME.match(target) and not target.startswith("//")


def broken(root: Path, doc: Path, target: str) -> bool:
    """True when a relative link from `doc` leads to nothing in the repository at `root`."""
    path, _, anchor = target.partition("#")
    if not path:
        dest = doc
    elif path.startswith("/"):
        dest = root / path.lstrip("/")
    else:
        dest = doc.parent / path
    dest = dest.resolve()
    if not dest.is_relative_to(root.resolve()) or not dest.exists():
        return True
    if not anchor:
        return False
    if dest.is_dir() or dest.suffix.lower() != ".md":
        return True  # only a Markdown file's headings make anchors
    return anchor.lower() not in anchors(dest.read_text(errors="replace"))


def documents(root: Path) -> list[Path]:
    """README.md and every Markdown file under docs/."""
    docs = sorted((root / "docs").rglob("*.md")) if (root / "docs").is_dir() else []
    readme = root / "README.md"
    return ([readme] if readme.is_file() else []) + docs


def check(root: Path) -> tuple[int, list[str]]:
    """(how many relative links were checked, `file:line: link` for each broken one)."""
    checked = 0
    problems: list[str] = []
    for doc in documents(root):
        for n, target in links(doc.read_text(errors="replace")):
            if not is_relative(target):
                continue
            checked += 1
            if broken(root, doc, target):
                problems.append(f"{doc.relative_to(root)}:{n}: {target}")
    return checked, problems


def main(root: Path = ROOT) -> int:
    checked, problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(
            f"\n{len(problems)} of {checked} relative link(s) lead nowhere: fix the path, or "
            "the heading the #anchor names",
            file=sys.stderr,
        )
        return 1
    print(f"document links: all {checked} relative links in README.md and docs/ resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
