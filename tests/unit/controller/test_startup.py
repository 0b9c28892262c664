"""controller/startup.py: wait until API discovery serves our resources before kopf scans it."""

from __future__ import annotations

from typing import Any

import pytest

from testbed.clocks import SecondsClock
from tidb_bench_operator.controller.startup import wait_until_served
from tidb_bench_operator.errors import CrdsNotServed, KubeError


class Discovery:
    """Answers served_resources() from a script: one answer (a set or an error) per call."""

    def __init__(self, *answers: set[str] | Exception) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, str]] = []

    def served_resources(self, group: str, version: str) -> set[str]:
        self.calls.append((group, version))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


BOTH = {"benchmarkruns", "benchmarkruns/status", "benchmarkschedules"}


def wait(discovery: Discovery, clock: SecondsClock, timeout: float = 60) -> list[str]:
    notes: list[str] = []
    kube: Any = discovery
    wait_until_served(
        kube, timeout=timeout, log=notes.append, poll=0.5, clock=clock, sleep=clock.sleep
    )
    return notes


def test_it_returns_at_once_when_both_resources_are_served() -> None:
    discovery, clock = Discovery(BOTH), SecondsClock(0.0)
    assert wait(discovery, clock) == []
    assert discovery.calls == [("tidbbench.io", "v1alpha1")]
    assert clock.now == 0


def test_it_waits_through_the_gap_between_established_and_discovery() -> None:
    # The API group is not there yet, then only one CRD is listed, then both.
    discovery, clock = (
        Discovery(set(), {"benchmarkruns"}, {"benchmarkruns"}, BOTH),
        SecondsClock(0.0),
    )
    notes = wait(discovery, clock)
    assert len(discovery.calls) == 4
    assert clock.now == 1.5
    assert notes == [
        "waiting for API discovery to list benchmarkruns.tidbbench.io/v1alpha1, "
        "benchmarkschedules.tidbbench.io/v1alpha1"
    ]


def test_it_notes_progress_every_10_seconds_not_every_poll() -> None:
    discovery, clock = Discovery(*([set()] * 50), BOTH), SecondsClock(0.0)
    notes = wait(discovery, clock)
    assert clock.now == 25.0
    assert len(notes) == 3  # at 0, 10 and 20 s


def test_missing_crds_end_in_an_error_that_says_how_to_install_them() -> None:
    discovery, clock = Discovery({"benchmarkruns"}), SecondsClock(0.0)
    with pytest.raises(CrdsNotServed) as raised:
        wait(discovery, clock, timeout=5)
    assert str(raised.value) == (
        "API discovery does not list benchmarkschedules.tidbbench.io/v1alpha1 after 5 s; "
        "install the CRDs first (kubectl apply -k crds/, or kubectl apply -k deploy/ which "
        "includes them), or raise TIDB_BENCH_CRD_WAIT_SECONDS"
    )
    assert clock.now == 5.0


def test_a_failing_discovery_call_is_retried_and_named_if_it_never_recovers() -> None:
    discovery, clock = (
        Discovery(KubeError("API discovery of tidbbench.io/v1alpha1: 503 x")),
        SecondsClock(0.0),
    )
    with pytest.raises(CrdsNotServed, match=r"after 2 s \(API discovery of .*: 503 x\)"):
        wait(discovery, clock, timeout=2)
    recovered = Discovery(KubeError("503"), BOTH)
    assert wait(recovered, SecondsClock(0.0)) == ["waiting for API discovery to list "
                                        "benchmarkruns.tidbbench.io/v1alpha1, benchmarkschedules"
                                        ".tidbbench.io/v1alpha1 (503)"]  # fmt: skip
