"""Small image envs and a user encoder for the pixel tests (`module:Id` ids of this module)."""

from __future__ import annotations

import gymnasium
import numpy as np
import torch
from gymnasium import spaces
from torch import nn


class BrightSide(gymnasium.Env):
    """An 8x8 RGB image (H, W, C) uint8 lit on its left or right half, drawn anew each step;
    action 0 (left) or 1 (right) earns 1 where it names the lit half. 10 steps an episode:
    a random policy returns 5, one that reads the image 10."""

    observation_space = spaces.Box(0, 255, (8, 8, 3), np.uint8)
    action_space = spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.side = int(self.np_random.integers(2))
        return self._obs(), {}

    def _obs(self):
        obs = np.full((8, 8, 3), 20, dtype=np.uint8)
        obs[:, 4 * self.side : 4 * self.side + 4, :] = 230
        return obs

    def step(self, action):
        reward = float(int(action) == self.side)
        self.side = int(self.np_random.integers(2))
        return self._obs(), reward, False, False, {}


gymnasium.register("BrightSide-v0", entry_point=BrightSide, max_episode_steps=10,
                   reward_threshold=9.0)  # fmt: skip


class TinyEncoder(nn.Module):
    """A user's encoder: mean of each channel of a (H, W, C) image, then a linear layer."""

    def __init__(self, obs_shape: tuple[int, ...]) -> None:
        super().__init__()
        self.out_dim = 8
        self.linear = nn.Linear(obs_shape[-1], self.out_dim)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(obs.mean(dim=(1, 2))))


class NoWidth(nn.Module):
    """An encoder that forgets to say how wide its features are."""

    def __init__(self, obs_shape: tuple[int, ...]) -> None:
        super().__init__()

        self.linear = nn.Linear(obs_shape[-1], 4)


class BrightSideDict(BrightSide):
    """BrightSide as a Dict observation: the image, a `cue` vector (1,) that swaps the answer
    when 1, a `steps` Discrete(10) (the step in the episode) and a `mission` text, which
    xiaoyarl cannot read (`env_kwargs: {obs_keys: [...]}` leaves it out). The right action is
    the lit side, or the other one under the cue: a policy must read the image and the cue."""

    observation_space = spaces.Dict({
        "image": spaces.Box(0, 255, (8, 8, 3), np.uint8),
        "cue": spaces.Box(0.0, 1.0, (1,), np.float32),
        "steps": spaces.Discrete(10),
        "mission": spaces.Text(32),
    })  # fmt: skip

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.cue = int(self.np_random.integers(2))
        return self._dict(), {}

    def _dict(self):
        return {"image": self._obs(), "cue": np.array([self.cue], dtype=np.float32),
                "steps": min(self.t, 9), "mission": "findthelight"}  # fmt: skip

    def step(self, action):
        reward = float(int(action) == (self.side ^ self.cue))
        self.side = int(self.np_random.integers(2))
        self.cue = int(self.np_random.integers(2))
        self.t += 1
        return self._dict(), reward, False, False, {}


gymnasium.register("BrightSideDict-v0", entry_point=BrightSideDict, max_episode_steps=10,
                   reward_threshold=9.0)  # fmt: skip
