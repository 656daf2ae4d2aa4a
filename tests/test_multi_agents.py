"""Multi-agent algorithms: shapes, QMIX's monotonic mixer, the two-step game (QMIX finds 8,
VDN settles at 7, as in the QMIX paper), action masks never violated, bit-exact resume for one
algorithm of each family, policies and the command line."""

import math

import numpy as np
import pytest
import torch

from xiaoyarl import Config, load_policy, train_agent
from xiaoyarl.agents import agent_class
from xiaoyarl.agents.multi import QMixer, with_agent_ids
from xiaoyarl.agents.settings import check_config, resolve_config
from xiaoyarl.core.nets import RunningNorm
from xiaoyarl.core.off_policy_nets import RecurrentQNet
from xiaoyarl.envs.multi import make_multi_agent_env
from xiaoyarl.errors import ConfigError
from xiaoyarl.train.checkpoint import load_plain

ALGOS = [("vdn", "SpreadDiscrete-v0"), ("qmix", "SpreadDiscrete-v0"),
         ("pqn_vdn", "SpreadDiscrete-v0"),
         ("maddpg", "SpreadContinuous-v0"), ("maddpg", "SpreadDiscrete-v0"),
         ("matd3", "SpreadContinuous-v0"), ("matd3", "SpreadDiscrete-v0"),
         ("mappo", "SpreadContinuous-v0"), ("mappo", "SpreadDiscrete-v0")]  # fmt: skip
ON_POLICY = ("mappo", "pqn_vdn")  # no replay buffer: no buffer_size, learning_starts
SMALL = {"net_dims": [32, 32], "batch_size": 16, "learning_starts": 16, "buffer_size": 4096}


def make_agent(algo, env_id, num_envs=4, **overrides):
    config = Config(algo=algo, env_id=env_id, num_envs=num_envs, **{**SMALL, **overrides})
    config = resolve_config(config, batched=True)
    if algo in ON_POLICY:
        config.batch_size = 16
    env = make_multi_agent_env(env_id, num_envs, seed=0)
    torch.manual_seed(0)
    agent = agent_class(algo, env.spec, config)(env.spec, config, torch.device("cpu"))
    obs, info = env.reset(seed=0)
    agent.last_state = agent.observe(obs, info)
    return agent, env


@pytest.mark.parametrize(("algo", "env_id"), ALGOS, ids=[f"{a}-{e}" for a, e in ALGOS])
def test_explore_update_and_act_shapes(algo, env_id):
    agent, env = make_agent(algo, env_id)
    spec = env.spec
    for _ in range(3):  # 3 rollouts x 8 steps x 4 envs; learning starts after the first
        rollout = agent.explore_env(env, 8)
        logs = agent.update_net(rollout)
    assert rollout.rewards.shape == rollout.terminals.shape == (8, 4)  # the team's view
    assert logs and all(math.isfinite(v.item()) for v in logs.values())
    obs, info = env.reset(seed=1)
    action = agent.act(obs, info.get("avail_actions"))
    if spec.if_discrete:
        assert action.shape == (4, 3) and action.dtype == torch.int64
        assert ((action >= 0) & (action < spec.action_dim)).all()
    else:
        assert action.shape == (4, 3, spec.action_dim) and action.abs().max() <= 1.0


@pytest.mark.parametrize("hypernet_layers", [1, 2])
def test_qmix_mixer_is_monotonic_in_every_agents_q(hypernet_layers):
    torch.manual_seed(0)
    mixer = QMixer(3, 7, RunningNorm(7, enabled=False), hypernet_layers=hypernet_layers)
    linear = [m for m in mixer.hyper_w1 if isinstance(m, torch.nn.Linear)]
    assert len(linear) == hypernet_layers and linear[-1].out_features == 3 * 32
    q = torch.randn(256, 3, requires_grad=True)
    state = torch.randn(256, 7) * 3
    total = mixer(q, state)
    assert total.shape == (256,)
    (grad,) = torch.autograd.grad(total.sum(), q)
    assert (grad >= 0).all() and (grad > 0).any()  # dQ_tot / dQ_a >= 0 for every agent
    # and not merely additive (VDN's sum has gradient 1): it depends on the state
    assert grad.std() > 1e-3


def test_qmix_hypernetworks_start_small_with_the_default_init_gain():
    """`hypernet_init_gain` (default 0.001, as JaxMARL's QMIX): the mixer starts near Q_tot = 0
    with near-zero mixing weights, and stays monotonic; a bad gain is refused."""
    agent, env = make_agent("qmix", "SpreadDiscrete-v0")
    assert agent.config.hypernet_init_gain == 0.001
    q = torch.randn(64, 3, requires_grad=True) * 10
    total = agent.mixer(q, torch.randn(64, env.spec.state_dim))
    (grad,) = torch.autograd.grad(total.sum(), q)
    assert total.abs().max() < 1e-3 and (grad >= 0).all() and grad.max() < 1e-6
    usual = QMixer(3, env.spec.state_dim, RunningNorm(env.spec.state_dim, enabled=False))
    assert usual(q, torch.randn(64, env.spec.state_dim)).abs().max() > 1  # build_mlp's init
    with pytest.raises(ConfigError, match="hypernet_init_gain"):
        check_config(Config(algo="qmix", env_id="SpreadDiscrete-v0", hypernet_init_gain=0.0))


