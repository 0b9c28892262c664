"""What a recorded step writes to the run's results store, and what it reads back from it.

A trial writes only its own documents (domain/results_store.py): its series and trial
document once, its step's document and the tiny index. Status lists compact trials (and
not every one of a very long run): the median trial's full result and a step's complete
list of trials are read back from the store when a new trial needs them.
"""

from __future__ import annotations

from tidb_bench_operator.domain.api.results import StepResult
from tidb_bench_operator.domain.api.run_status import Environment, StepStatus
from tidb_bench_operator.domain.api.trial import Trial
from tidb_bench_operator.domain.jobs import node_names
from tidb_bench_operator.domain.manifests import build_results_configmap, object_name
from tidb_bench_operator.domain.objects import JSON
from tidb_bench_operator.domain.results_store import (
    StepSeries,
    index_part,
    joined_doc,
    part_name,
    series_parts,
    step_parts,
    trial_doc,
    trial_parts,
)
from tidb_bench_operator.errors import StoreError
from tidb_bench_operator.reconcile.run.context import RunContext


def keep_nodes(ctx: RunContext, pods: list[JSON]) -> None:
    """The nodes a step's clients ran on join status.environment.nodes before its Jobs go."""
    env = ctx.st.environment or Environment()
    env.nodes = sorted(set(env.nodes) | set(node_names(pods)))
    ctx.st.environment = env


def stored_trials(ctx: RunContext, step: StepStatus) -> list[Trial]:
    """Every trial of `step` (compact), from its document in the results store."""
    what = f"step {step.index + 1} ({step.workload}, {step.threads} threads)"
    doc = StepStatus.model_validate_json(_stored_doc(ctx, f"st{step.index}", what))
    return doc.trials


def stored_step(ctx: RunContext, step: StepStatus) -> StepStatus | None:
    """`step` as the results store last kept it; None when the store has no readable one."""
    what = f"step {step.index + 1} ({step.workload}, {step.threads} threads)"
    try:
        return StepStatus.model_validate_json(_stored_doc(ctx, f"st{step.index}", what))
    except (StoreError, ValueError):  # missing, or not a step (pydantic's errors are ValueErrors)
        return None


def stored_result(ctx: RunContext, step: StepStatus, ordinal: int) -> StepResult:
    """The full result of trial `ordinal` of `step`, from the results store."""
    what = (
        f"trial {ordinal + 1} of step {step.index + 1} ({step.workload}, {step.threads} "
        "threads), the step's median"
    )
    trial = Trial.model_validate_json(_stored_doc(ctx, trial_doc(step.index, ordinal), what))
    if trial.result is None:
        raise StoreError(f"the results store's {what} has no result")
    return trial.result


def _stored_doc(ctx: RunContext, doc: str, what: str) -> str:
    """The text of one document of the run's results store, read part by part."""
    run = ctx.run
    index = object_name(run.name, "results")
    parts: dict[str, dict[str, str]] = {}
    first = ctx.kube.configmap(run.namespace, part_name(index, doc, 0))
    count = int(((first or {}).get("data") or {}).get("parts", "1"))
    for k in range(count):
        found = first if k == 0 else ctx.kube.configmap(run.namespace, part_name(index, doc, k))
        if found is not None:
            parts[part_name(index, doc, k)] = found.get("data") or {}
    text = joined_doc(index, doc, parts)
    if text is None:
        raise StoreError(
            f"ConfigMap {part_name(index, doc, 0)} ({what}) is missing: it cannot be read back"
        )
    return text


def save_results(
    ctx: RunContext, step: StepStatus, series: StepSeries, round_: int, trial: Trial | None
) -> None:
    """Write a recorded step's documents to the run's results store (domain.results_store).

    Only what this trial adds: its series (of round `round_`) and its trial document, both
    written once, the step's own document (one step, all its notes) and the tiny index.
    Each object is within the store's budget by construction.
    """
    run, st = ctx.run, ctx.st
    name = object_name(run.name, "results")
    budget = ctx.deps.results_budget
    parts = series_parts(name, step.index, series, budget, round_)
    if trial is not None:
        ordinal = len(step.trials) - 1
        parts += trial_parts(name, step.index, ordinal, _dump(trial), budget)
    every = [t.compact() for t in step.trials]
    parts += step_parts(name, _dump(step.model_copy(update={"trials": every})), budget)
    # A capacity search's step list grows: its index follows the count.
    if st.results_config_map != name or ctx.spec.capacity_search is not None:
        parts.append(index_part(name, len(st.steps)))
    for part in parts:
        ctx.kube.upsert_configmap(build_results_configmap(run, part.name, part.data))
    st.results_config_map = name


def _dump(model: Trial | StepStatus) -> JSON:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")
