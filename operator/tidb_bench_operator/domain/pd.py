"""Parsing of PD API bodies and pd-ctl text: stores, operators, schedulers, config, regions."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
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


# ---------------------------------------------------------------------------
# Whole JSON documents (config, members, leader, health, cluster)


def _document(
    text_or_obj: object, what: str, accept: Callable[[Any], bool], expected: str
) -> tuple[Any, str]:
    """The one JSON value `accept` recognises, from a decoded value, an API body or pd-ctl text."""
    value, text = _load(text_or_obj, what)
    if isinstance(value, str):
        raise _pd_error(what, value)
    if value is _NOT_JSON:
        error = _first_error_line(text)
        if error is not None:
            raise _pd_error(what, error)
        # tiup prints "Starting component `ctl`: ..." before the body, and pasted sessions
        # carry shell prompts: take the first embedded value of the right shape.
        for embedded in _json_values(text):
            if accept(embedded):
                return embedded, text
        raise ParseError(
            f"{what}: no JSON {expected} found in the input; it starts with: {_excerpt(text)}"
        )
    if not accept(value):
        raise ParseError(f"{what}: expected {expected}, got {_excerpt(text or repr(value))}")
    return value, text


def _int(value: Any, where: str) -> int:
    # bool is an int subclass; PD never sends a bool where a number belongs.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParseError(f"{where}: {value!r} is not an integer")
    return value


def _optional_int(section: Mapping[str, Any], key: str, where: str) -> int | None:
    return None if section.get(key) is None else _int(section[key], f"{where}.{key}")


def _str_list(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ParseError(f"{where}: {value!r} is not a list of strings")
    return [str(v) for v in value]


# ---------------------------------------------------------------------------
# Config


class PDConfig(BaseModel):
    """The PD schedule/replication settings that shape a benchmark; None = not in the input."""

    model_config = ConfigDict(frozen=True)

    leader_schedule_limit: int | None = Field(
        default=None, description="schedule.leader-schedule-limit: concurrent leader transfers."
    )
    leader_schedule_policy: str | None = Field(
        default=None, description="schedule.leader-schedule-policy: 'count' or 'size'."
    )
    region_schedule_limit: int | None = Field(
        default=None, description="schedule.region-schedule-limit: concurrent region moves."
    )
    replica_schedule_limit: int | None = Field(
        default=None, description="schedule.replica-schedule-limit: concurrent replica repairs."
    )
    hot_region_schedule_limit: int | None = Field(
        default=None, description="schedule.hot-region-schedule-limit: concurrent hot moves."
    )
    switch_witness_interval: str | None = Field(
        default=None,
        description="schedule.switch-witness-interval (spelt swtich- up to v7.1), Go duration.",
    )
    max_replicas: int | None = Field(
        default=None, description="replication.max-replicas: Raft peers per region."
    )
    location_labels: list[str] | None = Field(
        default=None, description="replication.location-labels, e.g. ['zone', 'rack']."
    )
    enable_placement_rules: bool | None = Field(
        default=None, description="replication.enable-placement-rules."
    )


def _config_bool(section: Mapping[str, Any], key: str, where: str) -> bool | None:
    # Bools tagged `,string` in Go marshal as the JSON strings "true"/"false" (FACTS §1.7).
    raw = section.get(key)
    if raw is None:
        return None
    if isinstance(raw, bool):
        return raw
    if raw in ("true", "false"):
        return bool(raw == "true")
    raise ParseError(f'{where}.{key}: {raw!r} is neither "true" nor "false"')


def _config_str(section: Mapping[str, Any], key: str, where: str) -> str | None:
    raw = section.get(key)
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise ParseError(f"{where}.{key}: {raw!r} is not a string")
    return raw


def _location_labels(section: Mapping[str, Any], where: str) -> list[str] | None:
    # typeutil.StringSlice marshals as one comma-joined string, "" for none (FACTS §1.7).
    raw = section.get("location-labels")
    if raw is None:
        return None
    if isinstance(raw, str):
        return [label.strip() for label in raw.split(",") if label.strip()]
    return _str_list(raw, f"{where}.location-labels")


def _is_config(value: Any) -> bool:
    return isinstance(value, Mapping) and (
        isinstance(value.get("schedule"), Mapping) or isinstance(value.get("replication"), Mapping)
    )


def parse_pd_config(text_or_obj: str | bytes | Mapping[str, Any]) -> PDConfig:
    """Settings from `GET /config`, pd-ctl `config show` or `config show all` (text or decoded)."""
    # `config show all` prints the raw GET /config body; `config show` re-marshals only
    # {"replication", "schedule"} with keys sorted (FACTS §2.2, §2.3). Both carry the two
    # sections under the same names, so one reader serves all three.
    what = "PD config"
    value, _ = _document(
        text_or_obj, what, _is_config, "object with a 'schedule' or 'replication' section"
    )
    schedule = value.get("schedule") or {}
    replication = value.get("replication") or {}
    if not isinstance(schedule, Mapping) or not isinstance(replication, Mapping):
        raise ParseError(f"{what}: 'schedule' and 'replication' must be objects")
    s, r = f"{what} schedule", f"{what} replication"
    # ScheduleConfig's JSON tag was misspelt "swtich-witness-interval" up to v7.1 and fixed
    # in v7.5 (FACTS §1.7; sample pd-ctl-config-show-all_v6.5.1).
    witness_key = (
        "switch-witness-interval"
        if "switch-witness-interval" in schedule
        else "swtich-witness-interval"
    )
    return PDConfig(
        leader_schedule_limit=_optional_int(schedule, "leader-schedule-limit", s),
        leader_schedule_policy=_config_str(schedule, "leader-schedule-policy", s),
        region_schedule_limit=_optional_int(schedule, "region-schedule-limit", s),
        replica_schedule_limit=_optional_int(schedule, "replica-schedule-limit", s),
        hot_region_schedule_limit=_optional_int(schedule, "hot-region-schedule-limit", s),
        switch_witness_interval=_config_str(schedule, witness_key, s),
        max_replicas=_optional_int(replication, "max-replicas", r),
        location_labels=_location_labels(replication, r),
        enable_placement_rules=_config_bool(replication, "enable-placement-rules", r),
    )


# ---------------------------------------------------------------------------
# Members, leader, health, cluster


class PDMember(BaseModel):
    """One PD member as `GET /members`, `GET /leader` or `GET /health` name it."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="PD member name, e.g. basic-53pe89 (TiDB Operator v2 naming).")
    member_id: int = Field(description="etcd member id (a uint64; may exceed 2**63).")
    client_urls: list[str] = Field(default_factory=list, description="Client URLs (port 2379).")
    binary_version: str = Field(default="", description="PD version, e.g. v8.1.0; '' if absent.")


