"""Atari training steps per second: xiaoyarl against Stable-Baselines3, same game, same
preprocessing, same network, same amount of learning per env step, 1 torch thread each.

- Game: `PongNoFrameskip-v4` (no sticky actions), the standard preprocessing on both sides
  (30 no-op starts, frame skip 4 with max-pooling, 84x84 grayscale, 4 stacked frames, FIRE at
  reset, episodic lives and clipped rewards for training): xiaoyarl's from gymnasium's wrappers
  (`xiaoyarl/envs/atari.py`), SB3's `make_atari_env` + `VecFrameStack(4)`.
- Network: the Nature CNN (Mnih et al. 2015) on both sides, 512 features and linear output
  layers on them (`net_dims=[]`, SB3's CNN policies' layout), one CNN shared by actor and
  critic for PPO.
- PPO: 8 sub-envs x 128 steps, 4 epochs of mini-batches of 256 (the RL Zoo's Atari PPO).
- DQN: 1 sub-env, one gradient step of 32 every 4 env steps, replay of 100,000, learning from
  step 1,000 on (the zoo's Atari DQN with an early start, so the timing is of learning).

Each run is a fresh process; steps per second count the training loop only (xiaoyarl: its
training seconds without evaluation; SB3: `learn`), not the library's start-up. Runs
alternate between the libraries.

Usage: python benchmarks/atari_throughput.py [--steps 20480] [--repeats 1] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import machine

GAME = "PongNoFrameskip-v4"
XIAOYARL = {
    "ppo": ["--num-envs", "8", "--set", "net_dims=[]", "--set", "horizon_len=128",
            "--set", "batch_size=256", "--set", "repeat_times=4"],
    "dqn": ["--num-envs", "1", "--set", "net_dims=[]", "--set", "batch_size=32",
            "--set", "replay_ratio=0.25", "--set", "buffer_size=100000",
            "--set", "learning_starts=1000", "--set", "target_update_every=1000"],
}  # fmt: skip


def run_xiaoyarl(algo: str, steps: int) -> float:
    folder = Path(tempfile.mkdtemp(prefix="xiaoyarl-atari-"))
    command = [sys.executable, "-m", "xiaoyarl", "train", algo, GAME, "--seed", "0",
               "--threads", "1", "--max-steps", str(steps), "--eval-every", str(10 * steps),
               "--set", "eval_episodes=1", "--set", "confirm_episodes=0", "--quiet",
               "--cwd", str(folder / "run"), "--summary-json", str(folder / "summary.json"),
               *XIAOYARL[algo]]  # fmt: skip
    subprocess.run(command, check=True)
    summary = json.loads((folder / "summary.json").read_text())
    return summary["total_steps"] / (summary["train_seconds"] - summary["eval_seconds"])


def sb3_child(algo: str, steps: int) -> None:
    """In a fresh process: SB3's `learn` over `steps` env steps; prints steps per second."""
    import ale_py
    import gymnasium
    import torch
    from stable_baselines3 import DQN, PPO
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    torch.set_num_threads(1)
    gymnasium.register_envs(ale_py)  # the Atari ids
    if algo == "ppo":
        env = VecFrameStack(make_atari_env(GAME, n_envs=8, seed=0), n_stack=4)
        model = PPO("CnnPolicy", env, n_steps=128, n_epochs=4, batch_size=256,
                    learning_rate=2.5e-4, clip_range=0.1, ent_coef=0.01, seed=0,
                    device="cpu")  # fmt: skip
    else:
        env = VecFrameStack(make_atari_env(GAME, n_envs=1, seed=0), n_stack=4)
        model = DQN("CnnPolicy", env, buffer_size=100_000, learning_starts=1000, batch_size=32,
                    train_freq=4, gradient_steps=1, target_update_interval=1000, seed=0,
                    optimize_memory_usage=False, device="cpu")  # fmt: skip
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    print(json.dumps({"sps": model.num_timesteps / (time.perf_counter() - start)}))


def run_sb3(algo: str, steps: int) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, __file__, "--child", algo, "--steps", str(steps)],
                         check=True, capture_output=True, text=True, env=env)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])["sps"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_480)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--algos", nargs="+", default=["ppo", "dqn"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.child:
        sb3_child(args.child, args.steps)
        return
    results = []
    for algo in args.algos:
        for repeat in range(args.repeats):
            for library, run in (("xiaoyarl", run_xiaoyarl), ("sb3", run_sb3)):
                sps = run(algo, args.steps)
                results.append({"algo": algo, "library": library, "repeat": repeat,
                                "steps_per_second": round(sps, 1)})  # fmt: skip
                print(json.dumps(results[-1]), flush=True)
    print("| algo | xiaoyarl steps/s | Stable-Baselines3 steps/s | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for algo in args.algos:
        mine = [r["steps_per_second"] for r in results if r["algo"] == algo
                and r["library"] == "xiaoyarl"]  # fmt: skip
        theirs = [r["steps_per_second"] for r in results if r["algo"] == algo
                  and r["library"] == "sb3"]  # fmt: skip
        a, b = sum(mine) / len(mine), sum(theirs) / len(theirs)
        print(f"| {algo} | {a:,.0f} | {b:,.0f} | {a / b:.2f}x |")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "game": GAME, "steps": args.steps,
                                         "runs": results}, indent=1) + "\n")  # fmt: skip


if __name__ == "__main__":
    main()
