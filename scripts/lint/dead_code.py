"""No product symbol may be used only by the tests: vulture over operator/, tests excluded.

Vulture lists definitions nothing in operator/ refers to. Two kinds of findings are not dead
code and are left out here, by rule rather than one by one:
  - fields of pydantic models (`name: type = Field(...)`): they are a schema (CRD, status,
    wire message) read by serialization, which vulture cannot see;
  - attributes assigned under the name of such a field (`status.finished_at = now`).
Everything else must be used by the product or be listed, with its reason, in
dead_code_whitelist.py beside this script. Exit status 1 when something is left.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import vulture

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ROOT / "operator"
WHITELIST = Path(__file__).with_name("dead_code_whitelist.py")
#: Registered with a framework by decorator: kopf calls the handlers, pydantic the validators.
FRAMEWORK_DECORATORS = ["@kopf.*", "@field_validator", "@model_validator"]


def schema_fields(paths: list[Path]) -> set[str]:
    """Names declared as annotated fields of pydantic models (classes based on BaseModel).

    Models are found by their bases' names, transitively across the product. Dataclasses are
    not schemas: their unused fields are reported like any other dead code.
    """
    classes: dict[str, tuple[list[str], list[str]]] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases]
                fields = [
                    stmt.target.id
                    for stmt in node.body
                    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                ]
                old = classes.get(node.name, ([], []))
                classes[node.name] = (old[0] + bases, old[1] + fields)
    models = {"BaseModel"}
    while True:
        found = {n for n, (bases, _) in classes.items() if any(b in models for b in bases)}
        if found <= models:
            break
        models |= found
    return {f for n, (_, fields) in classes.items() if n in models for f in fields}


def main() -> int:
    files = sorted(PRODUCT.rglob("*.py"))
    fields = schema_fields(files)
    v = vulture.Vulture(ignore_decorators=FRAMEWORK_DECORATORS)
    v.scavenge([str(PRODUCT), str(WHITELIST)])
    left = [
        item
        for item in v.get_unused_code(min_confidence=0)
        if not (item.typ in ("variable", "attribute") and item.name in fields)
    ]
    for item in left:
        where = Path(item.filename).resolve().relative_to(ROOT)
        print(f"{where}:{item.first_lineno}: {item.message} ({item.confidence}% confidence)")
    if left:
        print(
            f"\n{len(left)} definition(s) nothing in operator/ uses: delete them, use them, or "
            f"list them with the reason in {WHITELIST.relative_to(ROOT)}",
            file=sys.stderr,
        )
        return 1
    print(f"dead code: none in {len(files)} product modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
