"""One discipline for input we did not produce: PD bodies, pd-ctl text, sysbench logs, files.

Every reader here checks type, range and finiteness where a value is read and names the
field and the offending value when it refuses; documents have size and depth limits; every
scan is linear in the input. The "Hostile input" table of docs/bad-input.md lists the classes
of input tried.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from tidb_bench_operator.errors import ParseError

#: Largest JSON document read whole (PD `/stores` for 1,000 stores is about 2 MiB).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
#: Deepest nesting accepted (PD bodies nest 4 levels; Python's parsers recurse per level).
MAX_DEPTH = 64
#: JSON values looked at when searching text that is not JSON as a whole.
MAX_EMBEDDED_VALUES = 10_000
#: How deep inside other brackets a span may start and still be tried as JSON (so a
#: hand-made, invalid wrapper around real store objects still yields them).
MAX_DESCENT = 4

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def sniff_encoding(head: bytes) -> tuple[str, int]:
    """(codec, BOM length) for a file starting with `head`: a BOM, UTF-16 without one, or UTF-8.

    Logs saved by some Windows tools are UTF-16 (with or without a BOM); a UTF-16 text of
    ASCII characters has a NUL in every other byte, which UTF-8 text never has.
    """
    for bom, codec in _BOMS:
        if head.startswith(bom):
            return codec, len(bom)
    sample = head[:512]
    if len(sample) >= 4 and sample.count(0) * 3 >= len(sample):
        even_nuls = sample[0::2].count(0)
        odd_nuls = sample[1::2].count(0)
        if odd_nuls > even_nuls:
            return "utf-16-le", 0
        if even_nuls > odd_nuls:
            return "utf-16-be", 0
    return "utf-8", 0


def decode_text(data: bytes | str) -> str:
    """Bytes as text: BOMs and UTF-16 recognised, undecodable bytes replaced (never raises)."""
    if isinstance(data, str):
        return data.removeprefix("\ufeff")
    codec, skip = sniff_encoding(data)
    return data[skip:].decode(codec, errors="replace")


def check_size(text: str | bytes, what: str, limit: int = MAX_DOCUMENT_BYTES) -> None:
    """Refuse a document over `limit` bytes (characters) before anything parses it."""
    if len(text) > limit:
        raise ParseError(
            f"{what}: input is {len(text):,} bytes, over the {limit:,}-byte limit for one "
            "document; is this the right file?"
        )


#: Brackets accepted in text searched for embedded JSON (PD `/stores` for 1,000 stores has
#: about 15,000); more means the input is not PD output, and the search would only waste time.
MAX_BRACKETS = 1_000_000

_SPECIAL = re.compile(r'[{}\[\]"\\]')
_TOO_DEEP = 1 << 30


def loads(text: str, what: str) -> Any:
    """json.loads, refusing NaN/Infinity (PD never sends them) and absurd nesting.

    JSONDecodeError for text that is not JSON; ParseError for JSON we refuse.
    """
    try:
        value = _DECODER.decode(text)
    except ParseError as exc:  # a number refused by _bounded_int/_bounded_float
        raise ParseError(f"{what}: {exc}") from None
    except RecursionError:
        value = None
        deep = True
    else:
        deep = _deeper_than(value, MAX_DEPTH)
    if deep:
        raise ParseError(
            f"{what}: JSON nested too deeply (over {MAX_DEPTH} levels); PD and pd-ctl output "
            "nests a few levels"
        )
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    """True when a decoded JSON value nests more than `limit` levels (iterative walk)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _refuse_constant(name: str) -> Any:
    raise ParseError(f"JSON holds {name}, which is not a number JSON allows")


#: Largest integer read: PD's counters and sizes are uint64 (20 digits at most).
MAX_UINT64 = 2**64 - 1
#: Largest magnitude of a JSON float read: beyond it no counter, size or rate is real, and
#: arithmetic on such values overflows to infinity.
MAX_FLOAT = float(MAX_UINT64)


