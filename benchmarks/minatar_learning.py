"""MinAtar learning: xiaoyarl's agents on the torch-native MinAtar games, against the DQN of the
MinAtar paper (Young and Tian, "MinAtar: An Atari-Inspired Testbed for Thorough and Reproducible
Reinforcement Learning Experiments", 2019) at the same number of frames.

Every run is

    xiaoyarl train ALGO MinAtar/GAME-v1 --seed S --max-steps BUDGET --threads 1 [--set ...]

with the game's preset where one applies (printed at start) and the library's defaults
otherwise. Two numbers per run: the training return (the mean return of the last 100 training
episodes, the exploring policy, which is what the paper's curves show) and the final
evaluation (the greedy policy, `eval_episodes` fresh episodes). Runs go one at a time by
default (`--jobs`), one torch thread each.

Usage: python benchmarks/minatar_learning.py [--runs ppo:Breakout ppo:SpaceInvaders ...]
           [--seeds 0 1 2] [--max-steps 5000000] [--json out.json] [--keep DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from machine import machine


def last_training_return(folder: Path, episodes: int = 100) -> float:
    """The mean return of the last `episodes` training episodes, from the run's episodes.csv
    (one row per logging interval: how many episodes ended in it and their mean return)."""
    with open(folder / "episodes.csv") as f:
        rows = [row for row in csv.DictReader(f) if int(row["episodes"]) > 0]
    total, count = 0.0, 0
    for row in reversed(rows):
        n = int(row["episodes"])
        take = min(n, episodes - count)
        total += take * float(row["return_mean"])
        count += take
        if count >= episodes:
            break
    return total / max(count, 1)


def train(run: str, seed: int, budget: int, root: Path, extra: list[str]) -> dict:
    algo, game = run.split(":")
    name = f"{algo}_{game}_{seed}"
    folder, summary = root / name, root / f"{name}.json"
    command = [sys.executable, "-m", "xiaoyarl", "train", algo, f"MinAtar/{game}-v1",
               "--seed", str(seed), "--max-steps", str(budget), "--threads", "1",
               "--cwd", str(folder), "--summary-json", str(summary), "--quiet", *extra]  # fmt: skip
    subprocess.run(command, check=True)
    result = json.loads(summary.read_text())
    return {"algo": algo, "game": game, "seed": seed,
            "training_return_last100": round(last_training_return(folder), 2),
            **{k: result[k] for k in ("final_eval_mean", "best_eval_mean", "total_steps",
                                      "train_seconds")}}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", default=["ppo:Breakout", "ppo:SpaceInvaders",
                                                      "d3qn:Breakout"])  # fmt: skip
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--max-steps", type=int, default=5_000_000)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="passed to every run")  # fmt: skip
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", type=Path, help="keep the run folders here")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="xiaoyarl-minatar-"))
    extra = [item for value in args.set for item in ("--set", value)]
    tasks = [(run, seed) for run in args.runs for seed in args.seeds]
    results = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for result in pool.map(lambda t: train(*t, args.max_steps, root, extra), tasks):
            results.append(result)
            print(json.dumps(result), flush=True)
            if args.json:  # written after every run, so a long sweep keeps what it finished
                args.json.write_text(json.dumps({"machine": machine(), "max_steps":
                                                 args.max_steps, "set": args.set,
                                                 "runs": results}, indent=1) + "\n")  # fmt: skip
    print("| run | seeds | training return, last 100 episodes | final evaluation (greedy) |")
    print("| --- | --- | --- | --- |")
    for run in args.runs:
        rows = [r for r in results if f"{r['algo']}:{r['game']}" == run]
        train_ret = " / ".join(f"{r['training_return_last100']:.1f}" for r in rows)
        final = " / ".join(f"{r['final_eval_mean']:.1f}" for r in rows)
        print(f"| {run} | {len(rows)} | {train_ret} | {final} |")


if __name__ == "__main__":
    main()
