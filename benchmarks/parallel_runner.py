"""Env steps per second of the parallel runner with 1, 2, ... workers against the
single-process runner, on a CPU-heavy simulator, in one run.

PPO (default config, `num_envs` gymnasium sub-envs per worker) trains for a fixed budget of
env steps with evaluation switched off; the rate is total env steps / wall-clock of the
training loop, updates included, after the first round of rollouts and its update (so the
parallel runner's one-time costs, process start-up and first-step initialisation, are left
out; they are reported as `first_round_seconds` in the run summary). Torch threads are left at
their default (one per core) in every row: the single process and the learner use them for
the update; workers step their envs with one thread each.
Rows run alternately, once per repeat, so machine drift hits
all of them; the median is reported. BipedalWalker-v3 needs Box2D: `pip install -e '.[box2d]'`.

    python benchmarks/parallel_runner.py --env BipedalWalker-v3 --workers 1 2 --steps 40000
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from machine import machine

from xiaoyarl import Config, train_agent


def run(env_id: str, runner: str, workers: int, steps: int, num_envs: int, root: Path) -> float:
    config = Config(
        algo="ppo", env_id=env_id, backend="gymnasium", runner=runner, num_workers=workers,
        num_envs=num_envs, max_steps=steps, eval_every=10**12,
        target_return=1e12, eval_episodes=1, cwd=str(root / f"{runner}_{workers}_{time.time()}"),
        checkpoint_every=10**12,
    )  # fmt: skip
    summary = train_agent(config, log=None)
    # the parallel runner's one-time costs (process start-up, first round) are left out
    first = summary.get("first_round_seconds") or 0.0  # parallel runner only
    seconds = summary["train_seconds"] - summary["eval_seconds"] - first
    measured = summary["total_steps"] - summary.get("first_round_steps", 0)
    if measured <= 0:
        raise SystemExit(f"--steps {steps} is one round of rollouts; give it several rounds")
    return measured / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="BipedalWalker-v3")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=40_000, help="env steps per run")
    parser.add_argument("--num-envs", type=int, default=8, help="sub-envs per worker")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args()

    rows = [("single", 1)] + [("parallel", w) for w in args.workers]
    rates: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for runner, workers in rows:
                name = "single process" if runner == "single" else f"parallel, {workers} worker(s)"
                steps = args.steps * (workers if runner == "parallel" else 1)
                rate = run(args.env, runner, workers, steps, args.num_envs, Path(tmp))
                rates.setdefault(name, []).append(rate)
                print(f"{name:28s} {rate:10,.0f} env steps/s", flush=True)

    base = statistics.median(rates["single process"])
    one = statistics.median(rates.get("parallel, 1 worker(s)", [base]))
    print(f"\nPPO on {args.env}, {args.num_envs} sub-envs per worker, {machine()}, "
          f"{time.strftime('%Y-%m-%d')}\n")  # fmt: skip
    print("| runner | env steps/s (median) | vs single process | vs 1 worker |")
    print("| --- | --- | --- | --- |")
    for name, values in rates.items():
        rate = statistics.median(values)
        print(f"| {name} | {rate:,.0f} | {rate / base:.2f}x | {rate / one:.2f}x |")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine(), "rates": rates}, indent=2))


if __name__ == "__main__":
    main()
