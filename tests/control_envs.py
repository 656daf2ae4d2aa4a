"""Small continuous-control envs for the learning checks of SAC with Dict and image observations
(`module:Id` ids of this module): a goal-conditioned reaching task and one seen as pixels."""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces

POINT = spaces.Box(-1.0, 1.0, (2,), np.float32)
METADATA = {"render_modes": ["rgb_array"], "render_fps": 10}  # `xiaoyarl record` films them


def picture(*points: tuple[np.ndarray, int]) -> np.ndarray:
    """A 64x64 RGB frame of the square [-1, 1]^2 with each (point, colour channel) lit."""
    frame = np.full((64, 64, 3), 30, dtype=np.uint8)
    for point, channel in points:
        col, row = np.clip(((point + 1) * 32).astype(int), 3, 60)
        frame[row - 3 : row + 4, col - 3 : col + 4, channel] = 240
    return frame


class Reach(gymnasium.Env):
    """Move a point in the square [-1, 1]^2 to a goal drawn anew each episode, as a
    goal-conditioned robotics task (gymnasium-robotics' keys): the observation is a dict of
    `observation` (the point), `achieved_goal` (the point again) and `desired_goal`; the action
    moves the point by at most 0.1 on each axis; the reward is minus the distance to the goal.
    50 steps an episode: heading for the centre, which needs no goal, returns about -38 (a random
    policy -54), heading for the goal about -5."""

    observation_space = spaces.Dict({"observation": POINT, "achieved_goal": POINT,
                                     "desired_goal": POINT})  # fmt: skip
    action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    metadata = METADATA

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.point = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.goal = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        return self._obs(), {}

    def render(self):
        """The point (green) and the goal (red)."""
        return picture((self.point, 1), (self.goal, 0))

    def _obs(self):
        return {"observation": self.point.copy(), "achieved_goal": self.point.copy(),
                "desired_goal": self.goal.copy()}  # fmt: skip

    def step(self, action):
        move = np.clip(np.asarray(action, np.float32), -1, 1) * 0.1
        self.point = np.clip(self.point + move, -1, 1).astype(np.float32)
        reward = -float(np.linalg.norm(self.point - self.goal))
        return self._obs(), reward, False, False, {}


class PixelReach(gymnasium.Env):
    """Move a point in the square [-1, 1]^2 to its centre, seen only as an 8x8 RGB image (H, W,
    C) uint8 with the point's cell lit; the action moves it by at most 0.2 on each axis; the
    reward is minus its distance to the centre. 20 steps an episode from a random start: a
    policy that does not read the image returns about -15 (standing still), one that knows
    where the point is about -1."""

    observation_space = spaces.Box(0, 255, (8, 8, 3), np.uint8)
    action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    metadata = METADATA

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.point = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        return self._obs(), {}

    def render(self):
        """The point (green) and the centre (red)."""
        return picture((self.point, 1), (np.zeros(2, np.float32), 0))

    def _obs(self):
        image = np.full((8, 8, 3), 20, dtype=np.uint8)
        col, row = np.minimum(((self.point + 1) * 4).astype(int), 7)
        image[row, col] = 230
        return image

    def step(self, action):
        move = np.clip(np.asarray(action, np.float32), -1, 1) * 0.2
        self.point = np.clip(self.point + move, -1, 1).astype(np.float32)
        reward = -float(np.linalg.norm(self.point))
        return self._obs(), reward, False, False, {}


gymnasium.register("Reach-v0", entry_point=Reach, max_episode_steps=50)
gymnasium.register("PixelReach-v0", entry_point=PixelReach, max_episode_steps=20)
