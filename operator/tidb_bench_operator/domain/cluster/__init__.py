"""One view of a TiDB cluster of either TiDB Operator generation: readers, endpoint, TLS names."""
