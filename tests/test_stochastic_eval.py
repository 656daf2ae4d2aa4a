"""Stochastic evaluation (`eval_deterministic: false`, SB3's `deterministic=False`): the
evaluator, the best policy it keeps, the saved policy, `eval` and `record` sample actions by one
definition (agents/acting.py), so that a policy is scored, chosen and replayed alike."""

from __future__ import annotations

import pytest
import torch

from xiaoyarl import train_agent
from xiaoyarl.agents.multi.recurrent_decomposition import RecurrentGreedy
from xiaoyarl.agents.registry import agent_class
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.config import Config
from xiaoyarl.config_io import load_config, save_config
from xiaoyarl.envs import make_env
from xiaoyarl.envs.multi import make_multi_agent_env
from xiaoyarl.policy import MultiAgentPolicy, Policy, evaluate
from xiaoyarl.train.checkpoint import policy_state

SMALL = {"net_dims": [32, 32], "batch_size": 16, "learning_starts": 16, "buffer_size": 4096}
SINGLE = [("ppo", "CartPole-v1"), ("ppo", "Pendulum-v1"), ("a2c", "CartPole-v1"),
          ("pqn", "CartPole-v1"), ("dqn", "CartPole-v1"), ("d3qn", "CartPole-v1"),
          ("ddpg", "Pendulum-v1"),
          ("td3", "Pendulum-v1"), ("sac", "Pendulum-v1"), ("sac_discrete", "CartPole-v1"),
          ("ppo", "action_envs:PickAllowed-v0"), ("dqn", "action_envs:PickAllowed-v0")]  # fmt: skip
MULTI = [("mappo", "SpreadDiscrete-v0"), ("mappo", "SpreadContinuous-v0"),
         ("qmix", "SpreadDiscrete-v0"), ("maddpg", "SpreadDiscrete-v0"),
         ("matd3", "SpreadContinuous-v0"), ("pqn_vdn", "SpreadDiscrete-v0")]  # fmt: skip


def build(algo, env_id, multi=False, **fields):
    """A small agent (weights from seed 0) with `fields`, and its env's spec."""
    on_policy = algo in ("ppo", "a2c", "pqn", "mappo", "pqn_vdn")
    fields = {"explore_rate": 0.3, **({} if on_policy else SMALL), **fields}
    config = Config(algo=algo, env_id=env_id, num_envs=4, **fields)
    config = resolve_config(config, batched=True)
    with (make_multi_agent_env if multi else make_env)(env_id, 4, seed=0) as env:
        spec = env.spec
    torch.manual_seed(0)
    return agent_class(algo, spec, config)(spec, config, torch.device("cpu")), spec


def same_draws(first, second, *args):
    """`first(*args)` and `second(*args)`, each from the same random state."""
    torch.manual_seed(7)
    a = first(*args)
    torch.manual_seed(7)
    return a, second(*args)


@pytest.mark.parametrize(("algo", "env_id"), SINGLE, ids=[f"{a}-{e}" for a, e in SINGLE])
def test_the_evaluator_samples_as_the_saved_policy_does(algo, env_id):
    agent, spec = build(algo, env_id, eval_deterministic=False)
    policy = Policy(policy_state(agent))
    states = torch.randn(3000, spec.state_dim)
    mask = None
    if spec.action_mask:  # the second action of every other row is the only one allowed
        mask = torch.ones(3000, spec.action_dim, dtype=torch.bool)
        mask[::2] = torch.arange(spec.action_dim) == 1
    args = (states,) if mask is None else (states, mask)
    sampled, replayed = same_draws(agent.evaluation_policy(), policy.vec_policy(False), *args)
    torch.testing.assert_close(sampled, replayed, rtol=0, atol=0)  # one definition, bit for bit
    greedy = agent.act(*args)
    torch.testing.assert_close(policy.vec_policy(True)(*args), greedy, rtol=0, atol=0)
    assert (sampled != greedy).any()  # sampling changes some actions
    if mask is not None:
        assert (sampled[::2] == 1).all()  # never a masked one
    if not spec.if_discrete:
        assert sampled.abs().max() <= 1.0
    agent.config.eval_deterministic = True
    assert agent.evaluation_policy() == agent.act


@pytest.mark.parametrize(("algo", "env_id"), MULTI, ids=[f"{a}-{e}" for a, e in MULTI])
def test_multi_agent_evaluators_sample_as_their_saved_policies_do(algo, env_id):
    agent, spec = build(algo, env_id, multi=True, eval_deterministic=False)
    policy = MultiAgentPolicy(policy_state(agent))
    obs = torch.randn(500, spec.num_agents, spec.obs_dim)
    avail = None
    if spec.if_discrete:
        avail = torch.rand(500, spec.num_agents, spec.action_dim) < 0.5
        avail[..., 2] = True
    sampled, replayed = same_draws(agent.evaluation_policy(), policy.vec_policy(False), obs, avail)
    torch.testing.assert_close(sampled, replayed, rtol=0, atol=0)
    greedy = agent.act(obs, avail)
    assert (sampled != greedy).any()
    if avail is not None:
        assert avail.gather(2, sampled.unsqueeze(2)).all()