def _bounded_int(text: str) -> int:
    """A JSON integer literal, refused past 20 digits (Python's own limit is a ValueError
    at 4,300 digits; a 400-digit size overflows every float computed from it)."""
    digits = len(text.lstrip("-"))
    if digits > 20:
        raise ParseError(
            f"JSON holds an integer of {digits:,} digits; PD's numbers are 64-bit (at most 20)"
        )
    return int(text)


def _bounded_float(text: str) -> float:
    value = float(text)
    if not abs(value) <= MAX_FLOAT:
        raise ParseError(
            f"JSON holds the number {text[:40]}{'...' if len(text) > 40 else ''}, beyond any "
            "64-bit counter or size PD reports"
        )
    return value


# One decoder for every call (building one per call is a third of the cost of trying
# thousands of small spans). Raw control characters inside strings are accepted.
_DECODER = json.JSONDecoder(
    strict=False,
    parse_constant=_refuse_constant,
    parse_int=_bounded_int,
    parse_float=_bounded_float,
)


def _spans(text: str) -> list[tuple[int, int, int]]:
    """(start, end, inner depth) of balanced `{...}`/`[...]` spans that start at most
    MAX_DESCENT levels deep, in one linear pass.

    Quotes open a string only inside brackets, so prose with a stray quote stays prose;
    brackets inside strings do not count; a backslash in a string escapes the next
    character; a closer that matches nothing is ignored, one that matches an outer opener
    closes the inner ones too. The regex skips plain text, so prose costs little.
    """
    stack: list[list[Any]] = []  # [opener, start, deepest level reached inside]
    spans: list[tuple[int, int, int]] = []
    in_string = False
    skip = -1
    overflow = 0  # openers beyond MAX_DEPTH: counted, not kept (no JSON that deep is read)
    open_count = {"{": 0, "[": 0}
    for match in _SPECIAL.finditer(text):
        i = match.start()
        ch = text[i]
        if in_string:
            if i == skip:
                continue
            if ch == "\\":
                skip = i + 1
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = bool(stack)
        elif ch in "{[":
            if len(stack) > MAX_DEPTH:
                overflow += 1
                stack[-1][2] = _TOO_DEEP
            else:
                stack.append([ch, i, len(stack) + 1])
                open_count[ch] += 1
        elif ch in "}]":
            want = "{" if ch == "}" else "["
            if overflow:
                overflow -= 1
                continue
            if not open_count[want]:
                continue
            while True:  # amortised: each opener is popped once
                kind, start, deepest = stack.pop()
                open_count[kind] -= 1
                if stack:
                    stack[-1][2] = max(stack[-1][2], deepest)
                if kind == want:
                    break
            level = len(stack)
            if level <= MAX_DESCENT:
                spans.append((start, i + 1, deepest - level))
    spans.sort()
    return spans


_FIRST_IN_OBJECT = re.compile(r'[ \t\r\n]*["}]')
_FIRST_IN_ARRAY = re.compile(r'[ \t\r\n]*(?:["{\[\]\-0-9]|true|false|null)')
_JSON_VALUE_ENDS = frozenset('"}]0123456789el')


def _could_be_json(text: str, start: int, end: int) -> bool:
    """A cheap look at both ends of a bracketed span before a full JSON parse.

    Prose brackets (`[section 1]`, `[ 10s ] thds: ...`, `{placeholder}`) fail here at the
    cost of one regex match instead of a failed parse, which keeps text full of them fast.
    """
    first = _FIRST_IN_OBJECT if text[start] == "{" else _FIRST_IN_ARRAY
    if not first.match(text, start + 1, end):
        return False
    i = end - 2
    while i > start and text[i] in " \t\r\n":
        i -= 1
    return i == start or text[i] in _JSON_VALUE_ENDS


def _begins_line(text: str, pos: int) -> bool:
    """True when only blanks stand between the previous newline (or the start) and `pos`."""
    i = pos - 1
    while i >= 0 and text[i] in " \t\r":
        i -= 1
    return i < 0 or text[i] == "\n"


