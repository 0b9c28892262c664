"""Orchestration of the two resources: `run/` moves a BenchmarkRun along its life, `schedule/`
fires a BenchmarkSchedule's runs and judges them."""