def test_pqn_vdn_targets_and_loss_match_a_reference_written_out(slow_lambda_returns):
    """PQN-VDN: the Q(lambda) returns of the team reward bootstrap from max Q_tot of the step
    reached, the sum over agents of each one's best Q-value (written out per sub-env and step,
    then the textbook recursion), and the loss is half the squared error of the sum of the
    agents' Q-values of the actions taken against them."""

    agent, env = make_agent("pqn_vdn", "SpreadDiscrete-v0", gamma=0.9, q_lambda=0.7)
    agent.update_net(agent.explore_env(env, 20))  # a trained network, not the initial one
    rollout = agent.explore_env(env, 12)  # steps 20-31: every episode ends at its step 25
    assert rollout.truncates.any() and rollout.actions.shape == (12, 4, 3)
    layout, steps, envs = agent.layout, 12, 4
    next_values = torch.zeros(steps, envs)
    chosen = torch.zeros(steps, envs)
    with torch.no_grad():
        for t in range(steps):
            for e in range(envs):
                after = layout.unpack(rollout.next_states[t, e])
                q_next = agent.qnet.q_values(with_agent_ids(after.obs))  # (A, U)
                next_values[t, e] = sum(q_next[i].max() for i in range(3))
                now = layout.unpack(rollout.states[t, e])
                q = agent.qnet.q_values(with_agent_ids(now.obs))
                chosen[t, e] = sum(q[i, rollout.actions[t, e, i]] for i in range(3))
    want = slow_lambda_returns(rollout.rewards, next_values, rollout.terminals,
                               rollout.truncates, 0.9, 0.7)  # fmt: skip
    returns = agent.q_lambda_targets(rollout)
    torch.testing.assert_close(returns, want)
    loss, logs = agent.pqn_loss(rollout.states.flatten(0, 1), rollout.actions.flatten(0, 1),
                                returns.flatten(), torch.mean)  # fmt: skip
    torch.testing.assert_close(loss, 0.5 * (chosen - want).square().mean())
    torch.testing.assert_close(logs[1], chosen.mean())
    assert set(agent.nets) == {"qnet"}  # no target network, no mixer to train


def test_centralized_critic_and_mixer_inputs():
    agent, env = make_agent("matd3", "SpreadContinuous-v0")
    spec = env.spec  # 3 agents, 18 observation numbers, 18 state numbers, 5 action numbers
    critic_layer = agent.critic.net[0]  # the ensemble's first layer
    assert critic_layer.weight.shape[:2] == (2, spec.state_dim + 3 + 3 * spec.action_dim)
    assert agent.actor.net[0].in_features == spec.obs_dim + 3  # observation and agent id
    states = agent.critic_states(torch.randn(5, spec.state_dim))
    assert states.shape == (15, spec.state_dim + 3)
    assert torch.equal(states[:3, -3:], torch.eye(3))  # each agent's id
    qmix, env = make_agent("qmix", "SpreadDiscrete-v0")
    assert qmix.mixer.hyper_w1[0].in_features == env.spec.state_dim
    assert qmix.mixer(torch.zeros(5, 3), torch.zeros(5, env.spec.state_dim)).shape == (5,)
    obs = torch.randn(2, 3, 4)
    ids = with_agent_ids(obs)
    assert ids.shape == (2, 3, 7) and torch.equal(ids[1, 2, 4:], torch.tensor([0.0, 0, 1]))


@pytest.mark.parametrize("algo", ["vdn", "qmix", "maddpg", "matd3", "mappo", "pqn_vdn"])
def test_action_masks_are_never_violated(algo):
    """A PettingZoo env whose masks change every step and which raises on a masked action."""
    env_id = "test_pettingzoo_adapter:make_masked"
    pytest.importorskip("pettingzoo")
    config = resolve_config(Config(algo=algo, env_id=env_id, num_envs=4, **SMALL), batched=False)
    config.batch_size = 16
    env = make_multi_agent_env(env_id, 4, seed=0)
    assert env.spec.has_action_mask
    torch.manual_seed(0)
    agent = agent_class(algo, env.spec)(env.spec, config, torch.device("cpu"))
    obs, info = env.reset(seed=0)
    agent.last_state = agent.observe(obs, info)
    for _ in range(8):  # random warm-up, then the policy's own choices, through updates
        agent.update_net(agent.explore_env(env, 8))
    for _ in range(20):
        avail = info["avail_actions"]
        action = agent.act(obs, avail)
        assert avail.gather(2, action.unsqueeze(2)).all()
        obs, _, _, _, info = env.step(action)


def train_two_step(algo, tmp_path):
    config = Config(algo=algo, env_id="TwoStepGame-v0", max_steps=4096, eval_every=1024,
                    eval_episodes=4, learning_starts=256, explore_rate=1.0, stop_at_target=False,
                    cwd=str(tmp_path / algo), threads=1)  # fmt: skip
    return train_agent(config, log=None)


@pytest.mark.learning
@pytest.mark.timeout(600)
def test_two_step_game_qmix_finds_8_and_vdn_settles_at_7(tmp_path):
    """With uniform exploration (epsilon 1, as in the QMIX paper's experiment) VDN's additive
    values prefer the safe state (7); QMIX's monotonic mixer represents the payoff matrix and
    goes for 8."""
    assert train_two_step("qmix", tmp_path)["final_eval_mean"] == 8.0
    assert train_two_step("vdn", tmp_path)["final_eval_mean"] == 7.0


def train_recall(algo, tmp_path, seed, continuous, **memory):
    """`algo` on Recall (`memory_envs`), 8,000 env steps; its last evaluation's mean team
    return over 32 episodes (2 for agents that remember their cues, 1 for chance)."""
    pytest.importorskip("pettingzoo")
    on_policy = (
        {"horizon_len": 32} if algo in ON_POLICY else {"batch_size": 64, "learning_starts": 256}
    )
    config = Config(algo=algo, env_id="memory_envs:make_recall", num_envs=8, max_steps=8000,
                    eval_every=4000, eval_episodes=32, net_dims=[32], seed=seed, threads=1,
                    env_kwargs={"max_episode_steps": 4, "continuous": continuous},
                    cwd=str(tmp_path / f"{algo}-{seed}-{bool(memory)}"), **on_policy,
                    **memory)  # fmt: skip
    return train_agent(config, log=None)["final_eval_mean"]


@pytest.mark.learning
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("algo", "continuous"), [("mappo", False), ("pqn_vdn", False),
                                                  ("maddpg", True)])  # fmt: skip