def embedded_json_values(
    text: str, *, limit: int = MAX_EMBEDDED_VALUES, line_start: bool = True
) -> Iterator[Any]:
    """JSON objects/arrays embedded in text (banners, prompts, hand-made wrappers), in order.

    With `line_start`, only values that begin a line (after blanks) count: programs print
    their JSON from a line's start, and a `[]` inside prose is not an answer.

    Linear in the text: one bracket scan, then each candidate span parsed once; a span
    that is not JSON is looked into (at most MAX_DESCENT levels) for inner spans that are.
    Spans nested deeper than MAX_DEPTH are skipped; at most `limit` values are yielded.
    """
    brackets = sum(text.count(ch) for ch in "{}[]")
    if brackets > MAX_BRACKETS:
        raise ParseError(
            f"the input holds {brackets:,} brackets, over the limit of {MAX_BRACKETS:,} for "
            "text searched for PD's JSON; this is not pd-ctl or PD API output"
        )
    accepted_end = -1
    for start, end, depth in _spans(text):
        if limit <= 0:
            return
        if start < accepted_end or depth > MAX_DEPTH:
            continue
        if line_start and not _begins_line(text, start):
            continue
        if not _could_be_json(text, start, end):
            continue
        try:
            value = loads(text[start:end], "embedded JSON")
        except (json.JSONDecodeError, ParseError):
            continue
        accepted_end = end
        limit -= 1
        yield value


# ---------------------------------------------------------------------------
# Typed field readers: the value's type and range are checked where it is read.


def _show(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_int(
    obj: Mapping[str, Any],
    key: str,
    where: str,
    *,
    minimum: int | None = 0,
    required: bool = True,
    unit: str = "",
) -> int | None:
    """obj[key] as an int (a JSON integer, not a bool, float or string), >= minimum.

    Missing or null: ParseError when required, else None.
    """
    value = obj.get(key)
    if value is None:
        if required:
            raise ParseError(f"{where}.{key} is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParseError(
            f"{where}.{key}: {_show(value)} is not an integer" + (f" ({unit})" if unit else "")
        )
    if minimum is not None and value < minimum:
        raise ParseError(f"{where}.{key}: {value} is below {minimum}, which PD never reports")
    return value


def read_str(obj: Mapping[str, Any], key: str, where: str, *, default: str = "") -> str:
    """obj[key] as a string; a missing/null value is `default`, any other type is refused."""
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ParseError(f"{where}.{key}: {_show(value)} is not a string")
    return value


#: What stands for a user name or a password read from a Secret in any text we write.
HIDDEN_USER = "<user>"
HIDDEN_PASSWORD = "<password>"
_QUOTED_ACCOUNT = re.compile(r"'([^'\n]{1,256})'@")
#: A password this short is not searched for: it would hide ordinary words of the text.
MIN_HIDDEN_PASSWORD = 4


def hide_credentials(text: str, user: str, password: str = "") -> str:
    """`text` with the MySQL user name and password read from a Secret hidden.

    MySQL and MariaDB name the account in their errors as `'user'@'host'` ("Access denied for
    user 'u'@'10.0.0.5'"); a user read from a Secret counts as secret, so it never reaches a
    message, a log or a status. Only the quoted form of the user is replaced: a short name
    such as `sbtest` also occurs in the table names sysbench prints, which must stay
    readable. No server echoes the password; it is hidden anyway wherever it occurs.
    """
    if user:
        text = text.replace(f"'{user}'@", f"'{HIDDEN_USER}'@")
        text = text.replace(f"`{user}`@", f"`{HIDDEN_USER}`@")
        # A server may quote a long user cut short (MariaDB keeps 80 characters, MySQL 32).
        text = _QUOTED_ACCOUNT.sub(
            lambda m: f"'{HIDDEN_USER}'@" if m.group(1) and m.group(1) in user else m.group(0),
            text,
        )
    if len(password) >= MIN_HIDDEN_PASSWORD:
        text = text.replace(password, HIDDEN_PASSWORD)
    return text
