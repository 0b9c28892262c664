"""The resources' wire models: run spec and status, schedule, guard, results, runner message."""
