"""A tiny pd-ctl stand-in: `python pd_ctl_emulator.py -u URL store|operator show|config show`.

`--pd-url-override URL` (ours, not pd-ctl's) says where "the pod's own PD" really listens: on
the test bed a stand-in PD pod has no PD at 127.0.0.1:2379, so requests to that address go
to URL (e.g. a FakePD) while every message still names the address pd-ctl was given.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

# Behaviour of pd-ctl v8.1.1, read from its source (https://github.com/tikv/pd/blob/v8.1.1/tools/pd-ctl/pdctl/command):
# - command → endpoint map (§2.2); `store` re-marshals with `state` and `node_state` zeroed
#   (so omitted) and 2-space indent, `store <id>` zeroes only `state` (§2.3);
# - `config show` keeps only replication + schedule, drops hidden keys, keys sorted (§2.3);
# - errors are printed to stdout ("Failed to get store: <err>", bare "<err>" for
#   operator/scheduler show) and the exit code is 0 anyway (§2.3, tikv/pd#8762); only an
#   unknown command exits 1 (cobra).

CONFIG_HIDDEN = {
    "schedulers-v2",
    "schedulers-payload",
    "store-limit",
    "enable-remove-down-replica",
    "enable-replace-offline-replica",
    "enable-make-up-replica",
    "enable-remove-extra-replica",
    "enable-location-replacement",
    "enable-one-way-merge",
    "enable-debug-metrics",
    "store-limit-mode",
    "scheduler-max-waiting-operator",
}


LOCAL_PD = {"127.0.0.1:2379", "localhost:2379"}
# Set by --pd-url-override: where requests to LOCAL_PD really go.
_redirect_to: str | None = None
# pd-ctl's --cacert/--cert/--key: the TLS client for https:// endpoints (ctl.go).
_tls: dict[str, str] = {}
TLS_FLAGS = ("--cacert", "--cert", "--key")


class RequestFailed(Exception):
    """pd-ctl's `<err>`: `[<status>] <body>` or the Go client error text."""


def _endpoints(argv: list[str]) -> tuple[list[str], list[str]]:
    urls: list[str] = []
    rest: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg in ("-u", "--pd"):
            urls.append(next(it, ""))
        elif arg.startswith(("--pd=", "-u=")):
            urls.append(arg.split("=", 1)[1])
        elif arg in TLS_FLAGS:
            _tls[arg[2:]] = next(it, "")
        elif arg.startswith(tuple(f"{f}=" for f in TLS_FLAGS)):
            name, value = arg[2:].split("=", 1)
            _tls[name] = value
        else:
            rest.append(arg)
    if os.environ.get("PD_ADDR"):
        urls.append(os.environ["PD_ADDR"])
    joined = ",".join(urls) or "http://127.0.0.1:2379"
    endpoints = []
    for url in joined.split(","):
        url = url.strip()
        if url and "://" not in url:
            url = "http://" + url  # scheme optional (checkURL)
        if url:
            endpoints.append(url.rstrip("/"))
    return endpoints, rest


def _get_one(endpoint: str, path: str) -> str:
    url = f"{endpoint}/{path}"
    real = url
    if _redirect_to is not None and urllib.parse.urlsplit(endpoint).netloc in LOCAL_PD:
        real = f"{_redirect_to.rstrip('/')}/{path}"
    context = None
    if real.startswith("https://"):
        context = ssl.create_default_context(cafile=_tls.get("cacert") or None)
        if _tls.get("cert"):
            context.load_cert_chain(_tls["cert"], _tls.get("key") or None)
    try:
        with urllib.request.urlopen(real, timeout=10, context=context) as resp:
            return str(resp.read().decode())
    except urllib.error.HTTPError as exc:
        raise RequestFailed(f"[{exc.code}] {exc.read().decode()}") from exc
    except (urllib.error.URLError, OSError) as exc:
        host = urllib.parse.urlsplit(url).netloc
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, ssl.SSLCertVerificationError):
            # Go's crypto/tls wording (the text differs in detail, not in kind).
            text = f"tls: failed to verify certificate: x509: {reason.verify_message}"
        elif isinstance(reason, ssl.SSLError):
            text = f"remote error: tls: {reason.reason}"
        elif isinstance(reason, ConnectionRefusedError):
            text = f"dial tcp {host}: connect: connection refused"
        else:
            text = f"dial tcp {host}: {reason}"
        raise RequestFailed(f'Get "{url}": {text}') from exc


