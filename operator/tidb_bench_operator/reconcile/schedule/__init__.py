"""BenchmarkSchedule orchestration: fire runs on time, keep their history, flag regressions."""
