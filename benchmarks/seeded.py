"""What the benchmarks that train each setting on several seeds share: their options (`--seeds`,
`--max-steps`, `--jobs`, `--json`) and running the trainings a few at a time."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def add_seed_options(parser: argparse.ArgumentParser, max_steps: int) -> None:
    """`--seeds`, `--max-steps` (default `max_steps`), `--jobs` (trainings at a time) and
    `--json` (where to write the results)."""
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--max-steps", type=int, default=max_steps)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path)


def run_all(train: Callable[..., dict], tasks: Iterable[tuple], jobs: int) -> list[dict]:
    """`train(*task)` for every task, `jobs` at a time (each a process of its own), in order."""
    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(lambda task: train(*task), tasks))
