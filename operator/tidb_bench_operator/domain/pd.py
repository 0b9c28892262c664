"""Reading PD's answers: stores and operators, from the HTTP API or pd-ctl's printed output.

The shapes, units and quirks relied on here are described, with their upstream sources, in
docs/pd.md. Every value is checked where it is read (domain/untrusted.py): a store whose
sizes are missing or impossible is reported as such, never judged as balanced.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tidb_bench_operator.domain.untrusted import (
    check_size,
    decode_text,
    embedded_json_values,
    loads,
    read_int,
    read_str,
)
from tidb_bench_operator.errors import ParseError, PDError

# The store state names PD puts in `state_name` (docs/pd.md "Stores"). The integer `state`
# is omitted for Up stores and zeroed by pd-ctl, so it is read only when `state_name` is
# missing.
STATE_UP = "Up"
STATE_TOMBSTONE = "Tombstone"
_STATE_BY_ENUM = {0: STATE_UP, 1: "Offline", 2: STATE_TOMBSTONE}

# TiFlash registers with the label engine=tiflash; in disaggregated compute mode with
# engine=tiflash_compute (docs/pd.md "Stores").
_TIFLASH_ENGINES = frozenset({"tiflash", "tiflash_compute"})


class Store(BaseModel):
    """One PD store as the preflight checks need it (sizes in MiB, as PD reports them)."""

    model_config = ConfigDict(frozen=True)

    id: int = Field(description="PD store id.")
    address: str = Field(default="", description="Advertise address, e.g. basic-tikv-0...:20160.")
    state_name: str = Field(description="Up, Disconnected, Down, Offline or Tombstone.")
    labels: dict[str, str] = Field(default_factory=dict, description="Store labels.")
    leader_size: int | None = Field(
        default=0, description="Sum of leader region sizes, MiB; None when PD did not say."
    )
    region_size: int | None = Field(
        default=0, description="Sum of region peer sizes, MiB; None when PD did not say."
    )
    region_count: int | None = Field(
        default=0, description="Number of region peers on the store; None when PD did not say."
    )
    leader_count: int | None = Field(
        default=None, description="Number of region leaders on the store; None when PD did not say."
    )

    @property
    def is_tiflash(self) -> bool:
        """True for TiFlash stores, which are not TiKV stores for any check."""
        return self.labels.get("engine", "") in _TIFLASH_ENGINES

    @property
    def is_tikv(self) -> bool:
        """True for TiKV stores."""
        return not self.is_tiflash


class Operator(BaseModel):
    """One PD operator from `GET /operators` (string or `?object` form)."""

    model_config = ConfigDict(frozen=True)

    desc: str = Field(description="Scheduler/checker description, e.g. balance-leader.")
    brief: str = Field(default="", description="Short brief, e.g. 'transfer leader: store 2 to 1'.")
    region_id: int | None = Field(default=None, description="Region the operator works on.")
    finished: bool = Field(
        default=False, description="Already finished or timed out: not pending any more."
    )

    @property
    def pending(self) -> bool:
        """True while PD still works on it (the one definition of a pending operator)."""
        return not self.finished

    @property
    def store_ids(self) -> list[int]:
        """Store ids named in the brief ('store 2 to 1', 'store [1] to [166543141]')."""
        match = _BRIEF_STORES.search(self.brief)
        if match is None:
            return []
        return [int(n) for n in re.findall(r"\d+", match.group(0))]


# ---------------------------------------------------------------------------
# Reading the input: JSON as a whole, or pd-ctl text with an error or embedded JSON

# pd-ctl exits 0 even when the command failed, so its errors are recognised in what it
# printed: "Failed to get store: <err>", or a bare "<err>" for operator show, where <err> is
# "[<status>] <body>" or a Go client error (docs/pd.md "pd-ctl").
_ERROR_LINE = re.compile(
    r"^[ \t]*(?:Failed to |Failed! |Error: |\[\d{3}\] |(?:Get|Post|Delete) \"[^\"\n]*\": )",
    re.MULTILINE,
)
_ERROR_ANYWHERE = re.compile(
    r"after trying all endpoints|connection refused|no such host|context deadline exceeded"
)
#: Characters of one line shown from a pd-ctl error (its errors are one short line).
_ERROR_LINE_LIMIT = 4096


def _first_error_line(text: str) -> str | None:
    """The first line that is a pd-ctl error, found by two regex searches (no line loop)."""
    found = [m.start() for m in (_ERROR_LINE.search(text), _ERROR_ANYWHERE.search(text)) if m]
    if not found:
        return None
    at = min(found)
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return text[start : end if end >= 0 else len(text)].strip()[:_ERROR_LINE_LIMIT]


def _pd_error(what: str, detail: str) -> PDError:
    return PDError(
        f"{what}: PD/pd-ctl answered with an error instead of JSON: {_excerpt(detail, 300)} "
        "(pd-ctl exits 0 even on failure, so this was read from its output; "
        "check the PD address (-u / PD_ADDR) and that PD is healthy)"
    )


def _excerpt(text: str, limit: int = 120) -> str:
    flat = " ".join(text[: limit * 4].split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


_NOT_JSON = object()


def _load(text_or_obj: object, what: str) -> tuple[Any, str]:
    """Parse the whole input as JSON if it is; return (value, original text or '')."""
    if not isinstance(text_or_obj, str | bytes):
        return text_or_obj, ""
    check_size(text_or_obj, what)
    text = decode_text(text_or_obj)
    if not text.strip():
        raise ParseError(f"{what}: input is empty (did pd-ctl or the PD request print nothing?)")
    try:
        # Raw control characters inside strings are accepted: pd-ctl's own example of
        # `operator history` wraps one operator string over lines.
        return loads(text, what), text
    except ValueError:  # json.JSONDecodeError
        return _NOT_JSON, text


def _not_json_error(what: str, text: str) -> None:
    error = _first_error_line(text)
    if error is not None:
        raise _pd_error(what, error)


def _where_store(where: str, meta: Mapping[str, Any]) -> str:
    store_id = meta.get("id")
    return f"{where} (store {store_id})" if isinstance(store_id, int) else where


# ---------------------------------------------------------------------------
# Stores


def _labels(meta: Mapping[str, Any], where: str) -> dict[str, str]:
    raw = meta.get("labels")
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ParseError(f"{where}.store.labels: {raw!r:.60} is not a list of {{key, value}}")
    labels: dict[str, str] = {}
    for i, label in enumerate(raw):
        if not isinstance(label, Mapping):
            raise ParseError(f"{where}.store.labels[{i}]: {label!r:.60} is not {{key, value}}")
        key = read_str(label, "key", f"{where}.store.labels[{i}]")
        labels[key] = read_str(label, "value", f"{where}.store.labels[{i}]")
    return labels


def _state_name(meta: Mapping[str, Any], where: str, store_id: int) -> str:
    state_name = meta.get("state_name")
    if isinstance(state_name, str) and state_name:
        return state_name
    if state_name is not None and not isinstance(state_name, str):
        raise ParseError(f"{where}.store.state_name: {state_name!r:.60} is not a string")
    if meta.get("state") is None:
        raise ParseError(f"{where}: store {store_id} has neither 'state_name' nor 'state'")
    state = read_int(meta, "state", f"{where}.store")
    assert state is not None
    return _STATE_BY_ENUM.get(state, f"state={state}")


def _store_from_info(info: object, where: str) -> Store:
    if not isinstance(info, Mapping):
        raise ParseError(f"{where}: {info!r:.60} is not a {{'store', 'status'}} object")
    meta = info.get("store")
    status = info.get("status")
    if not isinstance(meta, Mapping):
        raise ParseError(f"{where}.store: expected an object, got {meta!r:.60}")
    where = _where_store(where, meta)
    if status is None:
        status = {}
    elif not isinstance(status, Mapping):
        raise ParseError(f"{where}.status: expected an object, got {status!r:.60}")
    store_id = read_int(meta, "id", f"{where}.store")
    assert store_id is not None
    return Store(
        id=store_id,
        address=read_str(meta, "address", f"{where}.store"),
        state_name=_state_name(meta, where, store_id),
        labels=_labels(meta, where),
        # Absent sizes stay None: the balance checks then say they cannot judge this store.
        leader_size=read_int(status, "leader_size", f"{where}.status", required=False),
        region_size=read_int(status, "region_size", f"{where}.status", required=False),
        region_count=read_int(status, "region_count", f"{where}.status", required=False),
        leader_count=read_int(status, "leader_count", f"{where}.status", required=False),
    )


def _stores_from_value(value: Any, where: str, *, whole: bool = False) -> list[Store] | None:
    """Stores from a decoded JSON value, or None if it is not a store-shaped value.

    An empty list is a (jq-extracted) empty store list only as the whole input.
    """
    if isinstance(value, Mapping):
        if "stores" in value:
            # Go marshals an empty slice as null: {"count":0,"stores":null}.
            items = value["stores"]
            if items is None:
                return []
            if not isinstance(items, list):
                raise ParseError(f"{where}.stores: {items!r:.60} is not a list")
            return [_store_from_info(item, f"{where}.stores[{i}]") for i, item in enumerate(items)]
        if isinstance(value.get("store"), Mapping):
            return [_store_from_info(value, where)]
        return None
    if (
        isinstance(value, list)
        and (value or whole)
        and all(
            isinstance(item, Mapping) and isinstance(item.get("store"), Mapping) for item in value
        )
    ):
        return [_store_from_info(item, f"{where}[{i}]") for i, item in enumerate(value)]
    return None


def parse_stores(text_or_obj: str | bytes | Mapping[str, Any] | Sequence[Any]) -> list[Store]:
    """Stores from `GET /stores`, `GET /store/{id}` or pd-ctl `store` output (text or decoded).

    Raises PDError for pd-ctl's or PD's error text and ParseError for anything else that
    is not store JSON, naming the field and value that were wrong.
    """
    what = "PD stores"
    value, text = _load(text_or_obj, what)
    if isinstance(value, str):
        # PD handlers answer errors with a JSON string body, e.g.
        # "[PD:core:ErrStoreNotFound]store 999 not found".
        raise _pd_error(what, value)
    if value is not _NOT_JSON:
        stores = _stores_from_value(value, what, whole=True)
        if stores is None:
            raise ParseError(
                f"{what}: JSON is neither a stores list ({{'count', 'stores'}}) nor one store "
                f"({{'store', 'status'}}): {_excerpt(text or repr(value))}"
            )
        return stores
    _not_json_error(what, text)
    # Not JSON as a whole: pd-ctl via tiup prints a "Starting component" line first, and
    # pasted fragments (the tikv/pd#3780 sample) wrap real store objects in hand-made,
    # invalid JSON. Take the store-shaped values embedded in it.
    found: list[Store] = []
    for embedded in embedded_json_values(text):
        stores = _stores_from_value(embedded, what)
        if stores is None:
            continue
        if isinstance(embedded, Mapping) and "stores" in embedded:
            return stores
        found.extend(stores)
    if found:
        return found
    raise ParseError(
        f"{what}: no store JSON found in the input (expected pd-ctl `store` or "
        f"GET /pd/api/v1/stores output); it starts with: {_excerpt(text)}"
    )


# ---------------------------------------------------------------------------
# Operators

# Operator.String() = "%s {%s} (kind:%s, region:%v(%v, %v), createAt:..." in every version
# from v6 to v8.1; only the tail differs (docs/pd.md "Operators").
_OPERATOR = re.compile(
    r"(?P<desc>\S+) \{(?P<brief>[^{}]*)\} \(kind:(?P<kind>[\w-]+(?:,[\w-]+)*), "
    r"region:(?P<region>\d{1,20})\("
)
_BRIEF_STORES = re.compile(r"store \[?\d+(?:, ?\d+)*\]?(?: to \[?\d+(?:, ?\d+)*\]?)?")
# OpStatus: CREATED=0, STARTED=1; SUCCESS and later are end states. The ?object form
# carries it as a number.
_PENDING_STATUS_NUMBERS = frozenset({0, 1})
_PENDING_STATUS_NAMES = frozenset({"CREATED", "STARTED"})


def _operator_from_string(raw: str, where: str) -> Operator:
    flat = " ".join(raw.split())
    if " {" not in flat or "}" not in flat:
        # A scheduler list (`scheduler show`) is also an array of strings: not operators.
        raise ParseError(
            f"{where}: {_excerpt(flat, 60)!r} is not an operator string (desc {{brief}} "
            "(kind:..., region:...)); is this `pd-ctl operator show` output?"
        )
    # " finished" / " timeout" are appended after the closing parenthesis; "(finishAt:...)"
    # is the record form of `operator history`.
    finished = flat.endswith((") finished", ") timeout")) or "(finishAt:" in flat
    match = _OPERATOR.match(flat)
    if match is None:
        # Unknown format: still an operator, and counting it as pending is the safe side.
        desc = flat.split(" {", 1)[0]
        return Operator(desc=_excerpt(desc, 60) or "(empty)", finished=finished)
    return Operator(
        desc=match.group("desc"),
        brief=match.group("brief"),
        region_id=int(match.group("region")),
        finished=finished,
    )


def _operator_from_object(obj: Mapping[str, Any], where: str) -> Operator:
    desc = read_str(obj, "desc", where)
    if not desc:
        raise ParseError(f"{where}: operator object has no 'desc'")
    status = obj.get("status")
    if isinstance(status, str):
        finished = status.upper() not in _PENDING_STATUS_NAMES
    elif isinstance(status, int) and not isinstance(status, bool):
        finished = status not in _PENDING_STATUS_NUMBERS
    elif status is None:
        finished = False
    else:
        raise ParseError(f"{where}.status: {status!r:.60} is neither a number nor a name")
    return Operator(
        desc=desc,
        brief=read_str(obj, "brief", where),
        region_id=read_int(obj, "region_id", where, required=False),
        finished=finished,
    )


def _operators_from_value(value: Any, where: str) -> list[Operator] | None:
    if value is None:
        return []
    if not isinstance(value, list):
        return None
    operators: list[Operator] = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            operators.append(_operator_from_string(item, f"{where}[{i}]"))
        elif isinstance(item, Mapping):
            operators.append(_operator_from_object(item, f"{where}[{i}]"))
        else:
            return None
    return operators


def parse_operators(text_or_obj: str | bytes | Sequence[Any] | None) -> list[Operator]:
    """Operators from `GET /operators` (strings or `?object`) or pd-ctl `operator show`.

    Input that is not an operator list is a ParseError (or a PDError for pd-ctl's error
    text), never "no operators": an unreadable queue cannot be judged empty.
    """
    what = "PD operators"
    if text_or_obj is None:
        return []
    value, text = _load(text_or_obj, what)
    if isinstance(value, str):
        raise _pd_error(what, value)
    if value is not _NOT_JSON:
        operators = _operators_from_value(value, what)
        if operators is None:
            raise ParseError(
                f"{what}: expected a JSON array of operator strings or objects, got "
                f"{_excerpt(text or repr(value))}"
            )
        return operators
    _not_json_error(what, text)
    for embedded in embedded_json_values(text):
        operators = _operators_from_value(embedded, what)
        if operators is not None:
            return operators
    raise ParseError(
        f"{what}: no JSON array found in the input (expected pd-ctl `operator show` or "
        f"GET /pd/api/v1/operators output); it starts with: {_excerpt(text)}"
    )


# ---------------------------------------------------------------------------
# What an answer lacks, without quoting it

_JSON_TYPES = ((bool, "a boolean"), (int, "a number"), (float, "a number"), (str, "a string"),
               (list, "an array"), (Mapping, "an object"))  # fmt: skip
_STORE_FIELDS = ("id", "address")


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), "a value")


def _store_mismatch(item: object, where: str) -> str | None:
    if not isinstance(item, Mapping):
        return f"{where} is {_json_type(item)}, not a {{'store', 'status'}} object"
    meta = item.get("store")
    if not isinstance(meta, Mapping):
        return (
            f"{where} has no object 'store'"
            if meta is None
            else f"{where}.store is {_json_type(meta)}, not an object"
        )
    for key in _STORE_FIELDS:
        if key not in meta:
            return f"{where}.store has no field '{key}'"
    if "state_name" not in meta and "state" not in meta:
        return f"{where}.store has neither 'state_name' nor 'state'"
    return None


def answer_mismatch(text: str | bytes, kind: str) -> str:
    """Why `text` is not PD's `stores` or `operators` answer, naming only what was expected.

    For the controller's messages about an endpoint a run's author chose: nothing of the
    answer is quoted, only its JSON types and which expected field was missing.
    """
    raw = decode_text(text) if isinstance(text, bytes | str) else ""
    if not raw.strip():
        return "the answer is empty"
    try:
        value = loads(raw, f"PD {kind}")
    except (ValueError, ParseError):
        return "the answer is not JSON"
    if isinstance(value, str):
        return "the answer is a JSON string (PD's form of an error), not PD's " + kind
    if kind == "operators":
        if not isinstance(value, list):
            return f"the answer is {_json_type(value)}, not an array of operators"
        for i, item in enumerate(value):
            if isinstance(item, Mapping) and "desc" not in item:
                return f"[{i}] has no field 'desc'"
            if not isinstance(item, str | Mapping):
                return f"[{i}] is {_json_type(item)}, not an operator string or object"
        return "an operator is not in PD's form (desc {brief} (kind:..., region:...))"
    if isinstance(value, list):
        items, where = value, ""
    elif not isinstance(value, Mapping):
        return f"the answer is {_json_type(value)}, not an object with 'stores'"
    elif "stores" not in value:
        return "the answer has no field 'stores'"
    elif value["stores"] is not None and not isinstance(value["stores"], list):
        return f"'stores' is {_json_type(value['stores'])}, not an array"
    else:
        items, where = value["stores"] or [], "stores"
    for i, item in enumerate(items):
        problem = _store_mismatch(item, f"{where}[{i}]")
        if problem is not None:
            return problem
    return "a store field has a value of the wrong type or range"
