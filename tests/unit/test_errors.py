"""The exception tree drawn in errors.py is the tree the classes form."""

from __future__ import annotations

import re

from tidb_bench_operator import errors
from tidb_bench_operator.errors import TidbBenchError


def drawn() -> dict[str, str]:
    """child -> parent, from the drawing in errors.py's docstring."""
    doc = errors.__doc__ or ""
    lines = [ln for ln in doc.splitlines() if re.match(r"^ {4}[│├└─ ]*[A-Z]\w+", ln)]
    parents: dict[int, str] = {}
    tree: dict[str, str] = {}
    for line in lines:
        name = re.search(r"[A-Z]\w+", line)
        assert name is not None
        depth = name.start()
        parents[depth] = name.group()
        above = [d for d in parents if d < depth]
        if above:
            tree[name.group()] = parents[max(above)]
    return tree


def actual() -> dict[str, str]:
    tree: dict[str, str] = {}
    todo: list[type[BaseException]] = [TidbBenchError]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub.__module__.startswith("tidb_bench_operator"):
                tree[sub.__name__] = cls.__name__
                todo.append(sub)
    return tree


def test_the_drawing_is_the_tree() -> None:
    assert drawn() == actual()