def test_agents_with_memory_recall_their_cues_where_feed_forward_ones_cannot(
    tmp_path, algo, continuous
):
    """Recall pays each agent at the last step for naming the cue it saw at the first: agents
    with a GRU score the team's 2 of 2 on 3 of 3 seeds within 8,000 env steps; the same
    algorithm feed-forward stays near chance (1)."""
    memory = {"recurrent": "gru", "recurrent_dim": 16}
    for seed in range(3):
        assert train_recall(algo, tmp_path, seed, continuous, **memory) >= 1.9, f"seed {seed}"
    assert train_recall(algo, tmp_path, 0, continuous) <= 1.5


@pytest.mark.parametrize(("algo", "env_id", "extra"), [
    ("vdn", "SpreadDiscrete-v0", {}), ("maddpg", "SpreadContinuous-v0", {}),
    ("mappo", "SpreadDiscrete-v0", {}),
    ("qmix", "SpreadDiscrete-v0", {"recurrent": "lstm", "recurrent_dim": 32}),
    # (an epsilon decay of its own: the automatic one follows each run's budget)
    ("pqn_vdn", "SpreadDiscrete-v0", {"explore_decay_steps": 300}),
    # the other recurrent agents: replayed episodes, and rollouts of sequences
    ("matd3", "SpreadContinuous-v0", {"recurrent": "gru", "recurrent_dim": 16}),
    ("mappo", "SpreadDiscrete-v0", {"recurrent": "lstm", "recurrent_dim": 16}),
    ("pqn_vdn", "SpreadDiscrete-v0", {"explore_decay_steps": 300, "recurrent": "gru",
                                      "recurrent_dim": 16}),
], ids=["vdn", "maddpg", "mappo", "qmix-rnn", "pqn_vdn", "matd3-rnn", "mappo-rnn",
        "pqn_vdn-rnn"])  # fmt: skip
def test_resume_is_bit_exact_for_each_family(tmp_path, algo, env_id, extra):
    def run(cwd, steps, resume=False):
        fields = {**SMALL, "batch_size": 16} if algo not in ON_POLICY else {"net_dims": [32, 32]}
        config = Config(algo=algo, env_id=env_id, num_envs=4, horizon_len=16, cwd=str(cwd),
                        max_steps=steps, eval_every=256, eval_episodes=2,
                        checkpoint_every=10**6, threads=1, **fields, **extra)  # fmt: skip
        return train_agent(config, resume=resume, log=None)

    run(tmp_path / "a", 512)
    run(tmp_path / "b", 256)
    run(tmp_path / "b", 512, resume=True)
    a = load_plain(tmp_path / "a" / "checkpoint" / "state.pt")
    b = load_plain(tmp_path / "b" / "checkpoint" / "state.pt")
    assert a["counters"]["total_steps"] == b["counters"]["total_steps"] == 512
    for name, state in a["agent"]["nets"].items():
        for key, value in state.items():
            assert torch.equal(value, b["agent"]["nets"][name][key]), f"{name}.{key}"
    assert torch.equal(a["agent"]["last_state"], b["agent"]["last_state"])
    assert torch.equal(a["env"]["sim_state"], b["env"]["sim_state"])
    if extra.get("recurrent"):  # the exploring agents' hidden states mid-episode
        # (the replaying agents keep them as "hidden", the on-policy ones with their starts)
        hidden_a, hidden_b = (run["agent"].get("hidden", run["agent"].get("recurrent", {})
                                               .get("hidden")) for run in (a, b))  # fmt: skip
        assert hidden_a.abs().sum() > 0
        assert torch.equal(hidden_a, hidden_b)


@pytest.mark.parametrize(("algo", "env_id"), [("qmix", "SpreadDiscrete-v0"),
                                              ("mappo", "SpreadContinuous-v0"),
                                              ("pqn_vdn", "SpreadDiscrete-v0")])  # fmt: skip
def test_a_saved_multi_agent_policy_acts_as_the_agent(tmp_path, algo, env_id):
    config = Config(algo=algo, env_id=env_id, num_envs=4, horizon_len=16, max_steps=256,
                    eval_every=128, eval_episodes=2, cwd=str(tmp_path / "r"), threads=1,
                    **({**SMALL, "batch_size": 16} if algo not in ON_POLICY else {}))  # fmt: skip
    train_agent(config, log=None)
    policy = load_policy(tmp_path / "r")
    state = load_plain(tmp_path / "r" / "actor.pt")
    agent, env = make_agent(algo, env_id, **({"net_dims": state["net_dims"]}))
    agent.actor.load_state_dict(state["actor"])
    obs = torch.randn(6, 3, env.spec.obs_dim)
    want = agent.act(obs)
    got = policy.predict(obs.numpy())
    if env.spec.if_discrete:
        np.testing.assert_array_equal(got, want.numpy())
    else:  # rescaled to the env's bounds ([0, 1] for mpe2's continuous actions)
        low, high = np.array(env.spec.action_low), np.array(env.spec.action_high)
        np.testing.assert_allclose(got, low + (want.numpy() + 1) / 2 * (high - low), atol=1e-6)
    assert policy.predict(obs[0].numpy()).shape == got.shape[1:]  # one env's agents


@pytest.mark.parametrize(("algo", "env_id"), [("maddpg", "SpreadContinuous-v0"),
                                              ("matd3", "SpreadDiscrete-v0"),
                                              ("mappo", "SpreadContinuous-v0"),
                                              ("mappo", "SpreadDiscrete-v0"),
                                              ("pqn_vdn", "SpreadDiscrete-v0")])  # fmt: skip
