"""Small envs of other action spaces for the tests (`module:Id` ids of this module)."""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces


class CopyDigits(gymnasium.Env):
    """Observe two digits (one-hot, in [0, 3) and [0, 2)), answer them with a MultiDiscrete
    action whose components start at 1 (so the adapter's offsets are tested): each right
    component earns 0.5. 10 steps an episode: random play returns about 4.2, copying 10."""

    observation_space = spaces.Box(0.0, 1.0, (5,), np.float32)
    action_space = spaces.MultiDiscrete([3, 2], start=[1, 1])

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self._draw()
        return self._obs(), {}

    def _draw(self):
        self.digits = (int(self.np_random.integers(3)), int(self.np_random.integers(2)))

    def _obs(self):
        obs = np.zeros(5, dtype=np.float32)
        obs[self.digits[0]] = obs[3 + self.digits[1]] = 1.0
        return obs

    def step(self, action):
        assert self.action_space.contains(action), action
        right = int(action[0] - 1 == self.digits[0]) + int(action[1] - 1 == self.digits[1])
        reward = 0.5 * right
        self._draw()
        return self._obs(), float(reward), False, False, {}


class CopyBits(CopyDigits):
    """The same with three bits and a MultiBinary action."""

    observation_space = spaces.Box(0.0, 1.0, (3,), np.float32)
    action_space = spaces.MultiBinary(3)

    def _draw(self):
        self.bits = self.np_random.integers(2, size=3)

    def _obs(self):
        return self.bits.astype(np.float32)

    def step(self, action):
        assert self.action_space.contains(action), action
        reward = float((np.asarray(action) == self.bits).sum()) / 3
        self._draw()
        return self._obs(), reward, False, False, {}


gymnasium.register("CopyDigits-v0", entry_point=CopyDigits, max_episode_steps=10,
                   reward_threshold=9.0)  # fmt: skip
gymnasium.register("CopyBits-v0", entry_point=CopyBits, max_episode_steps=10,
                   reward_threshold=9.0)  # fmt: skip


class PickAllowed(gymnasium.Env):
    """Four values in [0, 1) and the actions allowed this step (`info["action_mask"]`, a random
    non-empty subset): picking the allowed action of the largest value earns 1, another allowed
    one 0, and a masked one raises (the env is broken on purpose). 10 steps an episode: random
    allowed play returns about 5, the best 10.

    With `hide_mask` the masks are not shown (nor checked): a masked action earns 0, as a
    wrong allowed one, so an agent blind to the masks learns what it can without them."""

    observation_space = spaces.Box(0.0, 1.0, (4,), np.float32)
    action_space = spaces.Discrete(4)
    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, hide_mask: bool = False, render_mode: str | None = None) -> None:
        self.hide_mask, self.render_mode = hide_mask, render_mode

    def render(self):
        """The four values as bars, green where allowed, red where masked."""
        frame = np.zeros((40, 40, 3), dtype=np.uint8)
        for i, (value, allowed) in enumerate(zip(self.values, self.mask, strict=True)):
            frame[40 - int(36 * value) - 2 :, 10 * i + 2 : 10 * i + 8, 1 if allowed else 0] = 220
        return frame

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self._draw()

    def _draw(self):
        self.values = self.np_random.random(4).astype(np.float32)
        self.mask = self.np_random.random(4) < 0.5
        if not self.mask.any():
            self.mask[self.np_random.integers(4)] = True
        return self.values.copy(), {} if self.hide_mask else {"action_mask": self.mask.copy()}

    def step(self, action):
        action = int(action)
        if not self.mask[action] and not self.hide_mask:
            raise AssertionError(f"masked action {action} taken; allowed {self.mask.tolist()}")
        best = np.flatnonzero(self.mask)[np.argmax(self.values[self.mask])]
        reward = float(action == best)
        obs, info = self._draw()
        return obs, reward, False, False, info


gymnasium.register("PickAllowed-v0", entry_point=PickAllowed, max_episode_steps=10,
                   reward_threshold=9.0)  # fmt: skip


class Kick(gymnasium.Env):
    """A parameterised-action task with Platform's action layout, a kind of kick and each kind's
    own parameter: `Tuple(Discrete(3), Tuple(Box(1), Box(1), Box(1)))`. Each step a target is
    seen at an angle in [-0.9, 0.9] and a distance in [0, 1); the kick that reaches that far (a
    pass below 1/3, a drive below 2/3, a lob beyond), aimed by its own parameter, earns
    1 - |aim - angle| (at least 0), another kick 0. 10 steps an episode: random play returns
    about 1.3, the right kicks aimed at random 4, the best 10."""

    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = spaces.Tuple((spaces.Discrete(3), spaces.Tuple(
        [spaces.Box(-1.0, 1.0, (1,), np.float32) for _ in range(3)])))  # fmt: skip
    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode

    def render(self):
        """The target, its angle across and its distance up."""
        frame = np.zeros((40, 40, 3), dtype=np.uint8)
        col, row = int(19.5 * (self.angle + 1)), int(39 * (1 - self.distance))
        frame[max(0, row - 2) : row + 3, max(0, col - 2) : col + 3] = 220
        return frame

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self._draw(), {}

    def _draw(self):
        self.angle = float(self.np_random.uniform(-0.9, 0.9))
        self.distance = float(self.np_random.random())
        return np.array([self.angle, self.distance], dtype=np.float32)

    def _kick_and_aim(self, action):
        kick, aims = action
        return int(kick), float(aims[int(kick)][0])

    def step(self, action):
        assert self.action_space.contains(action), action
        kick, aim = self._kick_and_aim(action)
        right = kick == min(2, int(3 * self.distance))
        reward = max(0.0, 1.0 - abs(aim - self.angle)) if right else 0.0
        return self._draw(), reward, False, False, {}


class KickDict(Kick):
    """The same with a Dict action, its kinds numbered from 1: `{"kick": Discrete(3, start=1),
    "aim": Box(-1, 1, (3,))}`."""

    action_space = spaces.Dict({"kick": spaces.Discrete(3, start=1),
                                "aim": spaces.Box(-1.0, 1.0, (3,), np.float32)})  # fmt: skip

    def _kick_and_aim(self, action):
        kick = int(action["kick"]) - 1
        return kick, float(action["aim"][kick])


gymnasium.register("Kick-v0", entry_point=Kick, max_episode_steps=10, reward_threshold=9.0)
gymnasium.register("KickDict-v0", entry_point=KickDict, max_episode_steps=10,
                   reward_threshold=9.0)  # fmt: skip
