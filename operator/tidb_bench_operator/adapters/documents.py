"""Documents a person hands the command line: files read with limits, YAML read strictly.

The same discipline as domain/untrusted.py at the edge where text arrives: a size limit
before anything parses, encodings recognised (BOM, UTF-16), and YAML without anchors and
aliases (kubectl never writes them; a few aliases can expand to gigabytes), nesting
bounded, and no NaN/Infinity.
"""

from __future__ import annotations

import io
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, cast

import yaml

from tidb_bench_operator.domain.untrusted import MAX_DEPTH, MAX_DOCUMENT_BYTES, sniff_encoding
from tidb_bench_operator.errors import ParseError, TidbBenchError

#: Characters of one line handed to a line parser; the rest of a longer line is skipped.
MAX_LINE = 4096


def _open(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    try:
        return Path(path).open("rb")
    except OSError as exc:
        raise TidbBenchError(f"cannot read {path}: {exc.strerror}") from exc


def read_document(path: str, *, limit: int = MAX_DOCUMENT_BYTES) -> str:
    """A whole file (or stdin for `-`) as text, refused over `limit` bytes."""
    handle = _open(path)
    try:
        data = handle.read(limit + 1)
    except OSError as exc:
        raise TidbBenchError(f"cannot read {path}: {exc.strerror}") from exc
    finally:
        if handle is not sys.stdin.buffer:
            handle.close()
    if len(data) > limit:
        raise TidbBenchError(
            f"{path}: larger than the {limit:,}-byte limit for one document; is this the "
            "right file?"
        )
    codec, skip = sniff_encoding(data[:4096])
    return data[skip:].decode(codec, errors="replace")


def iter_lines(path: str) -> Iterator[str]:
    """The lines of a file (or stdin), decoded as sniffed, streamed: memory stays flat.

    A line longer than MAX_LINE characters is cut there (the rest is skipped), so one
    endless line cannot fill memory either.
    """
    handle = cast(io.BufferedReader, _open(path))
    text: io.TextIOWrapper | None = None
    try:
        codec, skip = sniff_encoding(handle.peek(4096)[:4096])
        if skip:
            handle.read(skip)
        text = io.TextIOWrapper(handle, encoding=codec, errors="replace", newline=None)
        while True:
            try:
                line = text.readline(MAX_LINE)
            except OSError as exc:
                raise TidbBenchError(f"cannot read {path}: {exc.strerror}") from exc
            if not line:
                return
            rest = line
            while rest and not rest.endswith("\n"):  # skip the rest of an overlong line
                rest = text.readline(MAX_LINE)
            yield line
    finally:
        if text is not None:
            text.detach()  # closing the wrapper would close stdin too
        if handle is not sys.stdin.buffer:
            handle.close()


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader without aliases, with a nesting limit and finite floats only."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "YAML aliases (*name) are not accepted", event.start_mark
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"nested deeper than {MAX_DEPTH} levels",
                    self.peek_event().start_mark,  # type: ignore[no-untyped-call]
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_float(self, node: Any) -> float:
        value = float(super().construct_yaml_float(node))
        if not math.isfinite(value):
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value!r} is not a finite number", node.start_mark
            )
        return value


_StrictLoader.add_constructor("tag:yaml.org,2002:float", _StrictLoader.construct_yaml_float)


def load_yaml(text: str, what: str) -> Any:
    """One YAML (or JSON) document, read strictly; ParseError naming `what` and the place."""
    if len(text) > MAX_DOCUMENT_BYTES:
        raise ParseError(f"{what}: larger than the {MAX_DOCUMENT_BYTES:,}-byte limit")
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        raise ParseError(f"{what}: not YAML or JSON: {exc}") from None
    except RecursionError:
        raise ParseError(f"{what}: nested too deeply to read") from None
