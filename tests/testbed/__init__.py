"""The local test bed: a real Kubernetes control plane, a node agent, MariaDB and sysbench."""
