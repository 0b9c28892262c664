"""No module under operator/ imports another module's private (underscore) name.

A name starting with `_` is private to its module; what two modules share is public and has
one home (docs/design.md, "House style"). This fails on `from tidb_bench_operator.x import _y`
and on `x._y` where `x` is a module of the package imported by name. Dunder names
(`__version__`) are public. Exit status 1 with file:line for each finding.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ROOT / "operator"
PACKAGE = "tidb_bench_operator"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def findings(path: Path) -> list[str]:
    """Each cross-module private import in one file, as `file:line: what`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    where = path.relative_to(ROOT)
    found: list[str] = []
    modules: set[str] = set()  # local names bound to modules of the package
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{where}:{node.lineno}: imports {node.module}.{alias.name}")
                else:
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE) and alias.asname:
                    modules.add(alias.asname)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            found.append(f"{where}:{node.lineno}: uses {node.value.id}.{node.attr}")
    return found


def main() -> int:
    found = [line for path in sorted(PRODUCT.rglob("*.py")) for line in findings(path)]
    for line in found:
        print(line)
    if found:
        print(
            "\nmake the shared name public in the module that owns it (one home), or keep it "
            "where it is used",
            file=sys.stderr,
        )
        return 1
    print("private imports: none across modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