def test_a_saved_recurrent_multi_agent_policy_acts_as_the_agents_evaluation_policy(
    tmp_path, algo, env_id
):
    """Step after step of the same episodes, the saved policy and the agent's evaluation policy
    carry each agent's hidden state alike and act alike; both start anew on `reset()`."""
    memory = {"recurrent": "gru", "recurrent_dim": 8}
    fields = {} if algo in ON_POLICY else {**SMALL, "batch_size": 4}
    config = Config(algo=algo, env_id=env_id, num_envs=4, horizon_len=16, max_steps=256,
                    eval_every=128, eval_episodes=2, cwd=str(tmp_path / "r"), threads=1,
                    **memory, **fields)  # fmt: skip
    train_agent(config, log=None)
    policy = load_policy(tmp_path / "r")
    state = load_plain(tmp_path / "r" / "actor.pt")
    agent, env = make_agent(algo, env_id, net_dims=state["net_dims"], **memory)
    agent.actor.load_state_dict(state["actor"])
    acting = agent.evaluation_policy()
    assert policy.recurrent and policy.carried()[1] == (3, 8)
    steps = torch.randn(6, 5, 3, env.spec.obs_dim)  # 6 steps of 5 envs' agents
    for _ in range(2):
        acting.reset()
        policy.reset()
        for obs in steps:
            want, got = acting(obs), policy.predict(obs.numpy())
            if env.spec.if_discrete:
                np.testing.assert_array_equal(got, want.numpy())
            else:  # rescaled to the env's bounds
                low, high = np.array(env.spec.action_low), np.array(env.spec.action_high)
                np.testing.assert_allclose(got, low + (want.numpy() + 1) / 2 * (high - low),
                                           atol=1e-6)  # fmt: skip
        hidden = policy.carried()[0].value
        assert hidden is not None and hidden.shape == (5 * 3, 8) and hidden.abs().sum() > 0


