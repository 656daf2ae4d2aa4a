"""A small env of each kind the support matrix names (`xiaoyarl/agents/matrix.py`), for the
matrix's test: `Probe-v0` with env_kwargs `observation` ("vector", "image", "Dict", "Tuple"),
`action` ("Discrete", "Box", "MultiDiscrete", "MultiBinary", "hybrid") and `masked`."""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces

ACTION_SPACES = {
    "Discrete": spaces.Discrete(3),
    "Box": spaces.Box(-1.0, 1.0, (2,), np.float32),
    "MultiDiscrete": spaces.MultiDiscrete([3, 2]),
    "MultiBinary": spaces.MultiBinary(3),
    "hybrid": spaces.Dict(
        {"choice": spaces.Discrete(3), "value": spaces.Box(-1.0, 1.0, (2,), np.float32)}
    ),
}
IMAGE = spaces.Box(0, 255, (8, 8, 3), np.uint8)


class Probe(gymnasium.Env):
    """Each step shows a bit b (drawn anew): the first of 4 values (vector), the brightness of
    an 8x8 RGB image (image), or both, under the keys `position` (2 values) and `image` (Dict)
    or as the tuple (image, position) (Tuple).
    The reward is 1 where the action's first component says b (an index or bit equal to b, or
    a continuous value of b's sign, +1 for 1; a hybrid action's choice), else 0; 10 steps an
    episode. With `masked`
    (Discrete actions) `info["action_mask"]` allows a random non-empty subset of the actions,
    and taking another raises (the agent did not honour the mask)."""

    def __init__(self, observation: str = "vector", action: str = "Discrete",
                 masked: bool = False) -> None:  # fmt: skip
        self.kind, self.masked = observation, masked
        self.action_space = ACTION_SPACES[action]
        self.observation_space = {
            "vector": spaces.Box(-1.0, 1.0, (4,), np.float32),
            "image": IMAGE,
            "Dict": spaces.Dict({"position": spaces.Box(-1.0, 1.0, (2,), np.float32),
                                 "image": IMAGE}),
            "Tuple": spaces.Tuple((IMAGE, spaces.Box(-1.0, 1.0, (2,), np.float32))),
        }[observation]  # fmt: skip

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self._draw()

    def _draw(self):
        self.bit = int(self.np_random.integers(2))
        vector = np.array([2.0 * self.bit - 1, 0.0, 0.0, 0.0], np.float32)
        image = np.full(IMAGE.shape, 30 + 200 * self.bit, np.uint8)
        obs = {"vector": vector, "image": image,
               "Dict": {"position": vector[:2], "image": image},
               "Tuple": (image, vector[:2])}[self.kind]  # fmt: skip
        info = {}
        if self.masked:
            self.mask = self.np_random.random(3) < 0.6
            self.mask[self.np_random.integers(3)] = True
            info["action_mask"] = self.mask.copy()
        return obs, info

    def step(self, action):
        assert self.action_space.contains(action), action
        first = action["choice"] if isinstance(action, dict) else np.asarray(action).reshape(-1)[0]
        if self.masked and not self.mask[int(first)]:
            raise AssertionError(f"masked action {first} taken; allowed {self.mask.tolist()}")
        said = (first > 0) if isinstance(self.action_space, spaces.Box) else int(first)
        reward = float(int(said) == self.bit)
        obs, info = self._draw()
        return obs, reward, False, False, info


gymnasium.register("Probe-v0", entry_point=Probe, max_episode_steps=10)
