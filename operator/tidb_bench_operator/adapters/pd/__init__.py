"""PD adapter: a narrow, read-only PD client over the HTTP API or pd-ctl exec'd in a PD pod.

One client with two transports that fail alike (the same PDError kinds, the same answers to
parse): client (paths, the PDClient interface, reading answers), http, ctl (pd-ctl and the
judging of its text), choose (spec.preflight.pdTransport). The names below are the package's
public face; everything else is the modules' own.
"""

from tidb_bench_operator.adapters.pd.choose import PodLister, choose_pd_pod, make_pd_client
from tidb_bench_operator.adapters.pd.client import (
    LOCAL_PD_TLS_URL,
    LOCAL_PD_URL,
    ExecFn,
    PDClient,
    Transport,
    TransportMode,
)
from tidb_bench_operator.adapters.pd.ctl import (
    ExecPDClient,
    UnavailablePDClient,
    judge_pd_ctl_output,
    kubernetes_exec,
)
from tidb_bench_operator.adapters.pd.http import HTTPPDClient, urllib_transport

__all__ = [
    "LOCAL_PD_TLS_URL",
    "LOCAL_PD_URL",
    "ExecFn",
    "ExecPDClient",
    "HTTPPDClient",
    "PDClient",
    "PodLister",
    "Transport",
    "TransportMode",
    "UnavailablePDClient",
    "choose_pd_pod",
    "judge_pd_ctl_output",
    "kubernetes_exec",
    "make_pd_client",
    "urllib_transport",
]
