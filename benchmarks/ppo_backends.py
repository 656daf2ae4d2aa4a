"""PPO on CartPole-v1: torch-native env vs gymnasium's env, on the same machine in one run.

For each seed the backends run alternately (A, B, C, A, B, C, ...) so machine drift hits all
of them. Rows:
  torch-native, default config (16 sub-envs on CPU) -> time and steps to the target
  gymnasium, default config (8 sub-envs)             -> time and steps to the target
  torch-native with 1,024 sub-envs                   -> time to the target and throughput
  gymnasium with 1,024 sub-envs, fixed step budget   -> throughput at the same batch size

Usage: python benchmarks/ppo_backends.py [--seeds 0 1 2] [--threads 1] [--json out.json]
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

ROWS = {
    "torch-native, default config (16 envs on CPU)": dict(backend="torch"),
    "gymnasium, default config (8 envs)": dict(backend="gymnasium"),
    "torch-native, 1024 envs": dict(backend="torch", num_envs=1024),
    "gymnasium, 1024 envs (throughput)": dict(backend="gymnasium", num_envs=1024),
}


def run(
    name: str,
    overrides: dict,
    seed: int,
    threads: int,
    max_steps: int,
    throughput_steps: int,
    root: Path,
) -> dict:
    fixed_budget = "throughput" in name
    config = Config(
        algo="ppo", env_id="CartPole-v1", seed=seed, threads=threads,
        cwd=str(root / f"{name}_{seed}"),
        max_steps=throughput_steps if fixed_budget else max_steps,
        target_return=1e9 if fixed_budget else None,
        eval_every=throughput_steps if fixed_budget else 20_000,
        **overrides,
    )  # fmt: skip
    return train_agent(config, log=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=3_000_000)
    parser.add_argument("--throughput-steps", type=int, default=200_000)
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args()

    results: dict[str, list[dict]] = {name: [] for name in ROWS}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for name, overrides in ROWS.items():
                summary = run(
                    name,
                    overrides,
                    seed,
                    args.threads,
                    args.max_steps,
                    args.throughput_steps,
                    Path(tmp),
                )
                results[name].append(summary)
                print(
                    f"{name:36s} seed {seed}: solved={summary['solved']} "
                    f"steps={summary['steps_to_target']} s={summary['seconds_to_target']} "
                    f"sps={summary['steps_per_second']:,.0f}",
                    flush=True,
                )

    def med(values: list) -> str:
        values = [v for v in values if v is not None]
        return f"{statistics.median(values):,.1f}" if values else "-"

    print(f"\nPPO on CartPole-v1, {machine()}, {args.threads} torch thread(s), "
          f"{time.strftime('%Y-%m-%d')}\n")  # fmt: skip
    print("| setup | seeds solved | median steps to 475 | median s to 475 (min-max) | train SPS |")
    print("| --- | --- | --- | --- | --- |")
    for name, rows in results.items():
        secs = [r["seconds_to_target"] for r in rows if r["seconds_to_target"] is not None]
        span = f" ({min(secs):.1f}-{max(secs):.1f})" if secs else ""
        solved = "n/a" if "throughput" in name else f"{sum(r['solved'] for r in rows)}/{len(rows)}"
        print(
            f"| {name} | {solved} | {med([r['steps_to_target'] for r in rows])} | "
            f"{med(secs)}{span} | {med([r['steps_per_second'] for r in rows])} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
