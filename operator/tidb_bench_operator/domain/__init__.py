"""Pure domain code: stdlib and pydantic (numpy and scipy only in stats/), no I/O.

One package per concept: api (the resources' models), cluster (one view of either operator
generation), experiment (a BenchmarkExperiment's patches, plan, settling and state machine),
preflight (every check), stats, report, sysbench; and single-purpose modules:
crdgen, fingerprint, guard, jobs, manifests, objects, pd, queue, results_store, schedule,
status, untrusted.
"""
