"""BenchmarkExperiment orchestration: change the cluster, measure, put it back (#27)."""
