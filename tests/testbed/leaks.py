"""Searching everything a namespace's runs produced for values that must not be there.

What is searched (`everything_written`): the runs and schedules with their status, Events,
ConfigMaps, Jobs, pods with their termination messages, pod logs, ServiceAccounts and the
controller's log. What is searched for (`needles`): each value whole, base64 (as in a
Secret's data) and JSON-escaped; a private key also line by line of its PEM body
(`key_needles`); every key of every Secret of a namespace (`secret_needles`).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from kubernetes import client

from testbed.runs import GROUP, PLURAL, VERSION

#: Values shorter than this are not searched for: they occur in any text by chance.
MIN_NEEDLE = 8


def needles(value: str) -> list[str]:
    """A value as it could leak: plain, base64 (as in a Secret's data), JSON-escaped."""
    return [value, base64.b64encode(value.encode()).decode(), json.dumps(value)[1:-1]]


def key_needles(pem: str) -> list[str]:
    """A private key as it could leak: whole, base64 of it, JSON-escaped, each body line."""
    body = [ln for ln in pem.splitlines() if ln and not ln.startswith("-----")]
    assert body and all(len(ln) >= 16 for ln in body[:-1])
    return [*needles(pem), *body]


def found(haystacks: dict[str, str], words: list[str]) -> list[str]:
    """Where each of `words` occurs in `haystacks` (name → text), as `name: 'word'` lines."""
    return [f"{where}: {w!r}" for where, text in haystacks.items() for w in words if w in text]


#: Keys whose values are public by nature: a certificate (not its key), a namespace's name.
PUBLIC_KEYS = frozenset({"ca.crt", "tls.crt", "namespace"})


def secret_needles(
    core: client.CoreV1Api, namespace: str, *, public: frozenset[str] = PUBLIC_KEYS
) -> dict[str, list[str]]:
    """Every key of every Secret of `namespace` → its value's needles (`Secret/key` names).

    Keys in `public` and values shorter than MIN_NEEDLE are left out (they are not secret,
    or would be found by chance); a PEM private key is searched for line by line too.
    """
    out: dict[str, list[str]] = {}
    for secret in core.list_namespaced_secret(namespace).items:
        for key, data in (secret.data or {}).items():
            if key in public:
                continue
            value = base64.b64decode(data).decode(errors="replace")
            if len(value) < MIN_NEEDLE:
                continue
            words = key_needles(value) if "PRIVATE KEY-----" in value else needles(value)
            out[f"{secret.metadata.name}/{key}"] = words
    return out


def found_secrets(haystacks: dict[str, str], secrets: dict[str, list[str]]) -> list[str]:
    """`found` for every Secret key of `secret_needles`, each hit naming the key it came from."""
    return [
        f"{name} in {hit}" for name, words in secrets.items() for hit in found(haystacks, words)
    ]


def everything_written(api: client.ApiClient, ns: str, controller_log: Path) -> dict[str, str]:
    """Runs and schedules with status, Events, ConfigMaps, Jobs, pods (with termination
    messages), pod logs, the ServiceAccounts and the controller's log, as text."""
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    custom = client.CustomObjectsApi(api)
    raw = client.ApiClient.sanitize_for_serialization
    out: dict[str, str] = {"controller log": controller_log.read_text()}
    runs = custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)
    out |= {f"BenchmarkRun {r['metadata']['name']}": json.dumps(r) for r in runs["items"]}
    schedules = custom.list_namespaced_custom_object(GROUP, VERSION, ns, "benchmarkschedules")
    out |= {f"BenchmarkSchedule {s['metadata']['name']}": json.dumps(s) for s in schedules["items"]}
    out |= {
        f"Event {e.metadata.name}": json.dumps(raw(api, e))
        for e in core.list_namespaced_event(ns).items
    }
    out |= {
        f"ConfigMap {c.metadata.name}": json.dumps(raw(api, c))
        for c in core.list_namespaced_config_map(ns).items
    }
    out |= {
        f"Job {j.metadata.name}": json.dumps(raw(api, j))
        for j in batch.list_namespaced_job(ns).items
    }
    for pod in core.list_namespaced_pod(ns).items:
        out[f"Pod {pod.metadata.name}"] = json.dumps(raw(api, pod))
        try:
            out[f"log of {pod.metadata.name}"] = core.read_namespaced_pod_log(pod.metadata.name, ns)
        except client.exceptions.ApiException as exc:
            # A finished Job's pod can be deleted between the list and this read; its log is
            # then gone for every reader, which is what the search is about.
            if exc.status != 404:
                raise
    for sa in core.list_namespaced_service_account(ns).items:
        out[f"ServiceAccount {sa.metadata.name}"] = json.dumps(raw(api, sa))
    return out
