"""No comment, docstring or document may cite a document that is not in the repository.

Knowledge the code relies on lives in docs/ (or is cited upstream by URL), so a maintainer
can follow every reference. This fails on:
  - a `*.md` file name that no tracked file has (e.g. a design note kept elsewhere);
  - the names of the project's private design notes and of its numbered field notes, in
    any spelling (FACTS / PRODUCT / ARCHITECTURE / TESTBED, "field note 000") — the field
    story is told in docs/field-story.md.
Scans every tracked text file. Exit status 1 with file:line for each finding.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".sh", ".cfg", ".txt", ".ini"}
TEXT_NAMES = {"Makefile", "Dockerfile"}
#: Documents that exist only outside this repository, however they are written.
PRIVATE = re.compile(
    r"\bFACTS\b|\bPRODUCT\.md\b|\bARCHITECTURE\.md\b|\bTESTBED\.md\b|\b[Ff]ield[ -]notes?\b"
)
URL = re.compile(r"\w+://\S+")
MD_NAME = re.compile(r"(?<![\w/.-])((?:\.{1,2}/)*[\w./-]*?[\w-]+\.md)\b")
#: Files whose comments another branch is rewriting; remove an entry once it has landed.
PENDING: set[str] = set()
#: This checker names what it looks for.
SELF = {"scripts/lint/doc_refs.py"}


def tracked() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return [p for p in out.splitlines() if (ROOT / p).is_file()]


def is_text(path: str) -> bool:
    p = Path(path)
    return p.suffix in TEXT_SUFFIXES or p.name in TEXT_NAMES


def md_exists(ref: str, source: str, files: set[str]) -> bool:
    """True when `ref` names a tracked file, relative to `source` or by its path's tail."""
    relative = (ROOT / source).parent / ref
    try:
        if str(relative.resolve().relative_to(ROOT)) in files:
            return True
    except ValueError:
        return False  # points outside the repository
    tail = ref.lstrip("./")
    return any(f == tail or f.endswith("/" + tail) for f in files)


def main() -> int:
    paths = tracked()
    files = set(paths)
    problems: list[str] = []
    for path in paths:
        if not is_text(path) or path in PENDING or path in SELF:
            continue
        for n, line in enumerate((ROOT / path).read_text(errors="replace").splitlines(), 1):
            for m in PRIVATE.finditer(line):
                problems.append(f"{path}:{n}: names {m.group(0)!r}, which is not in the repository")
            for m in MD_NAME.finditer(URL.sub("", line)):  # a URL cites upstream
                if not md_exists(m.group(1), path, files):
                    problems.append(f"{path}:{n}: names {m.group(1)!r}, no such file here")
    for p in problems:
        print(p)
    if problems:
        print(
            f"\n{len(problems)} reference(s) to documents outside the repository: point to "
            "docs/ (write the fact there in your own words, with its upstream source) or to "
            "an upstream URL",
            file=sys.stderr,
        )
        return 1
    print(f"document references: all {len(paths)} tracked files cite only what is here")
    return 0


if __name__ == "__main__":
    sys.exit(main())