class PDMembers(BaseModel):
    """The PD members and who leads them, from `GET /members` or pd-ctl `member`."""

    model_config = ConfigDict(frozen=True)

    cluster_id: int | None = Field(default=None, description="header.cluster_id.")
    leader: str | None = Field(
        default=None, description="Name of the PD leader; None while no leader is elected."
    )
    etcd_leader: str | None = Field(default=None, description="Name of the etcd leader.")
    members: list[PDMember] = Field(description="Every PD member, in PD's order.")

    @property
    def member_names(self) -> list[str]:
        """Member names in PD's order."""
        return [m.name for m in self.members]


class PDMemberHealth(BaseModel):
    """One entry of `GET /health` or pd-ctl `health`."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="PD member name.")
    member_id: int = Field(description="etcd member id.")
    client_urls: list[str] = Field(default_factory=list, description="Client URLs.")
    health: bool = Field(description="Whether PD could reach this member's etcd.")


class PDCluster(BaseModel):
    """The cluster identity from `GET /cluster` or pd-ctl `cluster`."""

    model_config = ConfigDict(frozen=True)

    id: int = Field(description="PD cluster id (uint64).")
    max_peer_count: int | None = Field(default=None, description="Replicas per region.")


def _member(obj: Any, where: str) -> PDMember:
    if not isinstance(obj, Mapping) or not isinstance(obj.get("name"), str):
        raise ParseError(f"{where}: expected a member object with a 'name', got {obj!r}")
    return PDMember(
        name=obj["name"],
        member_id=_int(obj.get("member_id"), f"{where}.member_id"),
        client_urls=_str_list(obj.get("client_urls"), f"{where}.client_urls"),
        binary_version=str(obj.get("binary_version") or ""),
    )


def _leader_name(value: Mapping[str, Any], key: str, where: str) -> str | None:
    # PD omits "leader" / "etcd_leader" when there is none (mid-election).
    if value.get(key) is None:
        return None
    return _member(value[key], f"{where}.{key}").name


def parse_members(text_or_obj: str | bytes | Mapping[str, Any]) -> PDMembers:
    """Members and leaders from `GET /members` or pd-ctl `member`."""
    what = "PD members"
    value, _ = _document(
        text_or_obj,
        what,
        lambda v: isinstance(v, Mapping) and isinstance(v.get("members"), list),
        "object with a 'members' list",
    )
    header = value.get("header")
    cluster_id = header.get("cluster_id") if isinstance(header, Mapping) else None
    return PDMembers(
        cluster_id=None if cluster_id is None else _int(cluster_id, f"{what} header.cluster_id"),
        leader=_leader_name(value, "leader", what),
        etcd_leader=_leader_name(value, "etcd_leader", what),
        members=[_member(m, f"{what} members[{i}]") for i, m in enumerate(value["members"])],
    )


def parse_leader(text_or_obj: str | bytes | Mapping[str, Any]) -> PDMember:
    """The PD leader from `GET /leader` or pd-ctl `member leader show`."""
    what = "PD leader"
    value, _ = _document(
        text_or_obj,
        what,
        lambda v: isinstance(v, Mapping) and isinstance(v.get("name"), str),
        "member object with a 'name'",
    )
    return _member(value, what)


def parse_health(text_or_obj: str | bytes | Sequence[Any]) -> list[PDMemberHealth]:
    """Per-member health from `GET /health` or pd-ctl `health`."""
    what = "PD health"
    value, _ = _document(
        text_or_obj,
        what,
        lambda v: isinstance(v, list) and all(isinstance(e, Mapping) and "name" in e for e in v),
        "array of {name, member_id, health} objects",
    )
    result: list[PDMemberHealth] = []
    for i, entry in enumerate(value):
        where = f"{what}[{i}]"
        health = entry.get("health")
        if not isinstance(health, bool):
            raise ParseError(f"{where}.health: {health!r} is not true or false")
        member = _member(entry, where)
        result.append(
            PDMemberHealth(
                name=member.name,
                member_id=member.member_id,
                client_urls=member.client_urls,
                health=health,
            )
        )
    return result


def parse_cluster(text_or_obj: str | bytes | Mapping[str, Any]) -> PDCluster:
    """Cluster id from `GET /cluster` or pd-ctl `cluster`."""
    what = "PD cluster"
    value, _ = _document(
        text_or_obj,
        what,
        lambda v: isinstance(v, Mapping) and "id" in v,
        "object with an 'id'",
    )
    return PDCluster(
        id=_int(value["id"], f"{what}.id"),
        max_peer_count=_optional_int(value, "max_peer_count", what),
    )


# ---------------------------------------------------------------------------
# Regions


class Region(BaseModel):
    """One region from `GET /regions` or pd-ctl `region` (sizes in MiB as PD reports them)."""

    model_config = ConfigDict(frozen=True)

    id: int = Field(description="Region id.")
    start_key: str = Field(default="", description="Upper-case hex start key; '' = -infinity.")
    end_key: str = Field(default="", description="Upper-case hex end key; '' = +infinity.")
    leader_store_id: int | None = Field(
        default=None, description="Store holding the Raft leader; None if PD knows no leader."
    )
    peer_store_ids: list[int] = Field(
        default_factory=list, description="Stores holding a peer, in PD's order."
    )
    approximate_size: int | None = Field(default=None, description="Approximate size, MiB.")
    approximate_keys: int | None = Field(default=None, description="Approximate key count.")


class Regions(BaseModel):
    """Regions read from PD output; `complete` is False when only part could be read."""

    model_config = ConfigDict(frozen=True)

    count: int = Field(description="The count PD declared (len(regions) when complete).")
    regions: list[Region] = Field(description="The regions that could be read, in PD's order.")
    complete: bool = Field(description="Whether every declared region was read.")


# A line holding only dots is a human elision ("......" in the v6.1.0 jq-piped sample).
_ELISION = re.compile(r"^[ \t]*(?:\.{3,}|…)[ \t]*$", re.MULTILINE)
_DECLARED_COUNT = re.compile(r"\"count\"\s*:\s*(\d+)")


def _is_region(value: Any) -> bool:
    # start_key is never omitted from RegionInfo (FACTS §1.8); peers and epochs lack it.
    return isinstance(value, Mapping) and "id" in value and "start_key" in value


def _region(obj: Mapping[str, Any], where: str) -> Region:
    region_id = _int(obj.get("id"), f"{where}.id")
    where = f"{where} (region {region_id})"
    leader = obj.get("leader")
    leader_store = None
    if isinstance(leader, Mapping) and leader.get("store_id") is not None:
        leader_store = _int(leader["store_id"], f"{where}.leader.store_id")
    peers = obj.get("peers") or []
    if not isinstance(peers, list) or not all(isinstance(p, Mapping) for p in peers):
        raise ParseError(f"{where}.peers: not a list of peer objects")
    return Region(
        id=region_id,
        start_key=str(obj.get("start_key") or ""),
        end_key=str(obj.get("end_key") or ""),
        leader_store_id=leader_store,
        peer_store_ids=[
            _int(p.get("store_id"), f"{where}.peers[{i}].store_id") for i, p in enumerate(peers)
        ],
        approximate_size=_optional_int(obj, "approximate_size", where),
        approximate_keys=_optional_int(obj, "approximate_keys", where),
    )


def parse_regions(
    text_or_obj: str | bytes | Mapping[str, Any], *, allow_partial: bool = False
) -> Regions:
    """Regions from `GET /regions`, `GET /region/id/{id}` or pd-ctl `region [<id>]`.

    Output that is not whole JSON (truncated, or elided by hand) is a ParseError naming what
    was missing, unless `allow_partial`: then the region objects that could be read are
    returned with `complete=False`.
    """
    what = "PD regions"
    value, text = _load(text_or_obj, what)
    if isinstance(value, str):
        raise _pd_error(what, value)
    if value is not _NOT_JSON:
        if isinstance(value, Mapping) and "regions" in value:
            # Go marshals an empty slice as null: {"count":0,"regions":null}.
            items = value["regions"] or []
            if not isinstance(items, list) or not all(isinstance(r, Mapping) for r in items):
                raise ParseError(f"{what}: 'regions' is not a list of region objects")
            regions = [_region(r, f"{what} regions[{i}]") for i, r in enumerate(items)]
            count = _int(value.get("count", len(regions)), f"{what}.count")
            return Regions(count=count, regions=regions, complete=count == len(regions))
        if _is_region(value):
            return Regions(count=1, regions=[_region(value, what)], complete=True)
        raise ParseError(
            f"{what}: expected {{'count', 'regions'}} or one region object, got "
            f"{_excerpt(text or repr(value))}"
        )
    error = _first_error_line(text)
    if error is not None:
        raise _pd_error(what, error)
    found = [_region(v, f"{what} embedded region") for v in _json_values(text) if _is_region(v)]
    declared = _DECLARED_COUNT.search(text)
    if not found and declared is None:
        raise ParseError(
            f"{what}: no region JSON found in the input (expected pd-ctl `region` or "
            f"GET /pd/api/v1/regions output); it starts with: {_excerpt(text)}"
        )
    count = int(declared.group(1)) if declared is not None else len(found)
    if allow_partial:
        return Regions(count=count, regions=found, complete=False)
    elision = _ELISION.search(text)
    why = (
        f"line {text.count(chr(10), 0, elision.start()) + 1} is an elision "
        f"{elision.group(0).strip()!r}"
        if elision is not None
        else "the output looks truncated"
    )
    raise ParseError(
        f"{what}: the output is not whole JSON ({why}): it declares count {count} but only "
        f"{len(found)} region object(s) could be read (ids {[r.id for r in found]}); "
        "capture `pd-ctl region` again without editing or cutting it"
    )


def leader_store_counts(regions: Sequence[Region]) -> dict[int, int]:
    """Number of region leaders per store id (regions without a known leader are skipped)."""
    counts: dict[int, int] = {}
    for region in regions:
        if region.leader_store_id is not None:
            counts[region.leader_store_id] = counts.get(region.leader_store_id, 0) + 1
    return dict(sorted(counts.items()))
