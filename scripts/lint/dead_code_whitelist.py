"""Definitions in operator/ that vulture sees no use of, and why each stays (read by vulture).

Each line names an attribute or function as vulture matches it (by name); the comment is the
reason. Prefer deleting to listing: what the product does not use goes, unless a framework
uses it or it is owned by a branch that is reworking it.
"""

# ruff: noqa: B018
# mypy: ignore-errors
_ = object()

# pydantic reads each model's configuration from this class attribute.
_.model_config

# kopf reads its settings from these attributes (handlers.on_startup_configure).
_.progress_storage
_.diffbase_storage
_.server_timeout
_.level

# The run guard's inputs for a TiDB Operator v2 cluster (domain/cluster_view.py): issue 17
# exposes them in the view, the guard that stops a run on a rollout or scale comes later.
_.progressing  # ClusterView: the Cluster's Progressing condition
_.unsettled_groups  # ClusterView: groups in a rollout or scale, from their status

# urllib calls it on its redirect handlers (adapters/http_get.py: redirects are not followed).
_.redirect_request

# pymysql reads it before every read (adapters/mysql.py: the greeting within the connect
# timeout, queries within the longer read timeout; pymysql has no setter).
_._read_timeout
