"""Server resources per step: what a source read, the facts of pods and nodes, what they
say together (cores per component, pod and node, QPS per core, the bottleneck)."""
