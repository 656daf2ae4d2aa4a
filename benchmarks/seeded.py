"""What the benchmarks that train each setting on several seeds share: their options (`--seeds`,
`--max-steps`, `--jobs`, `--json`), one training through the CLI, and running the trainings a
few at a time."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TEST_ENVS = Path(__file__).resolve().parents[1] / "tests"  # the tests' small tasks (module:Id)
# what a row reports of a run's summary
KEPT = ("solved", "steps_to_target", "seconds_to_target", "best_eval_mean", "final_eval_mean",
        "total_steps", "train_seconds")  # fmt: skip


def add_seed_options(parser: argparse.ArgumentParser, max_steps: int | None) -> None:
    """`--seeds`, `--max-steps` (default `max_steps`; None: none, each run has its own), `--jobs`
    (trainings at a time) and `--json` (where to write the results)."""
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    if max_steps is not None:
        parser.add_argument("--max-steps", type=int, default=max_steps)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path)


def run_all(train: Callable[..., dict], tasks: Iterable[tuple], jobs: int) -> list[dict]:
    """`train(*task)` for every task, `jobs` at a time (each a process of its own), in order."""
    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(lambda task: train(*task), tasks))


def train_cli(algo: str, env_id: str, seed: int, budget: int, cwd: Path,
              extra: Sequence[str] = ()) -> dict:  # fmt: skip
    """`xiaoyarl train ALGO ENV_ID --seed S --max-steps B --threads 1` (and `extra`) into `cwd`,
    the tests' small tasks importable; what `KEPT` names of its summary."""
    summary = cwd.with_name(cwd.name + ".json")
    command = [sys.executable, "-m", "xiaoyarl", "train", algo, env_id, "--seed", str(seed),
               "--max-steps", str(budget), "--threads", "1", "--cwd", str(cwd),
               "--summary-json", str(summary), "--quiet", *extra]  # fmt: skip
    path = os.pathsep.join(filter(None, [str(TEST_ENVS), os.environ.get("PYTHONPATH")]))
    subprocess.run(command, check=True, env={**os.environ, "PYTHONPATH": path})
    result = json.loads(summary.read_text())
    return {k: result[k] for k in KEPT}
