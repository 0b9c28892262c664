"""The spec a run is governed by once admitted (domain/trust/frozen.py) and the queue's key."""

from __future__ import annotations

import copy
from typing import Any

from tidb_bench_operator.domain.api.run_status import AdmittedSpec
from tidb_bench_operator.domain.queue import expires_at, queue_entry
from tidb_bench_operator.domain.trust.frozen import (
    admitted_spec,
    changed_fields,
    governing_spec,
    ignored_message,
)

SPEC: dict[str, Any] = {
    "cluster": {"name": "basic"},
    "credentials": {"secretRef": {"name": "db"}},
    "threads": [1, 2],
    "ttlSecondsAfterFinished": 60,
}


def body(phase: str | None, spec: dict[str, Any], admitted: dict[str, Any] | None) -> Any:
    status: dict[str, Any] = {"phase": phase} if phase else {}
    if admitted is not None:
        status["admitted"] = AdmittedSpec.of(admitted, 1).model_dump(by_alias=True)
        status["finishedAt"] = "2024-06-01T02:00:00Z"
    meta = {"name": "r", "namespace": "ns", "uid": "u", "creationTimestamp": "2024-06-01T00:00:00Z"}
    return {"metadata": meta, "spec": spec, "status": status}


def test_a_pending_run_is_governed_by_its_spec_an_admitted_one_by_the_copy() -> None:
    edited = {**SPEC, "cluster": {"name": "other"}, "threads": [64]}
    assert governing_spec(body(None, edited, None)) == edited
    admitted = body("Running", edited, SPEC)
    assert governing_spec(admitted) == SPEC == admitted_spec(admitted)
    assert admitted_spec(body("Running", SPEC, None)) is None
    assert changed_fields(SPEC, edited) == ["cluster", "threads"]
    assert changed_fields(SPEC, copy.deepcopy(SPEC)) == []


def test_an_edit_after_admission_moves_neither_the_queue_key_nor_the_ttl() -> None:
    edited = {**SPEC, "cluster": {"name": "other"}, "ttlSecondsAfterFinished": 0}
    found = queue_entry(body("Running", edited, SPEC))
    assert found is not None and found[0] == "cluster/ns/basic"
    pending = queue_entry(body(None, edited, None))
    assert pending is not None and pending[0] == "cluster/ns/other"
    finished = expires_at(body("Succeeded", edited, SPEC))
    assert finished is not None and finished.minute == 1  # 02:00 + the admitted 60 s


def test_the_copy_is_the_spec_as_written_and_unreadable_text_reads_as_nothing() -> None:
    copy_ = AdmittedSpec.of({"target": {"pdURL": "http://pd:2379"}, "é": 1}, 3)
    assert copy_.generation == 3 and copy_.data() == {"target": {"pdURL": "http://pd:2379"}, "é": 1}
    assert AdmittedSpec(spec="[1]").data() == {} == AdmittedSpec(spec="{").data()


def test_the_message_names_the_fields_and_both_generations() -> None:
    assert ignored_message(["cluster", "threads"], 1, 3) == (
        "spec changed after the run left Pending (generation 3: spec.cluster, spec.threads) "
        "and is ignored: the run goes on with the spec admitted at generation 1 "
        "(status.admitted.spec); to measure the new spec, create a new BenchmarkRun"
    )