def test_the_command_line_trains_and_refuses_a_mismatch(tmp_path, cli):
    done = cli("train", "mappo", "SpreadDiscrete-v0", "--no-preset", "--num-envs", "4", "--set",
               "horizon_len=16", "--max-steps", "512", "--eval-every", "256", "--eval-episodes",
               "2", "--cwd", str(tmp_path / "r"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "mappo on SpreadDiscrete-v0 | backend torch | 4 envs" in done.stdout
    evaluated = cli("eval", str(tmp_path / "r"), "--episodes", "3")
    assert evaluated.returncode == 0 and "eval over 3 episodes" in evaluated.stdout
    wrong = cli("train", "ppo", "SpreadDiscrete-v0", "--cwd", str(tmp_path / "w"))
    assert wrong.returncode == 2 and "a multi-agent env" in wrong.stderr and "mappo" in wrong.stderr
    wrong = cli("train", "qmix", "CartPole-v1", "--cwd", str(tmp_path / "w"))
    assert wrong.returncode == 2 and "a single-agent env" in wrong.stderr


def test_pqn_vdn_trains_through_the_command_line_from_its_preset(tmp_path, cli):
    """PQN-VDN through the CLI starts from its task preset (128 sub-envs, one episode per
    rollout) and saves a policy that `xiaoyarl eval` runs."""
    import json

    summary = tmp_path / "summary.json"
    done = cli("train", "pqn_vdn", "SpreadDiscrete-v0", "--max-steps", "6400", "--eval-every",
               "3200", "--eval-episodes", "2", "--cwd", tmp_path / "r", "--summary-json",
               summary)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "spread_pqn_vdn.yaml" in done.stdout and "128 envs" in done.stdout
    result = json.loads(summary.read_text())
    assert result["total_steps"] == 6400 and result["updates"] == 2
    evaluated = cli("eval", str(tmp_path / "r"), "--episodes", "3")
    assert evaluated.returncode == 0 and "eval over 3 episodes" in evaluated.stdout


def test_train_starts_from_the_task_preset_unless_told_otherwise(tmp_path, cli):
    """`xiaoyarl train qmix SpreadDiscrete-v0` takes the pair's preset (said on the console
    and written into config.yaml); --set still overrides it; --no-preset and --config don't
    take it; `config_from_preset` is the same from Python, and every preset is valid."""
    import yaml

    from xiaoyarl.config_io import config_from_preset
    from xiaoyarl.presets import CONFIG_DIR, ID_PRESETS, PRESETS, TASKS, preset_path

    def run(name, *extra):
        done = cli("train", "qmix", "SpreadDiscrete-v0", "--max-steps", "800", "--eval-every",
                   "400", "--eval-episodes", "2", "--cwd", tmp_path / name, *extra)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout, yaml.safe_load((tmp_path / name / "config.yaml").read_text())

    out, saved = run("preset", "--set", "learning_rate=0.001")
    assert "task preset" in out and "spread_value_decomposition.yaml" in out
    assert saved["gamma"] == 0.9 and saved["batch_size"] == 800  # the preset's
    assert saved["learning_rate"] == 0.001  # the command line's
    out, saved = run("defaults", "--no-preset")
    assert "task preset" not in out and saved["gamma"] == 0.99
    assert "settings:" not in out  # the defaults, then the command line: nothing to say
    own = tmp_path / "own.yaml"
    own.write_text("gamma: 0.97\n")
    out, saved = run("own", "--config", str(own))
    assert "task preset" not in out and saved["gamma"] == 0.97 and saved["batch_size"] == 64
    assert config_from_preset("QMIX", "SpreadDiscrete-v0").gamma == 0.9
    assert config_from_preset("ppo", "CartPole-v1") == Config(algo="ppo", env_id="CartPole-v1")
    for algo, task in PRESETS:
        for env_id, kinds in TASKS.items():
            for continuous, kind in enumerate(kinds):
                kwargs = {"continuous_actions": True} if continuous else None
                if kind == task:
                    name = ID_PRESETS.get((algo, env_id, task), PRESETS[algo, task])
                    path = CONFIG_DIR / name
                    assert preset_path(algo, env_id, kwargs) == path and path.is_file()
                    config = config_from_preset(algo, env_id, kwargs)
                    assert (config.algo, config.env_id) == (algo, env_id)
                    check_config(config)


def test_train_on_mpe2_ids_starts_from_their_tasks_presets(tmp_path, cli):
    """Through the CLI: QMIX on mpe2's discrete id and MADDPG on its continuous variant start
    from the navigation task's presets, as on the built-in envs."""
    import yaml

    pytest.importorskip("mpe2")
    for algo, extra, preset, gamma in (
        ("qmix", (), "spread_qmix_mpe2.yaml", 0.9),
        ("maddpg", ("--set", "env_kwargs={continuous_actions: true}"),
         "spread_centralized_critic.yaml", 0.95),
    ):  # fmt: skip
        run = tmp_path / algo
        done = cli("train", algo, "mpe2:simple_spread_v3", "--max-steps", "400", "--eval-every",
                   "400", "--eval-episodes", "2", "--cwd", run, *extra)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "task preset" in done.stdout and preset in done.stdout
        assert yaml.safe_load((run / "config.yaml").read_text())["gamma"] == gamma


def test_presets_follow_the_task_not_the_id():
    """The built-in navigation envs and mpe2's id get the same presets; on the mpe2 id the
    env kwargs choose the action kind's; pairs never measured get none."""
    from xiaoyarl.presets import preset_path

    for algo in ("vdn", "mappo"):
        assert preset_path(algo, "mpe2:simple_spread_v3") == preset_path(algo, "SpreadDiscrete-v0")
        assert preset_path(algo, "mpe2:simple_spread_v3") is not None
    # QMIX on mpe2's id has settings of its own (ID_PRESETS; its provenance says why)
    assert preset_path("qmix", "mpe2:simple_spread_v3").name == "spread_qmix_mpe2.yaml"
    assert preset_path("qmix", "SpreadDiscrete-v0").name == "spread_value_decomposition.yaml"
    for algo in ("maddpg", "matd3", "mappo"):
        continuous = preset_path(algo, "mpe2:simple_spread_v3", {"continuous_actions": True})
        assert continuous == preset_path(algo, "SpreadContinuous-v0") and continuous is not None
    assert preset_path("maddpg", "mpe2:simple_spread_v3") is None  # discrete: not measured
    assert preset_path("qmix", "mpe2:simple_spread_v3", {"continuous_actions": True}) is None
    assert preset_path("QMIX", "mpe2:simple_spread_v3") is not None  # any case
    # env kwargs that change the task (agents, episode length) leave it without a preset
    assert preset_path("vdn", "SpreadDiscrete-v0", {"num_agents": 4}) is None
    assert preset_path("vdn", "mpe2:simple_spread_v3", {"max_cycles": 50}) is None
    assert preset_path("vdn", "mpe2:simple_spread_v3", {"render_mode": None}) is not None
    assert preset_path("qmix", "mpe2:simple_tag_v3") is None


def test_value_decomposition_standardises_team_rewards_when_asked():
    """`reward_norm` (EPyMARL's standardised rewards): the TD target uses the team reward
    minus its running mean, over its running std; off by default, and refused for DQN."""
    agent, env = make_agent("vdn", "SpreadDiscrete-v0", reward_norm=True)
    assert not make_agent("vdn", "SpreadDiscrete-v0")[0].reward_stats.enabled
    rollout = agent.explore_env(env, 8)
    agent.update_normalizers(rollout)
    team = rollout.rewards.flatten()
    assert torch.allclose(agent.reward_stats.mean, team.mean().view(1), atol=1e-4)
    assert torch.allclose(agent.reward_stats.var, team.var(unbiased=False).view(1), rtol=1e-3)
    scaled = agent.reward_stats(team.unsqueeze(-1)).squeeze(-1)
    assert abs(scaled.mean().item()) < 1e-3 and abs(scaled.std(unbiased=False).item() - 1) < 1e-2
    with pytest.raises(ConfigError, match="reward_norm=True does not apply to dqn"):
        check_config(Config(algo="dqn", reward_norm=True))


# --- recurrent agent networks (recurrent) ------------------------------------------------------
@pytest.mark.parametrize(("kind", "width"), [("gru", 8), ("lstm", 16)])
def test_recurrent_q_net_unrolls_as_it_steps(kind, width):
    torch.manual_seed(0)
    net = RecurrentQNet(7, 5, [16], RunningNorm(7, enabled=False), hidden_dim=8, kind=kind)
    states = torch.randn(6, 4, 7)  # (T, B, S)
    q, hidden = net.unroll(states)
    h = net.initial_hidden(4)
    for t in range(6):
        q_t, h = net.step(states[t], h)
        torch.testing.assert_close(q_t, q[t])
        torch.testing.assert_close(h, hidden[t])
    assert q.shape == (6, 4, 5) and hidden.shape == (6, 4, width)  # an LSTM: h and c


@pytest.mark.parametrize("lam", [0.0, 0.6])
def test_recurrent_episode_update_matches_a_step_by_step_reference(lam):
    """QMIX with GRU agents: the loss of a replayed batch of whole episodes equals the TD loss
    written out episode by episode and step by step (hidden states carried by hand, the next
    state's Q-values one GRU step on from the hidden state after the step, double Q, masks);
    with `td_lambda` the targets are the episode's TD(lambda) returns, written out backwards:
    G_t = r_t + gamma ((1 - lam) Q_tot'(s_t+1) + lam G_t+1), from r + gamma Q_tot' at the
    episode's last stored step (no bootstrap where it terminated)."""
    agent, env = make_agent("qmix", "SpreadDiscrete-v0", recurrent="gru", batch_size=1000,
                            gamma=0.9, td_lambda=lam)  # fmt: skip
    for _ in range(8):  # warm-up rollouts, then updates with exploring by the GRU agents
        agent.update_net(agent.explore_env(env, 16))
    torch.manual_seed(1)
    episodes = agent.sample_batch()
    t_len, b = episodes.mask.shape
    # 40 episodes among 24 stored starts, the newest of each sub-env cut short by the buffer
    assert (t_len, b) == (25, 40) and episodes.mask[0].all() and not episodes.mask.all()
    layout, a = agent.layout, 3
    errors, count = [], 0
    with torch.no_grad():
        for e in range(b):
            h = agent.qnet.initial_hidden(a)
            h_target = agent.qnet_target.initial_hidden(a)
            steps = []  # (q_tot, reward, not terminal, next value) of each real step
            for t in range(t_len):
                if not episodes.mask[t, e]:
                    assert not episodes.mask[t:, e].any()  # the episode is a prefix
                    break
                now = layout.unpack(episodes.states[t, e])
                after = layout.unpack(episodes.next_states[t, e])
                action, _ = layout.unpack_step(episodes.actions[t, e])
                x, x_next = with_agent_ids(now.obs), with_agent_ids(after.obs)
                q, h = agent.qnet.step(x, h)
                _, h_target = agent.qnet_target.step(x, h_target)
                q_next, _ = agent.qnet.step(x_next, h)
                q_next_target, _ = agent.qnet_target.step(x_next, h_target)
                best = q_next.argmax(-1, keepdim=True)
                next_value = agent.mixer_target(
                    q_next_target.gather(-1, best).view(1, a), after.state.view(1, -1)
                )
                q_tot = agent.mixer(q.gather(-1, action.view(a, 1)).view(1, a),
                                    now.state.view(1, -1))  # fmt: skip
                not_terminal = (~episodes.terminals[t, e]).float()
                steps.append((q_tot, episodes.rewards[t, e], not_terminal, next_value))
            later = None  # G of the step after, within the episode
            for q_tot, reward, not_terminal, next_value in reversed(steps):
                ahead = next_value if later is None else (1 - lam) * next_value + lam * later
                target = reward + 0.9 * not_terminal * ahead
                errors.append((target - q_tot).square().item())
                later = target
                count += 1
    logs, _ = agent.update_step(episodes)
    assert count == int(episodes.mask.sum())
    assert logs["critic_loss"].item() == pytest.approx(sum(errors) / count, rel=1e-5)
    if lam:
        with pytest.raises(ConfigError, match="td_lambda=0.6 without recurrent"):
            check_config(Config(algo="qmix", env_id="SpreadDiscrete-v0", td_lambda=lam))


def test_recurrent_centralized_critic_update_matches_a_step_by_step_reference():
    """MADDPG with a GRU actor: the critic's loss on a replayed batch of whole episodes equals
    the TD loss written out episode by episode and step by step (the target actor's hidden
    state carried by hand along the episode, its action in the state a step reached one GRU
    step on from it), averaged over the real steps; the actor's loss likewise (the actor's
    hidden state carried along the episode, each agent's own action swapped into the joint
    action, scored by the critic after its step, as DDPG takes it)."""
    import copy

    agent, env = make_agent("maddpg", "SpreadContinuous-v0", recurrent="gru", recurrent_dim=8,
                            batch_size=400, gamma=0.9)  # fmt: skip
    for _ in range(6):
        agent.update_net(agent.explore_env(env, 16))
    torch.manual_seed(1)
    episodes = agent.sample_batch()
    t_len, b = episodes.mask.shape
    assert episodes.mask[0].all() and not episodes.mask.all()
    layout, a = agent.layout, 3
    zeros = torch.zeros(1, a, dtype=torch.bool)
    agent.actor.norm.hiddens = None  # (what the last call left: not the actor's to copy)
    actor = copy.deepcopy(agent.actor)  # as it was before the update's actor step

    def steps():
        """Each real step of each episode: (now, after, actions, rewards, terminal)."""
        for e in range(b):
            for t in range(t_len):
                if not episodes.mask[t, e]:
                    break
                actions, rewards = layout.unpack_step(episodes.actions[t, e : e + 1])
                yield (t, layout.unpack(episodes.states[t, e : e + 1]),
                       layout.unpack(episodes.next_states[t, e : e + 1]), actions, rewards[0],
                       episodes.terminals[t, e])  # fmt: skip

    def carried(memory, h, x):
        """One step of `memory` from `h` on the agents' rows `x`: the next hidden state."""
        with memory.context(h, zeros):
            memory(x)
        return memory.hiddens[0]

    critic_errors = []
    with torch.no_grad():
        target_memory = agent.actor_target.norm
        h = target_memory.initial(a)
        for t, now, after, actions, rewards, terminal in steps():
            h = target_memory.initial(a) if t == 0 else h
            h = carried(target_memory, h, with_agent_ids(now.obs)[0])
            with target_memory.context(h, zeros):
                next_actions = agent.actor_target(with_agent_ids(after.obs)[0])  # (A, U)
            q_next = agent.critic_target(agent.critic_states(after.state),
                                         next_actions.flatten().repeat(a, 1))  # fmt: skip
            target = rewards + 0.9 * (~terminal).float() * q_next.view(a)
            q = agent.critic(agent.critic_states(now.state), actions.flatten(1).repeat(a, 1))
            critic_errors.append((target - q.view(a)).square().mean().item())
    logs, _ = agent.update_step(episodes)
    assert logs["critic_loss"].item() == pytest.approx(np.mean(critic_errors), rel=1e-4)
    actor_q = []
    with torch.no_grad():
        h = actor.norm.initial(a)
        for t, now, _, actions, _, _ in steps():
            h = actor.norm.initial(a) if t == 0 else h
            with actor.norm.context(h, zeros):
                mine = actor(with_agent_ids(now.obs)[0])  # (A, U) from each agent's memory
            h = actor.norm.hiddens[0]
            own = actions[0].repeat(a, 1, 1)  # agent i's row: its own action swapped in
            own[torch.arange(a), torch.arange(a)] = mine
            q = agent.critic(agent.critic_states(now.state), own.flatten(1))
            actor_q.append(q.mean().item())
    assert logs["actor_loss"].item() == pytest.approx(-np.mean(actor_q), rel=1e-4)


@pytest.mark.parametrize(("kind", "width"), [("gru", 32), ("lstm", 64)])
def test_recurrent_agents_explore_act_and_save_a_policy(tmp_path, kind, width):
    """GRU or LSTM agents keep one hidden state per sub-env and agent while exploring (zeroed
    where an episode ends), the evaluator's policy keeps its own, masks hold, a saved recurrent
    policy acts as the agent's, and the refusals are clear (PER, `act`); its export is
    `tests/test_export.py`'s."""
    from xiaoyarl.agents.multi import AgentRecurrentVDN, AgentVDN

    memory = {"recurrent": kind, "recurrent_dim": 32}  # an LSTM's state: its h and c
    agent, env = make_agent("vdn", "SpreadDiscrete-v0", **memory)
    assert isinstance(agent, AgentRecurrentVDN)  # the variant chosen once, at construction
    assert type(make_agent("vdn", "SpreadDiscrete-v0")[0]) is AgentVDN
    rollout = agent.explore_env(env, 25)  # one whole episode of every sub-env: all just reset
    assert agent.hidden.shape == (4 * 3, width) and agent.hidden.abs().sum() == 0
    agent.explore_env(env, 3)
    assert agent.hidden.abs().sum() > 0
    assert rollout.truncates[-1].all()
    with pytest.raises(ValueError, match="evaluation_policy"):
        agent.act(torch.zeros(4, 3, env.spec.obs_dim))
    config = Config(algo="qmix", env_id="SpreadDiscrete-v0", num_envs=4, horizon_len=25,
                    max_steps=400, eval_every=200, eval_episodes=2, cwd=str(tmp_path / "r"),
                    threads=1, **memory, **{**SMALL, "batch_size": 50})  # fmt: skip
    summary = train_agent(config, log=None)
    assert math.isfinite(summary["final_eval_mean"])
    policy = load_policy(tmp_path / "r")
    assert policy.recurrent
    trained, _ = make_agent("qmix", "SpreadDiscrete-v0", **memory)
    trained.qnet.load_state_dict(load_plain(tmp_path / "r" / "actor.pt")["actor"])
    greedy = trained.evaluation_policy()
    obs = torch.randn(5, 6, 3, env.spec.obs_dim)  # 5 steps of 6 envs
    avail = torch.rand(5, 6, 3, 5) < 0.6
    avail[..., 0] = True
    for t in range(5):  # the same hidden states step by step
        want = greedy(obs[t], avail[t])
        got = policy.predict(obs[t].numpy(), avail=avail[t].numpy())
        np.testing.assert_array_equal(got, want.numpy())
        assert avail[t].gather(2, want.unsqueeze(2)).all()
    policy.reset()
    greedy.reset()
    np.testing.assert_array_equal(policy.predict(obs[0].numpy()), greedy(obs[0]).numpy())
    greedy.reset()
    state = None  # the same steps with the hidden states carried by the caller
    for t in range(5):
        got, state = policy.step(obs[t].numpy(), state, avail=avail[t].numpy())
        np.testing.assert_array_equal(got, greedy(obs[t], avail[t]).numpy())
        assert state.shape == (6, 3, width)
    restarted, _ = policy.step(obs[0].numpy(), state, episode_start=np.ones(6, bool))
    np.testing.assert_array_equal(restarted, policy.step(obs[0].numpy())[0])
    with pytest.raises(ConfigError, match="per"):
        check_config(Config(algo="qmix", env_id="SpreadDiscrete-v0", per=True, **memory))


# --- MAPPO's value loss, masked relaxed actions, priorities of joint TD errors -----------------
def mappo_value_loss_reference(value, old, target, clip, delta):
    """The MAPPO reference implementation's `cal_value_loss`, sample by sample: the Huber
    loss of the error of the prediction and of the prediction clipped to +-clip around the
    one before the update, the larger of the two (all in standardised units). Times 2: PPO's
    update halves the value loss (0.5 * squared error)."""

    def huber(error):
        return error**2 / 2 if abs(error) <= delta else delta * (abs(error) - delta / 2)

    losses = []
    for v, v_old, g in zip(value.tolist(), old.tolist(), target.tolist(), strict=True):
        v_clipped = v_old + min(max(v - v_old, -clip), clip)
        losses.append(2 * max(huber(g - v), huber(g - v_clipped)))
    return torch.tensor(losses)


def test_mappo_value_loss_is_the_papers_clipped_huber_loss():
    """MAPPO's defaults, as its paper's code: the standardised prediction clipped to
    +-ratio_clip around the critic's output before the update, the Huber loss (delta 10) of
    both errors, the larger one; both switched off, the plain squared error of before. The
    Huber loss is the symmetric one (the paper's code gives errors below -delta no loss)."""
    agent, env = make_agent("mappo", "SpreadDiscrete-v0")
    cfg = agent.config
    assert (cfg.value_clip, cfg.value_loss, cfg.huber_delta) == (True, "huber", 10.0)
    agent.value_norm.mean.fill_(3.0)
    agent.value_norm.var.fill_(4.0)
    states = torch.randn(6, env.spec.state_dim + 3)
    with torch.no_grad():
        value = agent.critic(states)
    # (old - value, target - value): clipping binds and raises the loss; Huber's linear part;
    # both; neither; clipping binds but the unclipped error is the larger; the old prediction
    # on the far side
    old = value + torch.tensor([0.5, 0.0, 1.0, 0.1, 0.5, -3.0])
    target = value + torch.tensor([-1.0, 25.0, -30.0, 0.3, 1.0, 12.0])
    returns = target * 2.0 + 3.0  # standardised by the running mean 3 and variance 4
    got = agent.value_loss(states, returns, old)
    want = mappo_value_loss_reference(value, old, target, cfg.ratio_clip, 10.0)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert want[0] == pytest.approx(1.3**2)  # clipped: the prediction moved 0.2, not 0.5
    assert want[1] == pytest.approx(2 * 10 * (25 - 5))  # Huber's linear part
    plain = (agent.critic(states) - (returns - 3.0) / (4.0 + 1e-8) ** 0.5).square()
    assert not torch.allclose(got, plain)
    off, _ = make_agent("mappo", "SpreadDiscrete-v0", value_clip=False, value_loss="mse")
    off.critic.load_state_dict(agent.critic.state_dict())
    off.value_norm.load_state_dict(agent.value_norm.state_dict())
    assert torch.equal(off.value_loss(states, returns, old), plain)


def test_mappo_clips_around_the_critics_outputs_before_the_update(monkeypatch):
    """Every mini-batch's old values are the critic's (standardised) outputs on its samples
    before the update's first step, as the rollout's collecting critic gave them."""
    import copy

    agent, env = make_agent("mappo", "SpreadDiscrete-v0")
    rollout = agent.explore_env(env, 8)
    before = copy.deepcopy(agent.critic)
    seen = []
    value_loss = agent.value_loss

    def spy(critic_states, returns, old_values, *rest):
        seen.append((critic_states, old_values))
        return value_loss(critic_states, returns, old_values, *rest)

    monkeypatch.setattr(agent, "value_loss", spy)
    agent.update_net(rollout)
    assert len(seen) > 1
    with torch.no_grad():
        for critic_states, old_values in seen:
            torch.testing.assert_close(old_values, before(critic_states))
        assert not torch.allclose(agent.critic(seen[-1][0]), seen[-1][1])  # the critic moved


@pytest.mark.parametrize("algo", ["maddpg", "matd3"])
def test_discrete_actor_update_relaxes_only_available_actions(algo, monkeypatch):
    """The Gumbel-softmax actions the critic scores in the actor's update weigh unavailable
    actions 0 (as exploring and the target actions do), and the gradients stay finite."""
    from dataclasses import replace

    from xiaoyarl.core.buffer import Batch

    env = make_multi_agent_env("SpreadDiscrete-v0", 4, seed=0)
    spec = replace(env.spec, has_action_mask=True)
    config = Config(algo=algo, env_id="SpreadDiscrete-v0", num_envs=4, **SMALL)
    config = resolve_config(config, batched=True)
    torch.manual_seed(0)
    agent = agent_class(algo, spec)(spec, config, torch.device("cpu"))
    b, a, u = 64, spec.num_agents, spec.action_dim
    avail = torch.rand(b, a, u) < 0.3
    avail[..., 0] = True  # action 0 (no move) always available
    states = agent.layout.pack(torch.randn(b, a, spec.obs_dim), torch.randn(b, spec.state_dim),
                               avail)  # fmt: skip
    actions = torch.zeros(b, a, dtype=torch.int64)
    rewards = torch.randn(b, a)
    not_done = torch.zeros(b, dtype=torch.bool)
    batch = Batch(states, agent.layout.pack_step(actions, rewards), rewards.mean(1), not_done,
                  states, torch.arange(b), torch.ones(b), torch.full((b,), 0.99))  # fmt: skip
    seen = []
    critic_q_for_actor = agent.critic_q_for_actor

    def spy(critic_states, joint_actions):
        joint_actions.retain_grad()
        seen.append(joint_actions)
        return critic_q_for_actor(critic_states, joint_actions)

    monkeypatch.setattr(agent, "critic_q_for_actor", spy)
    agent.update_step(batch)
    (joint,) = seen
    slots = joint.view(b, a, a, u)  # (B, agent whose Q, agent slot, U)
    own = slots[:, torch.arange(a), torch.arange(a)]  # (B, A, U) each agent's relaxed action
    assert torch.equal(own[~avail], torch.zeros_like(own[~avail]))
    torch.testing.assert_close(own.sum(-1), torch.ones(b, a))
    assert torch.isfinite(joint.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in agent.actor.parameters())


@pytest.mark.parametrize("algo", ["maddpg", "matd3"])
def test_centralized_critic_priority_is_the_mean_absolute_td_error(algo):
    """Prioritized replay gets the mean of the agents' (and critics') absolute TD errors:
    errors +1 and -1 give priority 1, not 0."""
    from xiaoyarl.core.buffer import Batch

    agent, env = make_agent(algo, "TwoStepGame-v0")  # two agents
    rollout = agent.explore_env(env, 4)
    states = rollout.states.flatten(0, 1)
    actions, _ = agent.layout.unpack_step(rollout.actions.flatten(0, 1))  # (B, 2)
    b = states.shape[0]
    taken = agent.for_every_agent(agent.joint_features(actions))
    with torch.no_grad():
        state = agent.critic_states(agent.layout.unpack(states).state)
        q = agent.critic_q(state, taken).view(-1, b, 2)  # (critics, B, agents)
    rewards = q[0] + torch.tensor([1.0, -1.0])  # terminal steps: TD errors +1 and -1
    batch = Batch(states, agent.layout.pack_step(actions, rewards), rewards.mean(1),
                  torch.ones(b, dtype=torch.bool), rollout.next_states.flatten(0, 1),
                  torch.arange(b), torch.ones(b), torch.full((b,), 0.99))  # fmt: skip
    _, priorities = agent.update_step(batch)
    want = torch.tensor([
        sum(abs(rewards[i, j] - q[c, i, j]) for c in range(q.shape[0]) for j in range(2))
        / (2 * q.shape[0]) for i in range(b)
    ])  # fmt: skip
    torch.testing.assert_close(priorities, want)
    if algo == "maddpg":  # one critic
        torch.testing.assert_close(priorities, torch.ones(b))


def test_pqn_vdn_targets_stay_finite_when_an_agent_has_no_available_action():
    """An agent state with no allowed action (every mask entry off) adds a finite value to
    max Q_tot, as in VDN and QMIX: none of the rollout's targets turns NaN."""
    pytest.importorskip("pettingzoo")
    agent, env = make_agent("pqn_vdn", "test_pettingzoo_adapter:make_masked")
    rollout = agent.explore_env(env, 8)
    after = agent.layout.unpack(rollout.next_states)
    avail = after.avail.clone()
    avail[3, :, 0] = False  # agent 0 of every sub-env at step 3 has nothing to do
    blocked = rollout._replace(next_states=agent.layout.pack(
        after.obs.flatten(0, 1), after.state.flatten(0, 1), avail.flatten(0, 1)
    ).view_as(rollout.next_states))  # fmt: skip
    targets = agent.q_lambda_targets(blocked)
    assert torch.isfinite(targets).all()
    torch.testing.assert_close(targets[4:], agent.q_lambda_targets(rollout)[4:])
