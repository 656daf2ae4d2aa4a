"""Train PPO on your own gymnasium environment.

The env below is a point on a line that must be pushed to the origin and held there. Register
it with gymnasium, then train it by id like any other env. From the command line the same
works with `xiaoyarl train ppo my_module:PointToOrigin-v0` when the class lives in my_module.

Run: python examples/custom_env.py [--max-steps N]
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

from xiaoyarl import Config, evaluate, train_agent


# --8<-- [start:env]
class PointToOrigin(gym.Env):
    """State (position, velocity); action: a force in [-1, 1]; reward: -|position|."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.pos, self.vel = self.np_random.uniform(-2, 2), 0.0
        return np.array([self.pos, self.vel], np.float32), {}

    def step(self, action):
        self.vel = 0.9 * self.vel + 0.1 * float(np.clip(action[0], -1, 1))
        self.pos += self.vel
        return np.array([self.pos, self.vel], np.float32), -abs(self.pos), False, False, {}


gym.register("PointToOrigin-v0", entry_point=PointToOrigin, max_episode_steps=100)
# --8<-- [end:env]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-steps", type=int, default=200_000)
    parser.add_argument("--cwd", default="runs/point_to_origin")
    args = parser.parse_args()
    config = Config(
        algo="ppo", env_id="PointToOrigin-v0", backend="gymnasium", num_envs=8,
        max_steps=args.max_steps, target_return=-15.0, cwd=args.cwd,
    )  # fmt: skip
    summary = train_agent(config)
    print("solved:", summary["solved"], "| evaluation:", evaluate(args.cwd, episodes=5)["mean"])


if __name__ == "__main__":
    main()