def test_recurrent_agents_sample_epsilon_greedy_among_the_available_actions():
    """QMIX with recurrent agents evaluates (and its saved policy predicts) epsilon-greedily
    where told to; before, a recurrent multi-agent policy refused `deterministic=False`."""
    agent, spec = build("qmix", "SpreadDiscrete-v0", multi=True, recurrent="gru",
                        eval_deterministic=False, explore_rate=1.0)  # fmt: skip
    sampler = agent.evaluation_policy()
    assert isinstance(sampler, RecurrentGreedy) and sampler.explore_rate == 1.0
    obs = torch.randn(400, spec.num_agents, spec.obs_dim)
    avail = torch.rand(400, spec.num_agents, spec.action_dim) < 0.5
    avail[..., 3] = True
    actions = sampler(obs, avail)
    assert avail.gather(2, actions.unsqueeze(2)).all()
    assert actions.unique().tolist() == [0, 1, 2, 3, 4]  # any available one, at random
    policy = MultiAgentPolicy(policy_state(agent))
    assert policy.recurrent
    explored = policy.predict(obs[:50].numpy(), deterministic=False, avail=avail[:50].numpy())
    assert avail[:50].gather(2, torch.as_tensor(explored).unsqueeze(2)).all()
    greedy = policy.predict(obs[:50].numpy(), avail=avail[:50].numpy())
    assert (explored != greedy).any()


@pytest.mark.parametrize(("algo", "env_id"), MULTI[:2] + MULTI[3:],
                         ids=[f"{a}-{e}" for a, e in MULTI[:2] + MULTI[3:]])  # fmt: skip
def test_recurrent_multi_agent_evaluators_sample_as_their_saved_policies_do(algo, env_id):
    """The agents with memory other than VDN's and QMIX's: the evaluator's sampling policy and
    the saved policy's, each carrying the agents' hidden states, draw the same actions step
    after step; greedy actions differ from them."""
    agent, spec = build(algo, env_id, multi=True, eval_deterministic=False, recurrent="gru",
                        recurrent_dim=8)  # fmt: skip
    policy = MultiAgentPolicy(policy_state(agent))
    sampler, replay = agent.evaluation_policy(), policy.vec_policy(False)
    steps = torch.randn(4, 300, spec.num_agents, spec.obs_dim)
    agent.config.eval_deterministic = True
    greedy = agent.evaluation_policy()
    differ = False
    for obs in steps:
        sampled, replayed = same_draws(sampler, replay, obs)
        torch.testing.assert_close(sampled, replayed, rtol=0, atol=0)
        differ |= bool((sampled != greedy(obs)).any())
    assert differ and policy.recurrent


def test_a_run_evaluated_by_sampling_is_scored_kept_and_replayed_by_sampling(tmp_path, cli):
    """Training's evaluations, the kept policy and `eval`/`record` all follow the run's
    `eval_deterministic`; `--deterministic` and `--stochastic` override it."""
    common = dict(algo="ppo", env_id="CartPole-v1", num_envs=8, horizon_len=16, seed=0,
                  max_steps=256, eval_every=128, eval_episodes=10, confirm_episodes=0,
                  threads=1)  # fmt: skip
    stochastic = tmp_path / "stochastic"
    train_agent(Config(**common, eval_deterministic=False, cwd=str(stochastic)), log=None)
    greedy = tmp_path / "greedy"
    train_agent(Config(**common, cwd=str(greedy)), log=None)
    assert load_config(stochastic / "config.yaml").eval_deterministic is False
    first = [(run / "recorder.csv").read_text().splitlines()[1].split(",") for run in
             (stochastic, greedy)]  # fmt: skip
    assert first[0][0] == first[1][0] == "128"
    assert first[0][2] != first[1][2]  # the same weights, scored by samples and by the best
    torch.manual_seed(3)
    by_default = evaluate(stochastic, episodes=20)
    torch.manual_seed(3)
    sampled = evaluate(stochastic, episodes=20, deterministic=False)
    assert by_default == sampled
    best = evaluate(stochastic, episodes=20, deterministic=True)
    assert best["returns"] != sampled["returns"]
    assert evaluate(stochastic, episodes=20, deterministic=True) == best  # greedy: no draws
    out = cli("eval", str(stochastic), "--episodes", "20", "--deterministic")
    assert out.returncode == 0, out.stderr
    assert f"eval over 20 episodes: {best['mean']:.2f} ± {best['std']:.2f}" in out.stdout
    both = cli("eval", str(stochastic), "--deterministic", "--stochastic")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_record_plays_the_policy_as_the_run_evaluated(tmp_path, tiny_run, monkeypatch):
    from xiaoyarl import record

    run = tmp_path / "run"
    run.mkdir()
    source = tiny_run("ppo-CartPole")
    for name in ("actor.pt", "config.yaml"):
        (run / name).write_bytes((source / name).read_bytes())
    config = load_config(run / "config.yaml")
    config.eval_deterministic = False
    save_config(config, run / "config.yaml")
    seen = []
    play = record._play

    def spy(player, *args):
        seen.append(player.deterministic)
        return play(player, *args)

    monkeypatch.setattr(record, "_play", spy)
    films = [record.record_video(run, tmp_path / f"{name}.gif", deterministic=how)
             for name, how in [("run", None), ("best", True), ("again", True)]]  # fmt: skip
    assert seen == [False, True, True]
    sampled, best, again = (film.read_bytes() for film in films)
    assert best == again  # the best actions: the same film every time
    assert sampled != best
