"""Dict and Tuple action spaces (`envs/actions.py`): their parts read, split and nested back
(starts, nesting, shapes); the adapter reads a space of only discrete parts as multi-discrete,
of only continuous ones as continuous, and of both as hybrid, which PPO and A2C take
(`core/hybrid.py`: the log-probability and entropy against torch's distributions) and the
others refuse with their reason; saved policies and exported models answer in the env's own
structure; PPO learns a parameterised-action task."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces

from xiaoyarl import load_policy, train_agent
from xiaoyarl.agents.hybrid import AgentHybridA2C, AgentHybridPPO
from xiaoyarl.agents.registry import agent_class
from xiaoyarl.config import Config
from xiaoyarl.core.hybrid import ActorHybridPPO
from xiaoyarl.core.nets import RunningNorm
from xiaoyarl.envs import make_env
from xiaoyarl.envs.actions import names, nest, read_parts, split
from xiaoyarl.errors import ConfigError

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated")

KICK = "action_envs:Kick-v0"  # Tuple(Discrete(3), Tuple(Box(1), Box(1), Box(1)))
KICK_DICT = "action_envs:KickDict-v0"  # {"aim": Box(3), "kick": Discrete(3, start=1)}


def test_parts_are_read_in_the_spaces_order_and_nested_back():
    space = spaces.Tuple((
        spaces.Dict({"mode": spaces.Discrete(3, start=-1), "bits": spaces.MultiBinary(2)}),
        spaces.Box(-2.0, 2.0, (2, 2), np.float32),
        spaces.MultiDiscrete([4, 5], start=[1, 0]),
    ))  # fmt: skip
    parts = read_parts(space, "env")
    assert [(p[0], p[1], p[2]) for p in parts] == [
        ((0, "bits"), "discrete", (2,)),
        ((0, "mode"), "discrete", ()),
        ((1,), "continuous", (2, 2)),
        ((2,), "discrete", (2,)),
    ]  # Dict keys sorted by gymnasium
    assert names(parts) == ["0/bits", "0/mode", "1", "2"]
    discrete = np.array([[1, 0, 2, 3, 4], [0, 1, 0, 0, 0]])  # (batch, K): bits, mode, the pair
    continuous = np.arange(8, dtype=np.float32).reshape(2, 4) / 4  # (batch, C)
    action = nest(parts, split(parts, discrete, continuous))
    assert isinstance(action, tuple) and set(action[0]) == {"mode", "bits"}
    np.testing.assert_array_equal(action[0]["mode"], [1, -1])  # its start, -1, added
    np.testing.assert_array_equal(action[0]["bits"], [[1, 0], [0, 1]])
    np.testing.assert_array_equal(action[1], continuous.reshape(2, 2, 2))
    np.testing.assert_array_equal(action[2], [[4, 4], [1, 0]])  # starts 1 and 0
    one = nest(parts, [v[1] for v in split(parts, discrete, continuous)])
    assert space.contains((one[0], one[1].astype(np.float32), one[2]))


def test_a_part_that_cannot_be_read_is_named():
    with pytest.raises(Exception, match=r"action part 1/say is a Text space"):
        read_parts(spaces.Tuple((spaces.Discrete(2), spaces.Dict({"say": spaces.Text(3)}))), "e")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_adapter_reads_a_hybrid_space_and_steps_it(mode):
    with make_env(KICK, 2, vector_mode=mode) as env:
        spec = env.spec
        assert (spec.if_discrete, spec.if_hybrid, spec.action_nvec, spec.action_dim) == (
            False, True, (3,), 3)  # fmt: skip
        env.reset(seed=0)
        # kicks 2 and 0 (as floats, rounded), aims in [-1, 1] (clipped beyond)
        action = torch.tensor([[2.0, 0.1, 0.2, 0.3], [0.0, 5.0, 0.0, 0.0]])
        actions = env._to_env_actions(action)  # what the sub-envs take
        steps = actions if mode == "sync" else [
            (actions[0][i], tuple(a[i] for a in actions[1])) for i in range(2)]  # fmt: skip
        assert [int(kick) for kick, _ in steps] == [2, 0]
        assert float(steps[0][1][2][0]) == pytest.approx(0.3)
        assert float(steps[1][1][0][0]) == 1.0
        env.step(action)  # the env asserts its space contains each
    with make_env(KICK_DICT, 2) as env:
        env.reset(seed=0)
        assert env._to_env_actions(torch.tensor([[0.0, 0.5, 0.0, 0.0]]).repeat(2, 1))[0][
            "kick"] == 1  # its start  # fmt: skip


def test_dicts_of_one_kind_of_part_are_multi_discrete_or_continuous():
    gymnasium.register("test_hybrid/Discretes-v0", entry_point=_Only,
                       kwargs={"space": spaces.Dict({"a": spaces.Discrete(3),
                                                     "b": spaces.MultiBinary(2)})})  # fmt: skip
    gymnasium.register("test_hybrid/Boxes-v0", entry_point=_Only,
                       kwargs={"space": spaces.Tuple((spaces.Box(0.0, 2.0, (1,)),
                                                      spaces.Box(-1.0, 1.0, (2,))))})  # fmt: skip
    with make_env("test_hybrid/Discretes-v0", 2) as env:
        spec = env.spec
        assert (spec.if_discrete, spec.action_nvec, spec.action_dim) == (True, (3, 2, 2), 7)
        assert agent_class("dqn", spec).__name__ == "AgentBranchingDQN"
        env.reset(seed=0)
        env.step(torch.tensor([[2, 1, 0], [0, 0, 1]]))
    with make_env("test_hybrid/Boxes-v0", 2) as env:
        spec = env.spec
        assert (spec.if_discrete, spec.action_nvec, spec.action_dim) == (False, None, 3)
        assert (spec.action_low, spec.action_high) == ((0.0, -1.0, -1.0), (2.0, 1.0, 1.0))
        assert agent_class("sac", spec).__name__ == "AgentSAC"
        env.reset(seed=0)
        assert env._to_env_actions(torch.tensor([[-1.0, 0.5, 1.0]] * 2))[0][0][0] == 0.0
        env.step(torch.zeros(2, 3))


class _Only(gymnasium.Env):
    """An env of the given action space (checked) and a constant observation."""

    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)

    def __init__(self, space):
        self.action_space = space

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        return np.zeros(2, np.float32), 0.0, False, False, {}


def test_the_log_probability_is_the_categoricals_and_the_gaussians_summed():
    torch.manual_seed(0)
    nvec = (3, 2)
    actor = ActorHybridPPO(5, 4, [16], RunningNorm(5, enabled=False), nvec)
    with torch.no_grad():  # logits and means that differ between states
        actor.net[-1].weight.mul_(300)
        actor.action_std_log.copy_(torch.tensor([-1.0, -0.5, 0.0, 0.3]))
    state = torch.randn(6, 5)
    action, sampled_logprob = actor.get_action(state)
    assert action.shape == (6, 6) and torch.equal(action[:, :2], action[:, :2].round())
    logprob, entropy = actor.get_logprob_entropy(state, action)
    torch.testing.assert_close(sampled_logprob, logprob)

    logits, mean = actor.net(state).split([3, 2, 4], dim=-1)[:2], actor.net(state)[:, 5:]
    dists = [torch.distributions.Categorical(logits=lg) for lg in logits]
    normal = torch.distributions.Normal(mean, actor.action_std_log.exp())
    expected = sum(d.log_prob(action[:, k].long()) for k, d in enumerate(dists))
    expected = expected + normal.log_prob(action[:, 2:]).sum(-1)
    expected_entropy = sum(d.entropy() for d in dists) + normal.entropy().sum(-1)
    torch.testing.assert_close(logprob, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(entropy, expected_entropy, rtol=1e-5, atol=1e-5)

    greedy = actor(state)
    assert torch.equal(greedy[:, 0].long(), logits[0].argmax(-1))
    assert torch.equal(greedy[:, 1].long(), logits[1].argmax(-1))
    torch.testing.assert_close(greedy[:, 2:], mean.clamp(-1, 1))
    sent = actor.convert_action_for_env(torch.tensor([[1.0, 0.0, 3.0, -2.0, 0.5, 0.0]]))
    assert sent.tolist() == [[1.0, 0.0, 1.0, -1.0, 0.5, 0.0]]


@pytest.mark.parametrize(("algo", "agent"), [("ppo", AgentHybridPPO), ("a2c", AgentHybridA2C)])
def test_ppo_and_a2c_train_and_their_saved_policy_answers_in_the_envs_structure(
    algo, agent, tmp_path
):
    with make_env(KICK_DICT, 2) as env:
        assert agent_class(algo, env.spec) is agent
    config = Config(algo=algo, env_id=KICK_DICT, seed=0, threads=1, max_steps=600,
                    eval_every=300, eval_episodes=2, cwd=str(tmp_path))  # fmt: skip
    summary = train_agent(config, log=None)
    assert np.isfinite(summary["final_eval_mean"])
    policy = load_policy(tmp_path)
    single = gymnasium.make("action_envs:KickDict-v0")
    obs, _ = single.reset(seed=0)
    for deterministic in (True, False):
        action = policy.predict(obs, deterministic=deterministic)
        assert set(action) == {"kick", "aim"} and single.action_space.contains(action)
        obs = single.step(action)[0]
    batch = policy.predict(np.stack([obs, -obs]))
    assert batch["aim"].shape == (2, 3) and set(batch["kick"].tolist()) <= {1, 2, 3}


@pytest.mark.parametrize(
    ("algo", "words"),
    [("dqn", "a max over one Q-value per action"), ("sac", "none with respect to a discrete"),
     ("td3", "none with respect to a discrete"), ("sac_discrete", "one Q-value per action")],
)  # fmt: skip
def test_the_other_algorithms_refuse_hybrid_actions_with_their_reason(algo, words, tmp_path):
    config = Config(algo=algo, env_id=KICK, cwd=str(tmp_path / "run"))
    with pytest.raises(ConfigError, match=rf"hybrid \(discrete and continuous parts\): .*{words}"
                                          r".*Algorithms that can: a2c, ppo\.$"):  # fmt: skip
        train_agent(config, log=None)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_an_exported_hybrid_policy_acts_as_the_policy_over_whole_episodes(fmt, tmp_path):
    from xiaoyarl.export import export_policy

    config = Config(algo="ppo", env_id=KICK, seed=0, threads=1, max_steps=600, eval_every=300,
                    eval_episodes=2, cwd=str(tmp_path))  # fmt: skip
    train_agent(config, log=None)
    policy = load_policy(tmp_path)
    if fmt == "onnx":
        pytest.importorskip("onnxscript")
        ort = pytest.importorskip("onnxruntime")
        session = ort.InferenceSession(str(export_policy(tmp_path, fmt="onnx")))
        assert [o.name for o in session.get_outputs()] == [
            "action/0", "action/1/0", "action/1/1", "action/1/2"]  # fmt: skip
        model = lambda obs: session.run(None, {"obs": obs})  # noqa: E731
    else:
        scripted = torch.jit.load(str(export_policy(tmp_path, fmt="torchscript")))
        model = lambda obs: [t.detach().numpy() for t in scripted(torch.as_tensor(obs))]  # noqa: E731
    envs = [gymnasium.make("action_envs:Kick-v0") for _ in range(3)]
    obs = np.stack([env.reset(seed=i)[0] for i, env in enumerate(envs)])
    for _ in range(10):  # whole episodes
        kick, aims = policy.predict(obs)
        got = model(obs)
        np.testing.assert_array_equal(got[0], kick)
        for mine, theirs in zip(got[1:], aims, strict=True):
            np.testing.assert_allclose(mine, theirs, atol=1e-6)
        obs = np.stack([env.step((int(kick[i]), tuple(a[i] for a in aims)))[0]
                        for i, env in enumerate(envs)])  # fmt: skip


@pytest.mark.learning
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "seed", [0, pytest.param(1, marks=pytest.mark.seeds), pytest.param(2, marks=pytest.mark.seeds)]
)
def test_ppo_learns_a_parameterised_action_task(seed, tmp_path):
    """Kick-v0 needs the right kind of kick and its own aim: random play returns about 1.3, the
    right kicks aimed at random 4, the best 10 (BENCHMARKS.md: 3 of 3 seeds at 200k-240k
    env steps with PPO's defaults)."""
    config = Config(algo="ppo", env_id=KICK, seed=seed, threads=1, max_steps=400_000,
                    eval_every=20_000, cwd=str(tmp_path))  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["solved"], summary  # 9 of 10, with the confirming episodes
    policy = load_policy(tmp_path)
    env = gymnasium.make("action_envs:Kick-v0")
    returns = []
    for episode in range(5):
        obs, _ = env.reset(seed=100 + episode)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy.predict(obs))
            total, done = total + reward, terminated or truncated
        returns.append(total)
    assert np.mean(returns) >= 8.5, returns
