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
