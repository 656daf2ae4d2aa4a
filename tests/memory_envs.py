"""A multi-agent task that only agents with memory solve (PettingZoo parallel API; load it as
`memory_envs:make_recall`).

Recall: each of two agents is shown a cue of its own, 0 or 1, at the first step only; at the
last of `steps` steps each is paid 1 for naming its cue (its action), nothing otherwise. An
agent's observation is `[cue if first step else 0, first step, last step]`, so at the last step
a feed-forward policy sees the same thing whatever its cue was and names it half the time (a
team return of 1 in expectation); agents that remember their cue score 2. With
`continuous=True` an agent's action is a number in [-1, 1] and it is paid
`1 - |action - target| / 2` at the last step, the target -1 for cue 0 and 1 for cue 1 (a
feed-forward policy's best is 0: again 1 for the team, against 2). The global state
(`state()`) holds both cues and the time, as a centralized critic may know them.
"""

from __future__ import annotations

import numpy as np
import pettingzoo
from gymnasium import spaces


class RecallEnv(pettingzoo.ParallelEnv):
    """Recall (see the module)."""

    metadata = {"name": "recall"}

    def __init__(self, steps: int = 4, continuous: bool = False) -> None:
        self.possible_agents = ["agent_0", "agent_1"]
        self.steps = steps
        self.continuous = continuous
        self.rng = np.random.default_rng()

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Box(0.0, 1.0, (3,), np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Box(-1.0, 1.0, (1,), np.float32) if self.continuous else spaces.Discrete(2)

    def _paid(self, action: np.ndarray | int, cue: float) -> float:
        """What an agent's action at the last step earns."""
        if self.continuous:
            return 1.0 - abs(float(np.asarray(action).reshape(-1)[0]) - (2 * cue - 1)) / 2
        return float(int(action) == int(cue))

    def state(self) -> np.ndarray:
        return np.array([*self.cues, self.t / self.steps], np.float32)

    def _obs(self) -> dict:
        first, last = float(self.t == 0), float(self.t == self.steps - 1)
        return {agent: np.array([cue * first, first, last], np.float32)
                for agent, cue in zip(self.possible_agents, self.cues, strict=True)}  # fmt: skip

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.cues = self.rng.integers(0, 2, len(self.agents)).astype(np.float32)
        self.t = 0
        return self._obs(), {agent: {} for agent in self.agents}

    def step(self, actions: dict) -> tuple:
        last = self.t == self.steps - 1
        rewards = {agent: self._paid(actions[agent], cue) if last else 0.0
                   for agent, cue in zip(self.possible_agents, self.cues, strict=True)}  # fmt: skip
        self.t += 1
        ended = {agent: bool(last) for agent in self.agents}
        truncated = {agent: False for agent in self.agents}
        obs = self._obs() if not last else {agent: np.zeros(3, np.float32) for agent in self.agents}
        infos = {agent: {} for agent in self.agents}
        if last:
            self.agents = []
        return obs, rewards, ended, truncated, infos


def make_recall(**kwargs) -> RecallEnv:
    return RecallEnv(**kwargs)