def get(endpoints: list[str], path: str) -> str:
    """GET `path` from the first endpoint that answers, as pd-ctl's tryURLs does."""
    last: RequestFailed | None = None
    for endpoint in endpoints:
        try:
            return _get_one(endpoint, path)
        except RequestFailed as exc:
            if str(exc).startswith("["):  # an HTTP answer: do not try further endpoints
                raise
            last = exc
    if len(endpoints) > 1:
        raise RequestFailed(
            f"after trying all endpoints, no endpoint is available, the last error we met: {last}"
        )
    assert last is not None
    raise last


def _dump(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def cmd_store(endpoints: list[str], args: list[str]) -> str:
    """`store` and `store <id>`."""
    if args:
        try:
            body = get(endpoints, f"pd/api/v1/store/{args[0]}")
        except RequestFailed as exc:
            return f"Failed to get store: {exc}"
        info = json.loads(body)
        info.get("store", {}).pop("state", None)
        return _dump(info)
    try:
        body = get(endpoints, "pd/api/v1/stores")
    except RequestFailed as exc:
        return f"Failed to get store: {exc}"
    doc = json.loads(body)
    for info in doc.get("stores") or []:
        info.get("store", {}).pop("state", None)
        info.get("store", {}).pop("node_state", None)
    return _dump(doc)


def cmd_raw(endpoints: list[str], path: str) -> str:
    """Commands that print the body as PD sent it, or the bare error."""
    try:
        return get(endpoints, path).rstrip("\n")
    except RequestFailed as exc:
        return str(exc)


def cmd_config_show(endpoints: list[str], args: list[str]) -> str:
    """`config show`, `config show all`, `config show replication`."""
    if args[:1] == ["all"]:
        path = "pd/api/v1/config"
    elif args[:1] == ["replication"]:
        path = "pd/api/v1/config/replicate"
    else:
        path = ""
    try:
        body = get(endpoints, path or "pd/api/v1/config")
    except RequestFailed as exc:
        return f"Failed to get config: {exc}"
    if path:
        return body.rstrip("\n")
    full = json.loads(body)
    shown = {
        "replication": full.get("replication", {}),
        "schedule": {k: v for k, v in full.get("schedule", {}).items() if k not in CONFIG_HIDDEN},
    }
    return json.dumps(shown, indent=2, sort_keys=True, ensure_ascii=False)


def main(argv: list[str]) -> int:
    """Run one command; print like pd-ctl; exit 0 unless the command is unknown."""
    global _redirect_to
    if argv[:1] == ["--pd-url-override"] and len(argv) > 1:
        _redirect_to, argv = argv[1], argv[2:]
    endpoints, words = _endpoints(argv)
    if not words:
        print("Error: no command given", file=sys.stderr)
        return 1
    command, args = words[0], words[1:]
    if command == "store":
        out = cmd_store(endpoints, args)
    elif command == "operator" and args[:1] == ["show"]:
        kind = f"?kind={args[1]}" if len(args) > 1 else ""
        out = cmd_raw(endpoints, f"pd/api/v1/operators{kind}")
    elif command == "scheduler" and args[:1] == ["show"]:
        out = cmd_raw(endpoints, "pd/api/v1/schedulers")
    elif command == "config" and args[:1] == ["show"]:
        out = cmd_config_show(endpoints, args[1:])
    elif command in ("member", "health", "cluster"):
        path = {"member": "members", "health": "health", "cluster": "cluster"}[command]
        out = cmd_raw(endpoints, f"pd/api/v1/{path}")
    else:
        print(f'Error: unknown command "{" ".join(words)}" for "pd-ctl"', file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
