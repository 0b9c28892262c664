"""No module under operator/ over HARD_LINES; none over MAX_LINES unless its docstring says why.

A long module is often several jobs in one file. When it is one job that is simply long
(the CRD's field text, say), its docstring says so in a paragraph starting with MARKER, and
this check lets it pass up to HARD_LINES. The domain's top level holds packages and at most
MAX_DOMAIN_MODULES modules. Exit status 1 listing what is over.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ROOT / "operator"
MAX_LINES = 500
HARD_LINES = 600
MAX_DOMAIN_MODULES = 12
MARKER = "Why over 500 lines:"
#: Modules another branch is splitting; remove an entry once it has landed.
PENDING: set[str] = set()


def main() -> int:
    long_ones = []
    sizes = []
    for path in sorted(PRODUCT.rglob("*.py")):
        text = path.read_text()
        lines = len(text.splitlines())
        where = str(path.relative_to(ROOT))
        sizes.append(lines)
        if lines <= MAX_LINES or where in PENDING:
            continue
        if lines > HARD_LINES:
            long_ones.append(f"{where}: {lines} lines, over {HARD_LINES} (split it)")
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if MARKER not in doc:
            long_ones.append(f"{where}: {lines} lines and no '{MARKER}' in its docstring")
    domain = PRODUCT / "tidb_bench_operator" / "domain"
    top = sorted(p.name for p in domain.glob("*.py") if p.name != "__init__.py")
    if len(top) > MAX_DOMAIN_MODULES:
        long_ones.append(
            f"domain/ holds {len(top)} modules at its top level (at most {MAX_DOMAIN_MODULES}): "
            f"{', '.join(top)}; put related ones in a package"
        )
    for line in long_ones:
        print(line)
    if long_ones:
        print(
            f"\nsplit these modules along their jobs, or say in the docstring why one job "
            f"needs more than {MAX_LINES} lines",
            file=sys.stderr,
        )
        return 1
    print(f"module sizes: {len(sizes)} modules, the longest {max(sizes)} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
