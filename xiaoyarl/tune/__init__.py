"""Hyper-parameter search (`xiaoyarl tune`): Optuna studies, or the same search as a population;
the result is a preset file (`study.py`)."""
