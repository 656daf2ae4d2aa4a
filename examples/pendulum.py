"""Swing up Pendulum-v1 with PPO on torch-native envs, then run the saved policy.

Shows how to change hyper-parameters (any `Config` field) and how to use a trained policy
on plain numpy observations, outside xiaoyarl.

Run: python examples/pendulum.py [--max-steps N]
"""

from __future__ import annotations

import argparse

import gymnasium as gym

from xiaoyarl import Config, load_policy, train_agent
from xiaoyarl.config_io import set_field


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-steps", type=int, default=5_000_000)
    parser.add_argument("--cwd", default="runs/pendulum_ppo")
    args = parser.parse_args()

    config = Config(algo="ppo", env_id="Pendulum-v1", max_steps=args.max_steps, cwd=args.cwd)
    set_field(config, "net_dims", "[64, 64]")  # the same syntax as `--set net_dims=[64,64]`
    summary = train_agent(config)
    print(f"solved={summary['solved']} in {summary['train_seconds']:.1f} s")

    # The saved policy takes raw observations and returns torques in the env's own units.
    policy = load_policy(args.cwd)
    env = gym.make("Pendulum-v1")
    obs, _ = env.reset(seed=0)
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(policy(obs))
        total += float(reward)
        done = terminated or truncated
    print(f"one gymnasium episode with the trained policy: return {total:.1f}")


if __name__ == "__main__":
    main()
