"""`PettingZooVecEnv` on mpe2's `simple_spread_v3` and on tiny hand-written parallel envs.

The tiny envs have what mpe2 lacks: agents with observations of different sizes (padding),
different numbers of actions, action masks (in a dict observation and in the infos), an agent
that finishes before the other, no `state()`, and a Box action space with uneven bounds.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

pettingzoo = pytest.importorskip(
    "pettingzoo", reason="needs pettingzoo (pip install -e '.[multi]')"
)
from gymnasium import spaces  # noqa: E402

from xiaoyarl.envs.multi import SpreadContinuousEnv, SpreadDiscreteEnv  # noqa: E402
from xiaoyarl.envs.multi.pettingzoo import PettingZooVecEnv  # noqa: E402
from xiaoyarl.errors import EnvError  # noqa: E402

THIS = __name__  # the id of a callable in this module is f"{THIS}:name"


class TinyMaskedEnv(pettingzoo.ParallelEnv):
    """Agent "a": 3 observation numbers in a dict with an action mask, 3 actions, ends after
    `a_steps` steps. Agent "b": 2 numbers, 2 actions, mask in its info, ends after 2 steps."""

    metadata = {"name": "tiny_masked"}

    def __init__(self, a_steps: int = 4) -> None:
        self.possible_agents = ["a", "b"]
        self.a_steps = a_steps
        self.received: list[dict] = []

    def observation_space(self, agent: str) -> spaces.Space:
        if agent == "a":
            return spaces.Dict(
                {
                    "observation": spaces.Box(-np.inf, np.inf, (3,), np.float32),
                    "action_mask": spaces.Box(0, 1, (3,), np.int8),
                }
            )
        return spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(3 if agent == "a" else 2)

    def _obs(self) -> tuple[dict, dict]:
        t = self.t
        obs, infos = {}, {}
        if "a" in self.agents:  # a may take 0 and 1 on even steps, 1 and 2 on odd ones
            mask = np.array([1, 1, 0] if t % 2 == 0 else [0, 1, 1], dtype=np.int8)
            obs["a"] = {
                "observation": np.array([t, 1.0, self.noise], np.float32),
                "action_mask": mask,
            }
            infos["a"] = {}
        if "b" in self.agents:
            obs["b"] = np.array([t, 2.0], np.float32)
            infos["b"] = {"action_mask": np.array([0, 1], dtype=np.int8)}  # only action 1
        return obs, infos

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.rng = np.random.default_rng(seed)
        self.noise = float(self.rng.uniform())
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._obs()

    def step(self, actions: dict) -> tuple:
        self.received.append(dict(actions))
        self.t += 1
        rewards = {agent: (1.0 if agent == "a" else 10.0) + actions[agent] for agent in self.agents}
        ends = {"a": self.t >= self.a_steps, "b": self.t >= 2}
        terminations = {agent: ends[agent] for agent in self.agents}
        truncations = {agent: False for agent in self.agents}
        obs, infos = self._obs()
        self.agents = [agent for agent in self.agents if not ends[agent]]
        return obs, rewards, terminations, truncations, infos


class TinyBoxEnv(pettingzoo.ParallelEnv):
    """Two agents with Box actions of different bounds and sizes; a state(); never ends."""

    metadata = {"name": "tiny_box"}

    def __init__(self) -> None:
        self.possible_agents = ["x", "y"]
        self.received: list[dict] = []
        self._spaces = {
            "x": spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 10.0], np.float32)),
            "y": spaces.Box(0.0, 1.0, (1,), np.float32),
        }

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Box(-np.inf, np.inf, (1,), np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        return self._spaces[agent]

    def state(self) -> np.ndarray:
        return np.array([self.t, -self.t, 0.5], np.float32)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.agents, self.t = list(self.possible_agents), 0
        return {agent: np.zeros(1, np.float32) for agent in self.agents}, {}

    def step(self, actions: dict) -> tuple:
        self.received.append({k: np.array(v) for k, v in actions.items()})
        self.t += 1
        obs = {agent: np.full(1, self.t, np.float32) for agent in self.agents}
        zeros = {agent: 0.0 for agent in self.agents}
        flags = {agent: False for agent in self.agents}
        return obs, zeros, flags, dict(flags), {agent: {} for agent in self.agents}


class TinyMultiDiscreteEnv(TinyBoxEnv):
    def action_space(self, agent: str) -> spaces.Space:
        return spaces.MultiDiscrete([2, 2])


def make_masked(**kwargs) -> TinyMaskedEnv:
    return TinyMaskedEnv(**kwargs)


def make_not_an_env() -> object:
    return object()


# --- the tiny envs ------------------------------------------------------------------------------
def test_padding_masks_and_agents_that_finish_early() -> None:
    env = PettingZooVecEnv(f"{THIS}:make_masked", 2, seed=0, env_kwargs={"a_steps": 4})
    spec = env.spec
    assert (spec.num_agents, spec.obs_dim, spec.action_dim) == (2, 3, 3)
    assert spec.has_action_mask and spec.if_discrete and spec.agent_names == ("a", "b")
    assert spec.state_dim == 2 * 3  # no state(): the padded observations side by side
    assert spec.max_step == 1000 and spec.name == "tiny_masked"

    obs, info = env.reset()
    assert obs.shape == (2, 2, 3) and obs[0, 1, 2] == 0.0  # b's observation padded with a zero
    assert obs[0, 1, :2].tolist() == [0.0, 2.0] and obs[0, 0, :2].tolist() == [0.0, 1.0]
    torch.testing.assert_close(info["state"], obs.flatten(1))
    avail = info["avail_actions"]
    assert avail.shape == (2, 2, 3) and avail.dtype == torch.bool
    assert avail[0, 0].tolist() == [True, True, False]  # a's mask from its dict observation
    assert avail[0, 1].tolist() == [False, True, False]  # b's from its info; b has 2 actions

    with pytest.raises(EnvError, match=r"agent 0 \(a\) chose action 2, which is unavailable"):
        env.step(torch.tensor([[2, 1], [0, 1]]))
    with pytest.raises(EnvError, match=r"agent 1 \(b\) chose action 0, which is unavailable"):
        env.step(torch.tensor([[1, 1], [0, 0]]))

    # step 1: both play (a: 0 and 1 allowed)
    obs, rewards, terminated, truncated, info = env.step(torch.tensor([[0, 1], [1, 1]]))
    assert env.envs[0].received[-1] == {"a": 0, "b": 1} and env.envs[1].received[-1] == {
        "a": 1,
        "b": 1,
    }
    assert rewards.tolist() == [[1.0, 11.0], [2.0, 11.0]]
    assert info["avail_actions"][0, 0].tolist() == [False, True, True]  # odd step
    # step 2: b finishes; its last observation is returned, then it is out of the episode
    obs, rewards, terminated, truncated, info = env.step(torch.tensor([[2, 1], [1, 1]]))
    assert not (terminated | truncated).any()
    assert obs[0, 1, :2].tolist() == [2.0, 2.0] and rewards[0].tolist() == [3.0, 11.0]
    # step 3: b's action is ignored (even a masked one); b gets zeros
    obs, rewards, terminated, truncated, info = env.step(torch.tensor([[0, 0], [1, 0]]))
    assert env.envs[0].received[-1] == {"a": 0}
    assert obs[:, 1].abs().sum() == 0 and rewards[:, 1].abs().sum() == 0
    assert info["avail_actions"][:, 1].all()  # all-available for the finished agent
    assert not (terminated | truncated).any()
    # step 4: a finishes too: the sub-env's episode terminates and auto-resets
    obs, rewards, terminated, truncated, info = env.step(torch.tensor([[2, 0], [1, 0]]))
    assert terminated.all() and not truncated.any()
    assert info["final_obs"][:, 0, 0].tolist() == [4.0, 4.0]  # a's last observation
    assert info["final_obs"][:, 1].abs().sum() == 0
    assert obs[:, 0, 0].tolist() == [0.0, 0.0] and obs[:, 1, 1].tolist() == [2.0, 2.0]  # reset
    assert info["avail_actions"][:, 1].tolist() == [[False, True, False]] * 2
    torch.testing.assert_close(info["final_state"], info["final_obs"].flatten(1))


def test_time_limit_and_seeding() -> None:
    env = PettingZooVecEnv(
        f"{THIS}:make_masked", 3, env_kwargs={"a_steps": 9, "max_episode_steps": 3}
    )
    assert env.spec.max_step == 3
    obs, _ = env.reset(seed=7)
    noise = obs[:, 0, 2]
    expected = [np.random.default_rng(7 + i).uniform() for i in range(3)]  # sub-env i: seed + i
    torch.testing.assert_close(noise, torch.tensor(expected, dtype=torch.float32))
    flags = []
    for t in range(3):
        actions = torch.tensor([[t % 2, 1]] * 3)
        obs, _, terminated, truncated, _ = env.step(actions)
        flags.append((terminated.any().item(), truncated.all().item()))
    assert flags == [(False, False), (False, False), (False, True)]  # cut by the adapter's limit
    assert not torch.equal(obs[:, 0, 2], noise)  # auto-resets continue each generator
    again, _ = env.reset(seed=7)
    torch.testing.assert_close(again[:, 0, 2], noise)


def test_box_actions_are_rescaled_and_state_is_used() -> None:
    env = PettingZooVecEnv(f"{THIS}:TinyBoxEnv", 2)
    spec = env.spec
    assert not spec.if_discrete and spec.action_dim == 2 and not spec.has_action_mask
    assert spec.action_low is None  # the agents' bounds differ
    assert spec.state_dim == 3
    obs, info = env.reset(seed=0)
    actions = torch.tensor([[[-1.0, 1.0], [0.0, 0.3]], [[3.0, -5.0], [1.0, 1.0]]])
    _, _, _, _, info = env.step(actions)
    got = env.envs[0].received[-1]
    np.testing.assert_allclose(got["x"], [-2.0, 10.0])
    np.testing.assert_allclose(got["y"], [0.5])  # y uses the first entry only
    got = env.envs[1].received[-1]
    np.testing.assert_allclose(got["x"], [2.0, 0.0])  # clipped to [-1, 1] first
    assert got["x"].dtype == np.float32 and got["x"].shape == (2,)
    assert info["state"].tolist() == [[1.0, -1.0, 0.5]] * 2
    with pytest.raises(EnvError, match="floats"):
        env.step(torch.zeros((2, 2, 2), dtype=torch.int64))


def test_clear_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(EnvError, match=r"pip install -e '\.\[multi\]'"):
        monkeypatch.setitem(sys.modules, "mpe2", None)  # as if mpe2 were not installed
        PettingZooVecEnv("mpe2:simple_spread_v3")
    monkeypatch.undo()
    with pytest.raises(EnvError, match="module 'no_such_module_xyz' is not installed"):
        PettingZooVecEnv("no_such_module_xyz:env")
    with pytest.raises(EnvError, match="has no attribute 'nope'"):
        PettingZooVecEnv(f"{THIS}:nope")
    with pytest.raises(EnvError, match="Discrete action space, or every agent a Box"):
        PettingZooVecEnv(f"{THIS}:TinyMultiDiscreteEnv")
    with pytest.raises(EnvError, match="env_kwargs"):
        PettingZooVecEnv(f"{THIS}:make_masked", env_kwargs={"colour": 1})
    with pytest.raises(EnvError, match="not a PettingZoo parallel env"):
        PettingZooVecEnv(f"{THIS}:make_not_an_env")
    pytest.importorskip("mpe2")
    with pytest.raises(EnvError, match="AEC"):
        PettingZooVecEnv("mpe2.simple_spread_v3:env")
    env = PettingZooVecEnv("mpe2:simple_spread_v3")
    with pytest.raises(EnvError, match="reset"):
        env.step(torch.zeros((1, 3), dtype=torch.int64))
    env.close()
    env.close()
    with pytest.raises(EnvError, match="closed"):
        env.reset()


# --- mpe2 ---------------------------------------------------------------------------------------
def _world_state(penv) -> np.ndarray:
    world = penv.unwrapped.world
    agents = [a.state.p_pos for a in world.agents] + [a.state.p_vel for a in world.agents]
    return np.concatenate(agents + [lm.state.p_pos for lm in world.landmarks])


def test_mpe2_spread_shapes_episodes_and_seeding() -> None:
    mpe2 = pytest.importorskip("mpe2")
    n = 4
    env = PettingZooVecEnv("mpe2:simple_spread_v3", n, seed=3)
    spec = env.spec
    assert (spec.num_agents, spec.obs_dim, spec.state_dim, spec.action_dim) == (3, 18, 54, 5)
    assert spec.max_step == 25 and spec.if_discrete and not spec.has_action_mask
    obs, info = env.reset()
    reference = mpe2.simple_spread_v3.parallel_env()
    ref_obs, _ = reference.reset(seed=3 + 2)  # sub-env 2 is seeded with seed + 2
    assert torch.equal(obs[2], torch.tensor(np.stack([ref_obs[a] for a in reference.agents])))
    assert torch.equal(info["state"][2], torch.tensor(reference.state()))
    assert obs.dtype == torch.float32 and info["state"].shape == (n, 54)

    gen = torch.Generator().manual_seed(0)
    for t in range(1, 26):
        obs, rewards, terminated, truncated, info = env.step(
            torch.randint(0, 5, (n, 3), generator=gen)
        )
        assert rewards.shape == (n, 3) and rewards.dtype == torch.float32
        assert not terminated.any()
        if t < 25:
            assert not truncated.any() and torch.equal(info["final_obs"], obs)
            assert torch.equal(info["final_state"], info["state"])
        else:
            assert truncated.all()  # the 25-step time limit
            assert not torch.equal(info["final_obs"], obs)
            fresh = [
                np.stack([e.unwrapped.observe(a) for a in e.possible_agents]) for e in env.envs
            ]
            assert torch.equal(obs, torch.tensor(np.stack(fresh)))  # the next episodes' start
            assert torch.equal(info["final_state"][:, :18], info["final_obs"][:, 0])
    assert all(e.agents for e in env.envs)  # every sub-env is playing again


@pytest.mark.parametrize("continuous", [False, True])
def test_mpe2_through_the_adapter_equals_the_torch_spread(continuous: bool) -> None:
    pytest.importorskip("mpe2")
    n = 6
    adapter = PettingZooVecEnv(
        "mpe2:simple_spread_v3", n, seed=10, env_kwargs={"continuous_actions": continuous}
    )
    torch_env = (SpreadContinuousEnv if continuous else SpreadDiscreteEnv)(n, seed=0)
    assert adapter.spec.action_dim == torch_env.spec.action_dim
    assert adapter.spec.action_low == torch_env.spec.action_low
    obs, _ = adapter.reset()
    torch_env.set_sim_state(torch.tensor(np.stack([_world_state(e) for e in adapter.envs])))
    torch.testing.assert_close(torch_env._observe(torch_env.sim_state), obs, atol=1e-6, rtol=0)
    gen = torch.Generator().manual_seed(2)
    for t in range(25):
        if continuous:
            actions = torch.rand((n, 3, 5), generator=gen) * 2.4 - 1.2
        else:
            actions = torch.randint(0, 5, (n, 3), generator=gen)
        _, r_a, term_a, trunc_a, info_a = adapter.step(actions)
        _, r_t, term_t, trunc_t, info_t = torch_env.step(actions)
        torch.testing.assert_close(info_a["final_obs"], info_t["final_obs"], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(r_a, r_t, atol=1e-5, rtol=1e-5)
        assert torch.equal(term_a, term_t) and torch.equal(trunc_a, trunc_t)
        if t < 24:  # float64 (mpe2) and float32 (torch) drift apart in contacts: re-synchronise
            sim = torch.tensor(np.stack([_world_state(e) for e in adapter.envs]))
            torch_env.set_sim_state(sim, torch_env.elapsed)
    assert trunc_a.all()
