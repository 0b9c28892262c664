"""Parsing of PD store and operator output (HTTP API bodies and pd-ctl text) into plain models."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tidb_bench_operator.errors import ParseError, PDError

# Store state names PD puts in `state_name`. `state` (the int enum) is useless for us: it is
# omitted for Up (omitempty on 0) and pd-ctl `store` zeroes it, so only `state_name` is
# reliable (FACTS §1.2 table, §2.3 "the only reliable state field is state_name").
STATE_UP = "Up"
STATE_OFFLINE = "Offline"
STATE_TOMBSTONE = "Tombstone"
STATE_DOWN = "Down"
STATE_DISCONNECTED = "Disconnected"
_STATE_BY_ENUM = {0: STATE_UP, 1: STATE_OFFLINE, 2: STATE_TOMBSTONE}

# TiFlash registers with the label engine=tiflash (FACTS §1.2 sample, PRODUCT.md); TiFlash in
# disaggregated compute mode uses engine=tiflash_compute (TiDB docs on disaggregated TiFlash).
_TIFLASH_ENGINES = frozenset({"tiflash", "tiflash_compute"})


class Store(BaseModel):
    """One PD store as the preflight checks need it (sizes in MiB as PD reports them)."""

    model_config = ConfigDict(frozen=True)

    id: int = Field(description="PD store id.")
    address: str = Field(default="", description="Advertise address, e.g. basic-tikv-0...:20160.")
    state_name: str = Field(description="Up, Disconnected, Down, Offline or Tombstone.")
    labels: dict[str, str] = Field(default_factory=dict, description="Store labels.")
    version: str = Field(default="", description="TiKV/TiFlash version as reported.")
    leader_count: int = Field(default=0, description="Number of Raft leaders on the store.")
    leader_size: int = Field(default=0, description="Sum of leader region sizes, MiB.")
    region_count: int = Field(default=0, description="Number of region peers on the store.")
    region_size: int = Field(default=0, description="Sum of region peer sizes, MiB.")
    capacity_bytes: int | None = Field(default=None, description="Disk capacity in bytes.")
    available_bytes: int | None = Field(default=None, description="Free disk space in bytes.")
    last_heartbeat: int | None = Field(
        default=None, description="Last heartbeat, unix nanoseconds (store.last_heartbeat)."
    )
    last_heartbeat_ts: str | None = Field(
        default=None,
        description="Last heartbeat as PD's RFC3339 string (status.last_heartbeat_ts).",
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
    kind: str = Field(default="", description="Kind flags, e.g. 'leader' or 'replica,region'.")
    finished: bool = Field(
        default=False, description="Already finished or timed out: not pending any more."
    )
    raw: str = Field(default="", description="The operator as PD printed it.")

    @property
    def store_ids(self) -> list[int]:
        """Store ids named in the brief ('store 2 to 1', 'store [1] to [166543141]')."""
        match = _BRIEF_STORES.search(self.brief)
        if match is None:
            return []
        return [int(n) for n in re.findall(r"\d+", match.group(0))]


# ---------------------------------------------------------------------------
# Byte sizes

_SIZE = re.compile(
    r"^\s*(?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*(?P<unit>[kmgtpezy]?)(?P<i>i?)b?\s*$",
    re.IGNORECASE,
)
_UNIT_POWER = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5, "e": 6, "z": 7, "y": 8}


def parse_byte_size(value: str | int | float) -> int:
    """'311.7GiB' → bytes. Binary units, as docker/go-units BytesSize prints them."""
    # PD prints typeutil.ByteSize with go-units BytesSize: "%.4g%s" over 1024-based units,
    # no space ("311.7GiB", "1B", "3.125TiB") (FACTS §1.2 status table). PD reads them back
    # with go-units RAMInBytes, which also takes "10 GiB", "10G", "10GB" as 1024-based; we
    # accept the same (the docs' "10 GiB" with a space is illustrative, FACTS §1.2).
    if isinstance(value, bool):
        raise ParseError(f"byte size {value!r} is not a size")
    if isinstance(value, int | float):
        return int(value)
    match = _SIZE.match(value)
    if match is None:
        raise ParseError(
            f"byte size {value!r} is not in PD's form like '311.7GiB', '290.7MiB' or '1B'"
        )
    power = _UNIT_POWER[match.group("unit").lower()]
    return round(float(match.group("num")) * 1024.0**power)


# ---------------------------------------------------------------------------
# Locating JSON in pd-ctl output

# pd-ctl exits 0 even when the command failed (tikv/pd#8762, FACTS §2.3), so errors must be
# recognised in stdout: "Failed to get store: <err>", a bare "<err>" for operator/scheduler
# show, where <err> is "[<status>] <body>" or a Go client error such as
# `Get "http://...": dial tcp ...: connect: connection refused` (FACTS §2.3 "Errors").
_ERROR_LINE = re.compile(
    r"^(?:Failed to .*|Failed! .*|Error: .*|\[\d{3}\] .*|(?:Get|Post|Delete) \"[^\"]*\": .*"
    r"|.*after trying all endpoints.*|.*connection refused.*|.*no such host.*"
    r"|.*context deadline exceeded.*)$"
)


def _decode_text(text: str | bytes) -> str:
    return text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text


def _first_error_line(text: str) -> str | None:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and _ERROR_LINE.match(stripped):
            return stripped
    return None


def _pd_error(what: str, detail: str) -> PDError:
    return PDError(
        f"{what}: PD/pd-ctl answered with an error instead of JSON: {detail} "
        "(pd-ctl exits 0 even on failure, so this was read from its output; "
        "check the PD address (-u / PD_ADDR) and that PD is healthy)"
    )


def _excerpt(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _json_values(text: str) -> list[Any]:
    """Every JSON object/array embedded in `text`, outermost first, in order of appearance."""
    decoder = json.JSONDecoder(strict=False)
    values: list[Any] = []
    pos = 0
    while True:
        starts = [i for i in (text.find("{", pos), text.find("[", pos)) if i >= 0]
        if not starts:
            return values
        start = min(starts)
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            pos = start + 1
            continue
        values.append(value)
        pos = end


def _load(text_or_obj: object, what: str) -> tuple[Any, str]:
    """Parse the whole input as JSON if it is; return (value, original text or '')."""
    if not isinstance(text_or_obj, str | bytes):
        return text_or_obj, ""
    text = _decode_text(text_or_obj)
    if not text.strip():
        raise ParseError(f"{what}: input is empty (did pd-ctl or the PD request print nothing?)")
    try:
        # strict=False: raw control characters inside strings (pd-ctl's own help example of
        # `operator history` wraps one operator string over lines, sample
        # pd-operator-strings_*) are harmless to us.
        return json.loads(text, strict=False), text
    except json.JSONDecodeError:
        return _NOT_JSON, text


_NOT_JSON = object()


# ---------------------------------------------------------------------------
# Stores


def _store_from_info(info: Mapping[str, Any], where: str) -> Store:
    meta = info.get("store")
    status = info.get("status") or {}
    if not isinstance(meta, Mapping) or not isinstance(status, Mapping):
        raise ParseError(f"{where}: expected {{'store': {{...}}, 'status': {{...}}}}")
    if "id" not in meta:
        raise ParseError(f"{where}: store object has no 'id'")
    store_id = int(meta["id"])
    state_name = meta.get("state_name")
    if not isinstance(state_name, str) or not state_name:
        # Fall back to the enum only when state_name is missing; an absent enum means Up
        # only if state_name is absent too, which real PD never does (FACTS §1.2).
        if "state" not in meta:
            raise ParseError(f"{where}: store {store_id} has neither 'state_name' nor 'state'")
        state_name = _STATE_BY_ENUM.get(int(meta["state"]), f"state={meta['state']}")
    labels: dict[str, str] = {}
    for label in meta.get("labels") or []:
        if isinstance(label, Mapping) and "key" in label:
            labels[str(label["key"])] = str(label.get("value", ""))

    def size(key: str) -> int | None:
        raw = status.get(key)
        if raw is None:
            return None
        try:
            return parse_byte_size(raw)
        except ParseError as exc:
            raise ParseError(f"{where}: store {store_id} status.{key}: {exc}") from exc

    heartbeat = meta.get("last_heartbeat")
    heartbeat_ts = status.get("last_heartbeat_ts")
    return Store(
        id=store_id,
        address=str(meta.get("address", "")),
        state_name=state_name,
        labels=labels,
        version=str(meta.get("version", "")),
        leader_count=int(status.get("leader_count") or 0),
        leader_size=int(status.get("leader_size") or 0),
        region_count=int(status.get("region_count") or 0),
        region_size=int(status.get("region_size") or 0),
        capacity_bytes=size("capacity"),
        available_bytes=size("available"),
        last_heartbeat=int(heartbeat) if heartbeat is not None else None,
        last_heartbeat_ts=str(heartbeat_ts) if heartbeat_ts is not None else None,
    )


def _stores_from_value(value: Any, where: str) -> list[Store] | None:
    """Stores from a decoded JSON value, or None if it is not a store-shaped value."""
    if isinstance(value, Mapping):
        if "stores" in value:
            # Go marshals an empty slice as null: {"count":0,"stores":null}.
            items = value["stores"] or []
            if not isinstance(items, list):
                raise ParseError(f"{where}: 'stores' is not a list")
            return [_store_from_info(item, f"{where} stores[{i}]") for i, item in enumerate(items)]
        if isinstance(value.get("store"), Mapping):
            return [_store_from_info(value, where)]
        return None
    if isinstance(value, list) and all(
        isinstance(item, Mapping) and isinstance(item.get("store"), Mapping) for item in value
    ):
        return [_store_from_info(item, f"{where}[{i}]") for i, item in enumerate(value)]
    return None


def parse_stores(text_or_obj: str | bytes | Mapping[str, Any] | Sequence[Any]) -> list[Store]:
    """Stores from `GET /stores`, `GET /store/{id}` or pd-ctl `store` output (text or decoded)."""
    what = "PD stores"
    value, text = _load(text_or_obj, what)
    if isinstance(value, str):
        # PD handlers answer errors with a JSON string body, e.g.
        # "[PD:core:ErrStoreNotFound]store 999 not found" (FACTS §1.1).
        raise _pd_error(what, value)
    if value is not _NOT_JSON:
        stores = _stores_from_value(value, what)
        if stores is None:
            raise ParseError(
                f"{what}: JSON is neither a stores list ({{'count', 'stores'}}) nor one store "
                f"({{'store', 'status'}}): {_excerpt(text or repr(value))}"
            )
        return stores
    error = _first_error_line(text)
    if error is not None:
        raise _pd_error(what, error)
    # Not JSON as a whole: pd-ctl via tiup prints a "Starting component" line first, and
    # pasted fragments (the tikv/pd#3780 sample) wrap real store objects in hand-made,
    # invalid JSON. Take the first embedded value that is store-shaped.
    found: list[Store] = []
    for embedded in _json_values(text):
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
# from v6 to v8.1; the tail differs (", timeout:[...]" from v7.3, "，timeout" with a
# full-width comma in v7.1/v7.2, none in v6) (FACTS §1.5, samples pd-operator-strings_*).
_OPERATOR = re.compile(
    r"^(?P<desc>\S+) \{(?P<brief>.*?)\} \(kind:(?P<kind>[\w-]+(?:,[\w-]+)*), "
    r"region:(?P<region>\d+)\("
)
_BRIEF_STORES = re.compile(r"store \[?\d+(?:, ?\d+)*\]?(?: to \[?\d+(?:, ?\d+)*\]?)?")
# OpStatus: CREATED=0, STARTED=1; SUCCESS and later are end states (pd
# pkg/schedule/operator/status.go). The ?object form carries it as a number.
_PENDING_STATUS_NUMBERS = frozenset({0, 1})
_PENDING_STATUS_NAMES = frozenset({"CREATED", "STARTED"})


def _operator_from_string(raw: str) -> Operator:
    flat = " ".join(raw.split())
    # " finished" / " timeout" are appended after the closing parenthesis (Operator.String);
    # "(finishAt:...)" is the OpRecord form of `operator history` (FACTS §1.5).
    finished = flat.endswith(") finished") or flat.endswith(") timeout") or "(finishAt:" in flat
    match = _OPERATOR.match(flat)
    if match is None:
        # Unknown format: still an operator, and counting it as pending is the safe side.
        desc = flat.split(" {", 1)[0] if " {" in flat else _excerpt(flat, 60)
        return Operator(desc=desc, finished=finished, raw=raw)
    return Operator(
        desc=match.group("desc"),
        brief=match.group("brief"),
        region_id=int(match.group("region")),
        kind=match.group("kind"),
        finished=finished,
        raw=raw,
    )


def _operator_from_object(obj: Mapping[str, Any], where: str) -> Operator:
    if "desc" not in obj:
        raise ParseError(f"{where}: operator object has no 'desc'")
    status = obj.get("status")
    if isinstance(status, str):
        finished = status.upper() not in _PENDING_STATUS_NAMES
    elif isinstance(status, int):
        finished = status not in _PENDING_STATUS_NUMBERS
    else:
        finished = False
    region = obj.get("region_id")
    # OpKind has no MarshalJSON, so `kind` is the raw bit field; its bit order changed
    # between PD versions, so we keep the number rather than guess names.
    kind = obj.get("kind", "")
    return Operator(
        desc=str(obj["desc"]),
        brief=str(obj.get("brief", "")),
        region_id=int(region) if region is not None else None,
        kind=str(kind),
        finished=finished,
        raw=json.dumps(dict(obj), separators=(",", ":")),
    )


def _operators_from_value(value: Any, where: str) -> list[Operator] | None:
    if value is None:
        return []
    if not isinstance(value, list):
        return None
    operators: list[Operator] = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            operators.append(_operator_from_string(item))
        elif isinstance(item, Mapping):
            operators.append(_operator_from_object(item, f"{where}[{i}]"))
        else:
            return None
    return operators


def parse_operators(text_or_obj: str | bytes | Sequence[Any] | None) -> list[Operator]:
    """Operators from `GET /operators` (strings or `?object`) or pd-ctl `operator show`."""
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
    error = _first_error_line(text)
    if error is not None:
        raise _pd_error(what, error)
    for embedded in _json_values(text):
        operators = _operators_from_value(embedded, what)
        if operators is not None:
            return operators
    raise ParseError(
        f"{what}: no JSON array found in the input (expected pd-ctl `operator show` or "
        f"GET /pd/api/v1/operators output); it starts with: {_excerpt(text)}"
    )


def pending_operators(operators: Sequence[Operator]) -> list[Operator]:
    """The operators that are neither finished nor timed out."""
    return [op for op in operators if not op.finished]


# ---------------------------------------------------------------------------
# Schedulers


def parse_schedulers(text_or_obj: str | bytes | Sequence[Any]) -> list[str]:
    """Scheduler names from `GET /schedulers` or pd-ctl `scheduler show` (a JSON string array)."""
    what = "PD schedulers"
    value, text = _load(text_or_obj, what)
    if isinstance(value, str):
        raise _pd_error(what, value)
    if value is _NOT_JSON:
        error = _first_error_line(text)
        if error is not None:
            raise _pd_error(what, error)
        embedded = [v for v in _json_values(text) if isinstance(v, list)]
        value = embedded[0] if embedded else _NOT_JSON
    if value is None:
        return []
    # With ?status=paused&timestamp=true PD answers [{name, paused_at, resume_at}] (FACTS §1.6).
    if isinstance(value, list):
        names = [v.get("name") if isinstance(v, Mapping) else v for v in value]
        if all(isinstance(n, str) for n in names):
            return [str(n) for n in names]
    raise ParseError(f"{what}: expected a JSON array of scheduler names, got {_excerpt(text)}")


def parse_evict_leader_stores(text_or_obj: str | bytes | Mapping[str, Any]) -> list[int]:
    """Store ids under evict-leader, from `GET /scheduler-config/evict-leader-scheduler/list`."""
    # One scheduler named evict-leader-scheduler lists every store in "store-id-ranges",
    # keyed by decimal store id strings (FACTS §1.6).
    what = "PD evict-leader scheduler config"
    value, text = _load(text_or_obj, what)
    if isinstance(value, str):
        raise _pd_error(what, value)
    if value is _NOT_JSON:
        error = _first_error_line(text)
        if error is not None:
            raise _pd_error(what, error)
        raise ParseError(f"{what}: not JSON: {_excerpt(text)}")
    ranges = value.get("store-id-ranges") if isinstance(value, Mapping) else None
    if not isinstance(ranges, Mapping):
        raise ParseError(f"{what}: no 'store-id-ranges' object in {_excerpt(text or repr(value))}")
    try:
        return sorted(int(k) for k in ranges)
    except ValueError as exc:
        raise ParseError(f"{what}: store-id-ranges has a non-numeric key: {exc}") from exc


# ---------------------------------------------------------------------------
# TidbCluster status mirror of PD stores


def stores_from_tc_status(status: Mapping[str, Any]) -> list[Store]:
    """Stores as TiDB Operator mirrors them in a TidbCluster's `status` (no sizes there).

    Reads status.{tikv,tiflash}.{stores,tombstoneStores}: maps keyed by store id whose entries
    carry `state` = PD state_name and `ip` = the host part of the store address (FACTS §3.4).
    Good enough for store-state when PD itself cannot be asked; sizes are left at 0.
    """
    stores: dict[int, Store] = {}
    for component in ("tikv", "tiflash"):
        section = status.get(component)
        if not isinstance(section, Mapping):
            continue
        labels = {"engine": "tiflash"} if component == "tiflash" else {}
        for group in ("stores", "tombstoneStores"):
            entries = section.get(group) or {}
            if not isinstance(entries, Mapping):
                raise ParseError(f"status.{component}.{group} is not a map keyed by store id")
            for key, entry in entries.items():
                where = f"status.{component}.{group}[{key!r}]"
                if not isinstance(entry, Mapping):
                    raise ParseError(f"{where} is not an object")
                raw_id = entry.get("id", key)
                try:
                    store_id = int(str(raw_id))
                except ValueError as exc:
                    raise ParseError(f"{where}: store id {raw_id!r} is not a number") from exc
                state = entry.get("state")
                if not isinstance(state, str) or not state:
                    raise ParseError(f"{where}: no 'state'")
                stores[store_id] = Store(
                    id=store_id,
                    address=str(entry.get("ip") or ""),
                    state_name=state,
                    labels=labels,
                    leader_count=int(entry.get("leaderCount") or 0),
                )
    return [stores[k] for k in sorted(stores)]


def pod_name_from_address(address: str) -> str:
    """'basic-tikv-0.basic-tikv-peer.ns.svc:20160' → 'basic-tikv-0' (TiDB Operator naming)."""
    # TiKV advertises ${POD_NAME}.<tc>-tikv-peer.<ns>.svc:20160 under TiDB Operator, and the
    # operator itself takes podName as the first DNS label (FACTS §3.2, §3.4).
    return address.split(":", 1)[0].split(".", 1)[0]
