"""What a run's author can reach through the controller, and what a run keeps once admitted.

`reach.py`: the platform team's settings (cross-namespace clusters, image overrides,
explicit targets) and the refusal of a spec that asks for more. `frozen.py`: the spec a run
was admitted with, which governs it from then on (docs/trust.md).
"""
