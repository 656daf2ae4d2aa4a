"""Algorithms through the CLI on the gymnasium backend: seeds solved, steps and seconds to the
target, per algorithm.

Tasks (and the env-step budgets within which each algorithm should reach the target):
  ppo, a2c                              CartPole-v1, target 475, within 500k env steps
  dqn, double_dqn, d3qn, sac_discrete   CartPole-v1, target 475, within 100k env steps
  ddpg, td3, sac, modsac, redq          Pendulum-v1, target -200, within 30k env steps
  tdmpc2                                Pendulum-v1, target -200, within 10k env steps
  dreamerv3                             CartPole-v1, target 475, within 20k env steps

Every run is `xiaoyarl train ALGO ENV --backend gymnasium --seed S --max-steps N
--summary-json F` with the library's default config (evaluation: deterministic policy,
10 episodes every 2,000 env steps, evaluation time included in the wall-clock). `--jobs 2`
runs two trainings at a time, one torch thread each; the seconds then include the contention.

Usage: python benchmarks/learning.py [--algos sac td3 ...] [--seeds 0 1 2] [--jobs 1]
       [--json out.json] [--set key=value ...]
e.g. the parallel runner: python benchmarks/learning.py --algos ppo sac --set runner=parallel

"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from machine import machine

TASKS = {
    "ppo": ("CartPole-v1", 500_000),
    "a2c": ("CartPole-v1", 500_000),
    "dqn": ("CartPole-v1", 100_000),
    "double_dqn": ("CartPole-v1", 100_000),
    "d3qn": ("CartPole-v1", 100_000),
    "sac_discrete": ("CartPole-v1", 100_000),
    "ddpg": ("Pendulum-v1", 30_000),
    "td3": ("Pendulum-v1", 30_000),
    "sac": ("Pendulum-v1", 30_000),
    "modsac": ("Pendulum-v1", 30_000),
    "redq": ("Pendulum-v1", 30_000),
    "tdmpc2": ("Pendulum-v1", 10_000),
    "dreamerv3": ("CartPole-v1", 20_000),
}


def train(algo: str, seed: int, root: Path, overrides: list[str], cap: int | None) -> dict:
    env_id, max_steps = TASKS[algo]
    max_steps = min(max_steps, cap or max_steps)
    summary = root / f"{algo}_{seed}.json"
    command = [
        sys.executable, "-m", "xiaoyarl", "train", algo, env_id, "--backend", "gymnasium",
        "--seed", str(seed), "--max-steps", str(max_steps), "--cwd", str(root / f"{algo}_{seed}"),
        "--summary-json", str(summary), "--quiet", "--set", "threads=1",
    ]  # fmt: skip
    for pair in overrides:
        command += ["--set", pair]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{algo} seed {seed} failed:\n{done.stderr[-2000:]}")
    result = json.loads(summary.read_text())
    result["process_seconds"] = time.perf_counter() - started
    print(
        f"{algo:13s} seed {seed}: solved={result['solved']} steps={result['steps_to_target']} "
        f"s={result['seconds_to_target']} final={result['final_eval_mean']} "
        f"sps={result['steps_per_second']:.0f}",
        flush=True,
    )
    return result


def table(results: dict[str, list[dict]]) -> str:
    def med(values: list) -> str:
        values = [v for v in values if v is not None]
        return f"{statistics.median(values):,.0f}" if values else "-"

    lines = [
        "| algorithm | env | seeds solved | median steps to target | median s to target "
        "(min-max) | train SPS |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for algo, rows in results.items():
        secs = [r["seconds_to_target"] for r in rows if r["seconds_to_target"] is not None]
        span = f" ({min(secs):.0f}-{max(secs):.0f})" if secs else ""
        solved = sum(r["solved"] for r in rows)
        lines.append(
            f"| {algo} | {TASKS[algo][0]} | {solved}/{len(rows)} | "
            f"{med([r['steps_to_target'] for r in rows])} | {med(secs)}{span} | "
            f"{med([r['steps_per_second'] for r in rows])} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--algos", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=1, help="trainings run at the same time")
    parser.add_argument("--max-steps", type=int, help="cap every budget (a smoke test)")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args()

    runs = [(algo, seed) for seed in args.seeds for algo in args.algos]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        root, cap = Path(tmp), args.max_steps
        futures = [pool.submit(train, a, s, root, args.overrides, cap) for a, s in runs]
        finished = [f.result() for f in futures]
    results: dict[str, list[dict]] = {algo: [] for algo in args.algos}
    for (algo, _), result in zip(runs, finished, strict=True):
        results[algo].append(result)

    print(
        f"\nGymnasium backend, {' '.join(args.overrides) or 'default config'}, {machine()}, "
        f"1 torch thread per run, "
        f"{args.jobs} run(s) at a time, {time.strftime('%Y-%m-%d')}\n"
    )
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
