"""The training loop every runner shares (`loop`), its evaluator, checkpoints, loggers, progress
line, plots, schedules and divergence guard."""
