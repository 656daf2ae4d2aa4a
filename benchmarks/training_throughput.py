"""End-to-end training steps per second (rollout + update) on torch-native envs at large
`num_envs`, on a CPU or a GPU, plus the bare simulator's random-action rate for comparison.

Each row is one `train_agent` run with the library's defaults except `num_envs` (and what a row
names), a fixed budget of env steps, no evaluation until the end and no checkpoint until the
end. The rate is env steps / training seconds (evaluation excluded). One short run per device
comes first so that one-time costs (CUDA context, cuBLAS handles, first kernels) are not
charged to the first row.

    python benchmarks/training_throughput.py --device cuda                  # the GPU table
    python benchmarks/training_throughput.py --device cpu --threads 1 \
        --rows ppo:CartPole-v1:4096                                         # one CPU row
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
from machine import machine

from xiaoyarl import Config, train_agent
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.config_io import apply_overrides
from xiaoyarl.envs.registry import make_env

DEFAULT_ROWS = [
    "ppo:CartPole-v1:4096",
    "ppo:CartPole-v1:16384",
    "ppo:CartPole-v1:65536",
    "ppo:Pendulum-v1:4096",
    "ppo:Pendulum-v1:16384",
    "ppo:Pendulum-v1:65536",
    "sac:Pendulum-v1:1024",
]
ROLLOUTS = {"ppo": 40, "a2c": 40}  # rollouts per row; off-policy rows: OFF_POLICY_ROLLOUTS
OFF_POLICY_ROLLOUTS = 12


def parse_row(text: str) -> tuple[str, str, int, list[str]]:
    """`algo:env:num_envs[:key=value,...]` -> (algo, env, num_envs, overrides)."""
    parts = text.split(":")
    if len(parts) < 3:
        raise SystemExit(f"--rows takes algo:env:num_envs[:key=value,...], got '{text}'")
    overrides = parts[3].split(",") if len(parts) > 3 and parts[3] else []
    return parts[0], parts[1], int(parts[2]), overrides


def train(
    algo: str, env_id: str, num_envs: int, overrides: list[str], device: str, threads: int | None,
    rollouts: int, root: Path,
) -> dict:  # fmt: skip
    config = Config(
        algo=algo, env_id=env_id, backend="torch", device=device, num_envs=num_envs,
        threads=threads, target_return=1e12, eval_episodes=1, checkpoint_every=10**15,
        eval_every=10**15, cwd=str(root / f"{algo}_{env_id}_{num_envs}_{time.time_ns()}"),
    )  # fmt: skip
    apply_overrides(config, overrides)
    resolved = resolve_config(config, batched=True, device_type=torch.device(device).type)
    config.max_steps = rollouts * resolved.num_envs * resolved.horizon_len
    return train_agent(config, log=None)


def simulator_rate(env_id: str, num_envs: int, device: str, seconds: float = 1.0) -> float:
    """Random-action steps per second of the bare torch-native env `env_id` (a classic-control
    or MinAtar id; auto-reset included)."""
    env = make_env(env_id, num_envs, device=device, backend="torch", seed=0)
    env.reset()
    if env.spec.if_discrete:
        actions = torch.randint(0, env.spec.action_dim, (16, num_envs), device=device)
    else:
        actions = torch.rand((16, num_envs, env.spec.action_dim), device=device) * 2 - 1
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    for i in range(16):
        env.step(actions[i])
    sync()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for i in range(16):
            env.step(actions[i])
        sync()
        steps += 16
    return steps * num_envs / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--rows", nargs="+", default=DEFAULT_ROWS,
                        help="algo:env:num_envs[:key=value,...]")  # fmt: skip
    parser.add_argument("--rollouts", type=int, help="rollouts per row (default: 40 on-policy, "
                        f"{OFF_POLICY_ROLLOUTS} off-policy)")  # fmt: skip
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        train("ppo", "CartPole-v1", 64, [], args.device, args.threads, 2, root)  # warm-up
        for text in args.rows:
            algo, env_id, num_envs, overrides = parse_row(text)
            rollouts = args.rollouts or ROLLOUTS.get(algo, OFF_POLICY_ROLLOUTS)
            summary = train(
                algo, env_id, num_envs, overrides, args.device, args.threads, rollouts, root
            )
            sim = simulator_rate(env_id, num_envs, args.device)
            row = {
                "algo": algo, "env": env_id, "num_envs": num_envs, "overrides": overrides,
                "steps": summary["total_steps"], "train_sps": summary["steps_per_second"],
                "simulator_sps": sim, "updates": summary["updates"],
            }  # fmt: skip
            results.append(row)
            print(
                f"{algo:5s} {env_id:14s} N={num_envs:<6d} {' '.join(overrides):20s} "
                f"train {row['train_sps']:14,.0f} steps/s   simulator {sim:14,.0f} steps/s",
                flush=True,
            )

    print(f"\n{machine()}, device {args.device}, {time.strftime('%Y-%m-%d')}\n")
    print("| algorithm | env | num_envs | settings | env steps | train steps/s | "
          "simulator steps/s | train / simulator |")  # fmt: skip
    print("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: |")
    for r in results:
        print(
            f"| {r['algo']} | {r['env']} | {r['num_envs']:,} | {' '.join(r['overrides']) or '-'} "
            f"| {r['steps']:,} | {r['train_sps']:,.0f} | {r['simulator_sps']:,.0f} | "
            f"{r['train_sps'] / r['simulator_sps']:.1%} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine(), "rows": results}, indent=2))


if __name__ == "__main__":
    main()
