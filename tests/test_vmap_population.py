"""Vmapped populations (`population/vmap.py`): the stacked update against each member's own
`AgentPPO.ppo_update` and `AgentPQN.pqn_update`, and whole populations through the CLI with
`--population-backend vmap`."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import torch

from xiaoyarl.agents.a2c import AgentA2C, AgentDiscreteA2C
from xiaoyarl.agents.ppo import AgentDiscretePPO, AgentPPO, Rollout
from xiaoyarl.agents.pqn import AgentPQN
from xiaoyarl.agents.pqn import Rollout as PQNRollout
from xiaoyarl.agents.registry import agent_class
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.config import Config
from xiaoyarl.core.optim import clip_grad_norm
from xiaoyarl.envs import make_env
from xiaoyarl.errors import ConfigError
from xiaoyarl.population.plots import read_population_csv
from xiaoyarl.population.schemes import PopulationConfig
from xiaoyarl.population.vmap import VmapPPO, VmapPQN, VmapReplay, member_spec, vmapped_form
from xiaoyarl.train.checkpoint import load_plain

MEMBERS, SUB_ENVS, HORIZON = 3, 4, 16
# per member: learning_rate, clip_grad_norm, lambda_entropy, ratio_clip
HPARAMS = [(3e-4, 0.5, 0.0, 0.2), (1e-3, 0.1, 0.01, 0.1), (3e-3, 1.0, 0.1, 0.3)]


def _members(env_id: str, lrs: list[float] | None = None, algo: str = "ppo", **settings):
    env = make_env(env_id, MEMBERS * SUB_ENVS, seed=1)
    spec = member_spec(env, MEMBERS)
    agent_class = {"ppo": (AgentPPO, AgentDiscretePPO),
                   "a2c": (AgentA2C, AgentDiscreteA2C)}[algo][spec.if_discrete]  # fmt: skip
    agents = []
    for i, (lr, clip, entropy, ratio_clip) in enumerate(HPARAMS):
        config = resolve_config(Config(algo=algo, env_id=env_id, seed=i, num_envs=SUB_ENVS,
                        horizon_len=HORIZON, learning_rate=lrs[i] if lrs else lr,
                        clip_grad_norm=clip, lambda_entropy=entropy,
                        ratio_clip=ratio_clip, **settings), True, "cpu")  # fmt: skip
        torch.manual_seed(i)
        agents.append(agent_class(spec, config, torch.device("cpu")))
    return env, agents


def _max_difference(agents, references) -> float:
    """The largest difference between the agents' and the references' networks (weights and
    statistics: PPO's reward scaler and value normaliser, normalisers inside the networks) and
    their optimizers' Adam state."""
    worst = 0.0
    for agent, ref in zip(agents, references, strict=True):
        for name in agent.nets:
            mine, theirs = agent.nets[name].state_dict(), ref.nets[name].state_dict()
            for key in mine:
                worst = max(worst, (mine[key].double() - theirs[key].double()).abs().max().item())
        for name in agent.optimizers:
            mine = agent.optimizers[name].state_dict()["state"]
            theirs = ref.optimizers[name].state_dict()["state"]
            assert mine.keys() == theirs.keys()
            for j in mine:
                for field in ("step", "exp_avg", "exp_avg_sq"):
                    d = (mine[j][field].double() - theirs[j][field].double()).abs().max().item()
                    worst = max(worst, d)
    return worst


def _ppo_update(agent, rollout: list) -> None:
    agent.ppo_update(Rollout(*rollout))


def _pqn_update(agent, rollout: list) -> None:
    agent.pqn_update(PQNRollout(*rollout))


def _own_update_net(agent, rollout: list) -> None:
    agent.update_net(agent.rollout_class(*rollout))


def _update_both(env, agents, updates: int, stacked=VmapPPO, own_update=_ppo_update,
                 rows: int = SUB_ENVS) -> list:  # fmt: skip
    """`updates` rollouts, each updated stacked (`stacked(agents)`) and by every member's own
    update (`own_update(agent, its part of the rollout)`, PPO's by default) with the same
    mini-batch order (over `rows` sub-envs of the update a member); returns the members' own
    (reference) agents."""
    model = stacked(agents)
    model.last_state = model.next_observation(*env.reset(seed=0))
    references = [copy.deepcopy(a) for a in agents]
    size = HORIZON * rows
    config = agents[0].config
    num_updates = max(1, int(config.repeat_times * size / config.batch_size))
    num_perms = -(-num_updates * config.batch_size // size)
    for u in range(updates):
        rollout = model.explore_env(env, HORIZON)
        orders = []
        for i in range(MEMBERS):  # the permutations a member's own update draws after this seed
            torch.manual_seed(100 * u + i)
            orders.append(torch.cat([torch.randperm(size) for _ in range(num_perms)]))
        model.update(rollout, torch.stack(orders))
        for i, ref in enumerate(references):
            torch.manual_seed(100 * u + i)
            own_update(ref, [None if x is None else x[:, i] for x in rollout])
    model.write_back()
    return references


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_vmapped_update_equals_each_members_own_update(env_id):
    """Each member's own learning rate, gradient clip, entropy weight and clip range; weights,
    normaliser and reward statistics, and Adam moments and steps agree to 1e-5."""
    torch.manual_seed(0)
    env, agents = _members(env_id)
    references = _update_both(env, agents, updates=1)
    assert _max_difference(agents, references) < 1e-5
    first = next(iter(agents[0].optimizers["actor"].state_dict()["state"].values()))
    assert first["step"].item() == 16  # 4 epochs x 4 mini-batches were taken
    assert agents[0].optimizers["actor"].param_groups[0]["lr"] == HPARAMS[0][0]


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_vmapped_a2c_update_equals_each_members_own_update(env_id):
    """A2C's members stack as PPO's (its own objective in its `ppo_loss`; one step a rollout),
    each with its own learning rate, gradient clip and entropy weight."""
    torch.manual_seed(0)
    env, agents = _members(env_id, algo="a2c")
    assert vmapped_form(type(agents[0])) is VmapPPO
    references = _update_both(env, agents, updates=2)
    assert _max_difference(agents, references) < 1e-5
    first = next(iter(agents[0].optimizers["actor"].state_dict()["state"].values()))
    assert first["step"].item() == 2  # one step on each of the 2 rollouts


def test_vmapped_update_runs_the_agents_own_value_loss():
    """The critic's loss is `AgentPPO.value_loss` itself: value normalisation, the clipped value
    loss (each member's clip range) and the Huber loss train as in each member's own update."""
    torch.manual_seed(0)
    env, agents = _members("Pendulum-v1", value_norm=True, value_clip=True, value_loss="huber",
                           huber_delta=0.5)  # fmt: skip
    references = _update_both(env, agents, updates=2)
    assert _max_difference(agents, references) < 1e-5
    norm = agents[0].value_norm
    assert norm is not None  # it merged both rollouts' returns
    assert norm.count.item() == pytest.approx(2 * HORIZON * SUB_ENVS, abs=1e-3)


def test_vmapped_optimizer_step_is_each_members_own_bit_for_bit():
    """Gradient clipping and Adam on the stacked weights are `core/optim.py`'s, member by member:
    the same bits as each member's own `clip_grad_norm` and optimizer step."""
    env, agents = _members("Pendulum-v1")
    model = VmapPPO(agents)
    references = [copy.deepcopy(a) for a in agents]
    torch.manual_seed(0)
    for _ in range(3):
        grads = {k: torch.randn_like(v) * 3 for k, v in model.params.items()}
        for i, ref in enumerate(references):
            for name, keys in model.groups.items():
                net = ref.nets[name]
                for k, (_, p) in zip(keys, net.named_parameters(), strict=True):
                    p.grad = grads[k][i].clone()
                clip_grad_norm(list(net.parameters()), ref.config.clip_grad_norm)
                ref.optimizers[name].step()
        model._optimizer_steps(grads)
    model.write_back()
    for agent, ref in zip(agents, references, strict=True):
        for name in ("actor", "critic"):
            for a, b in zip(agent.nets[name].parameters(), ref.nets[name].parameters(),
                            strict=True):  # fmt: skip
                assert torch.equal(a, b)
            mine = agent.optimizers[name].state_dict()["state"]
            theirs = ref.optimizers[name].state_dict()["state"]
            for j in theirs:
                for field in ("step", "exp_avg", "exp_avg_sq"):
                    assert torch.equal(mine[j][field], theirs[j][field])


def test_vmapped_updates_agree_exactly_in_double_precision():
    """Several rollouts at large learning rates (float32 rounding grows there): the same
    arithmetic, to 1e-9 in float64."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        env, agents = _members("Pendulum-v1", lrs=[1e-3, 1e-2, 3e-2])
        references = _update_both(env, agents, updates=3)
        assert _max_difference(agents, references) < 1e-9
    finally:
        torch.set_default_dtype(default)


def _pqn_members(lrs: tuple[float, ...], clips: tuple[float, ...], **settings):
    env = make_env("CartPole-v1", MEMBERS * SUB_ENVS, seed=1)
    spec = member_spec(env, MEMBERS)
    agents = []
    for i in range(MEMBERS):
        config = resolve_config(Config(algo="pqn", env_id="CartPole-v1", seed=i,
                                       num_envs=SUB_ENVS, horizon_len=HORIZON,
                                       learning_rate=lrs[i], clip_grad_norm=clips[i],
                                       explore_decay_steps=200 * (i + 1), **settings),
                                True, "cpu")  # fmt: skip
        torch.manual_seed(i)
        agents.append(AgentPQN(spec, config, torch.device("cpu")))
    return env, agents


@pytest.mark.parametrize("state_norm, dtype, lrs, tolerance, optimizer", [
    (False, torch.float32, (5e-4, 1e-3, 2e-3), 1e-5, "adam"),
    (True, torch.float32, (5e-4, 1e-3, 2e-3), 1e-5, "adam"),
    # large learning rates (float32 rounding grows there): the same arithmetic in float64
    (True, torch.float64, (5e-4, 3e-3, 1e-2), 1e-9, "adam"),
    (False, torch.float32, (5e-4, 1e-3, 2e-3), 1e-5, "radam"),  # PQN's paper's optimizer
])  # fmt: skip
def test_vmapped_pqn_update_equals_each_members_own_update(state_norm, dtype, lrs, tolerance,
                                                           optimizer):  # fmt: skip
    """PQN members with their own learning rate, gradient clip and epsilon schedule: after two
    rollouts, weights (and normaliser statistics), Adam's (or RAdam's) moments and steps agree
    with each member's own `pqn_update`; each explored with its own epsilon."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        _check_vmapped_pqn_update(state_norm, lrs, tolerance, optimizer)
    finally:
        torch.set_default_dtype(default)


def _check_vmapped_pqn_update(state_norm: bool, lrs: tuple, tolerance: float,
                              optimizer: str) -> None:  # fmt: skip
    env, agents = _pqn_members(lrs, (10.0, 0.1, 1.0), state_norm=state_norm, optimizer=optimizer)
    references = _update_both(env, agents, 2, VmapPQN, _pqn_update)
    assert _max_difference(agents, references) < tolerance
    size = HORIZON * SUB_ENVS
    # each member counted its own env steps, so each is at its own point of its epsilon schedule
    assert [a.explored for a in agents] == [2 * size] * MEMBERS
    expected = [1 - 0.95 * min(1, 2 * size / (200 * (i + 1))) for i in range(MEMBERS)]
    assert [a.epsilon() for a in agents] == pytest.approx(expected)
    steps = next(iter(agents[0].optimizers["qnet"].state_dict()["state"].values()))["step"]
    assert steps.item() == 2 * 4 * 8  # 2 rollouts x 4 epochs x 8 mini-batches


def test_vmapped_pqn_members_explore_with_their_own_epsilon():
    """A member at epsilon 1 acts at random, one at epsilon 0 greedily, in the same rollout."""
    env, agents = _pqn_members((5e-4,) * 3, (10.0,) * 3)
    for agent, decay in zip(agents, (10**9, 1, 1), strict=True):
        agent.config.explore_decay_steps = decay
        agent.config.explore_rate = 0.0
    agents[2].explored = 10  # past its one-step decay: greedy from the start
    model = VmapPQN(agents)
    state, _ = env.reset(seed=0)
    model.last_state = state
    rollout = model.explore_env(env, 64)
    for i in (0, 2):
        greedy = agents[i].qnet(rollout.states[:, i].flatten(0, 1))
        agree = (greedy == rollout.actions[:, i].flatten()).float().mean().item()
        assert (agree < 0.8) if i == 0 else (agree == 1.0)


@pytest.mark.parametrize(("algo", "env_id"), [("mappo", "SpreadDiscrete-v0"),
                                              ("mappo", "SpreadContinuous-v0"),
                                              ("pqn_vdn", "SpreadDiscrete-v0")])  # fmt: skip
def test_vmapped_multi_agent_update_equals_each_members_own_update(algo, env_id):
    """MAPPO and PQN-VDN members (each its own learning rate): their joint steps packed and
    recorded member by member, then two rollouts' updates, stacked and by each member's own
    `update_net` with the same mini-batch order, agree to 1e-5 (weights, normalisers, value
    and reward statistics, Adam's state)."""
    from xiaoyarl.envs.multi import make_multi_agent_env

    env = make_multi_agent_env(env_id, MEMBERS * SUB_ENVS, seed=1)
    spec = member_spec(env, MEMBERS)
    agents = []
    for i, lr in enumerate((3e-4, 1e-3, 3e-3)):
        config = resolve_config(Config(algo=algo, env_id=env_id, seed=i, num_envs=SUB_ENVS,
                                       horizon_len=HORIZON, learning_rate=lr, batch_size=32),
                                True, "cpu")  # fmt: skip
        torch.manual_seed(i)
        agents.append(agent_class(algo, spec)(spec, config, torch.device("cpu")))
    rows = SUB_ENVS * (spec.num_agents if algo == "mappo" else 1)  # its update's sub-envs
    stacked = vmapped_form(type(agents[0]))
    references = _update_both(env, agents, 2, stacked, _own_update_net, rows)
    assert _max_difference(agents, references) < 1e-5


def _replay_members(algo: str, env_id: str, **settings):
    """Three `algo` members with their own learning rate and gradient clip, their buffers
    filled by one vmapped rollout of 48 env steps each (the warm-up: random actions)."""
    from xiaoyarl.envs.build import build_env

    config = Config(algo=algo, env_id=env_id)
    env = build_env(config, MEMBERS * SUB_ENVS, torch.device("cpu"), "torch", 1)
    spec = member_spec(env, MEMBERS)
    agents = []
    for i, (lr, clip) in enumerate([(1e-3, 0.5), (3e-3, 10.0), (5e-4, 0.05)]):
        config = resolve_config(Config(algo=algo, env_id=env_id, seed=i, num_envs=SUB_ENVS,
                                       horizon_len=12, learning_rate=lr, clip_grad_norm=clip,
                                       net_dims=[32, 32], batch_size=16, learning_starts=64,
                                       **settings), True, "cpu")  # fmt: skip
        torch.manual_seed(i)
        agents.append(agent_class(algo, spec)(spec, config, torch.device("cpu")))
    model = vmapped_form(type(agents[0]))(agents)
    assert isinstance(model, VmapReplay)
    model.last_state = model.next_observation(*env.reset(seed=0))
    assert model.update(model.explore_env(env, 12)) == {}  # stored; learning starts after it
    model.write_back()  # (the agents take the stacked normalisers' statistics)
    assert all(a.buffer.num_sampleable == 44 for a in agents)  # each member's own 48 steps
    return env, model


@pytest.mark.parametrize(("algo", "env_id", "settings"), [
    ("dqn", "CartPole-v1", {}), ("d3qn", "CartPole-v1", {"n_step": 3}),
    ("ddpg", "Pendulum-v1", {}), ("ddpg", "Pendulum-v1", {"state_norm": True}),
    # the value decompositions: the agent network and QMIX's mixer on the team's TD error
    ("vdn", "SpreadDiscrete-v0", {}), ("qmix", "SpreadDiscrete-v0", {"reward_norm": True}),
    # MADDPG's centralized critics on the joint actions, its actor in each agent's slot
    ("maddpg", "SpreadContinuous-v0", {}),
])  # fmt: skip
def test_vmapped_replay_steps_equal_each_members_own(algo, env_id, settings):
    """The DQN family, DDPG, VDN, QMIX and MADDPG (whose steps draw nothing at random): five
    gradient steps on the same batches, stacked and by each member's own `gradient_step` (its
    own learning rate and gradient clip), leave weights, targets and Adam's state equal; the
    targets moved."""
    env, model = _replay_members(algo, env_id, **settings)
    references = [copy.deepcopy(a) for a in model.agents]
    before = [copy.deepcopy(a.nets) for a in model.agents]
    for _ in range(5):
        batch = model.sample()
        model.gradient_step(batch)
        for i, ref in enumerate(references):
            ref.gradient_step(type(batch)._make(x[i] for x in batch))
    model.write_back()
    assert _max_difference(model.agents, references) < 1e-5
    assert [a.updates for a in model.agents] == [5] * MEMBERS == [r.updates for r in references]
    target = "critic_target" if algo in ("ddpg", "maddpg") else "qnet_target"
    moved = [
        (a - b).abs().max().item()
        for a, b in zip(
            model.agents[0].nets[target].parameters(), before[0][target].parameters(), strict=True
        )
    ]
    assert max(moved) > 0


@pytest.mark.parametrize(("algo", "env_id"), [("td3", "Pendulum-v1"), ("sac", "Pendulum-v1"),
                                              ("modsac", "Pendulum-v1"), ("redq", "Pendulum-v1"),
                                              ("sac_discrete", "CartPole-v1"),
                                              ("fast_td3", "Pendulum-v1"),
                                              ("matd3", "SpreadContinuous-v0"),
                                              ("maddpg", "SpreadDiscrete-v0")])  # fmt: skip
def test_vmapped_replay_members_keep_their_own_schedules(algo, env_id):
    """The algorithms whose steps draw at random (smoothing noise, policy samples, REDQ's
    subsets, MADDPG's Gumbel-softmax actions): each member steps its critics every gradient
    step and its actor (and SAC's temperature) on its own schedule, as its own agent does:
    TD3's and MATD3's every 2nd step, ModSAC's by its own critic loss, REDQ's every G-th;
    FastTD3's per-sub-env noise stds stay stacked and are each member's own."""
    noise = {"explore_noise_std_max": 0.4, "replay_ratio": 0.25} if algo == "fast_td3" else {}
    env, model = _replay_members(algo, env_id, **noise)
    references = [copy.deepcopy(a) for a in model.agents]
    for _ in range(4):
        batch = model.sample()
        logs = model.gradient_step(batch)
        for i, ref in enumerate(references):
            ref_logs = ref.gradient_step(type(batch)._make(x[i] for x in batch))
            assert ("actor_loss" in ref_logs) == ("actor_loss" in logs)
    model.write_back()
    for agent, ref in zip(model.agents, references, strict=True):
        for name, optimizer in agent.optimizers.items():
            steps = [s["step"].item() for s in optimizer.state_dict()["state"].values()]
            theirs = [s["step"].item() for s in ref.optimizers[name].state_dict()["state"].values()]
            assert steps == theirs, name
    if algo == "fast_td3":  # past the warm-up, its noise explores (and learning goes on)
        for _ in range(2):
            assert model.update(model.explore_env(env, 12))["critic_loss"].shape == (MEMBERS,)
        model.write_back()
        stds = model.exploring["noise_stds"]
        assert stds.shape == (MEMBERS, SUB_ENVS, 1) and stds.unique().numel() > SUB_ENVS
        assert torch.equal(model.agents[1].noise.stds, stds[1])


def _cli(*args: str) -> subprocess.CompletedProcess:
    """`xiaoyarl population ARGS` on one thread (a vmapped population takes every core by
    default, and the tests run two at a time: oversubscribed, a run is many times slower)."""
    threads = [] if args[0] == "--resume" else ["--threads", "1"]  # a resume keeps the run's
    return subprocess.run([sys.executable, "-m", "xiaoyarl", "population", *args, *threads],
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def _population_learns_cartpole(tmp_path, algo: str, space: str, steps: int, net: str):
    """A vmapped generational population of 4 `algo` members, 3 generations of `steps` / 3 env
    steps with a learning-rate search: 12 trainings, a member at CartPole's target, and every
    member's checkpoint at its steps with its own learning rate. Returns (folder, summary,
    population.csv's rows)."""
    (tmp_path / "space.yaml").write_text(f"learning_rate: {space}\n")
    out = tmp_path / "pop"
    result = _cli(algo, "CartPole-v1", "--members", "4", "--population-backend", "vmap",
                  "--max-steps", str(steps), "--generation-steps", str(steps // 3), "--search",
                  str(tmp_path / "space.yaml"), "--cwd", str(out), "--target-return", "none",
                  "--summary-json", str(tmp_path / "summary.json"))  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    rows = read_population_csv(out)
    assert sum(r["event"] == "trained" for r in rows) == 12  # 4 members x 3 generations
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["done"] and summary["best_score"] >= 475  # CartPole's target
    for name, member in summary["members"].items():
        checkpoint = load_plain(out / "members" / name / "checkpoint" / "state.pt")
        assert checkpoint["counters"]["total_steps"] == member["steps"] >= steps
        lr = checkpoint["agent"]["optimizers"][net]["param_groups"][0]["lr"]
        assert lr == pytest.approx(member["hparams"]["learning_rate"])
    return out, summary, rows


@pytest.mark.learning
@pytest.mark.timeout(600)
def test_vmapped_generational_population_learns_cartpole(tmp_path):
    out, summary, rows = _population_learns_cartpole(
        tmp_path, "ppo", "{log_uniform: [1.0e-4, 1.0e-2]}", 60000, "actor"
    )
    exploits = [r for r in rows if r["event"] == "exploit"]
    assert len(exploits) == 2  # the bottom member, at each of 2 generation boundaries
    # a member's folder is an ordinary run folder: its best policy evaluates
    play = subprocess.run([sys.executable, "-m", "xiaoyarl", "eval",
                           str(out / "members" / summary["best_member"]), "--episodes", "3"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert play.returncode == 0, play.stderr[-2000:]
    assert float(play.stdout.split(":")[1].split()[0]) >= 475
    again = _cli("--resume", str(out))  # a finished vmapped population resumes to "done"
    assert again.returncode == 0 and "population done" in again.stdout, again.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_vmapped_tournament_fills_the_leaderboard(tmp_path):
    out = tmp_path / "pop"
    result = _cli("ppo", "CartPole-v1", "--scheme", "tournament", "--members", "3",
                  "--population-backend", "vmap", "--max-steps", "20000", "--pod-steps",
                  "10000", "--leaderboard-size", "2", "--cwd", str(out), "--target-return",
                  "none")  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    rows = read_population_csv(out)
    assert sum(r["event"] == "trained" for r in rows) == 6  # budget 3 x 20k in pods of 10k
    assert sum(r["event"] == "from_leaderboard" for r in rows) == 3
    board = json.loads((out / "leaderboard" / "board.json").read_text())
    assert len(board["entries"]) == 2


@pytest.mark.learning  # 40 s; the docs tests run the same command on a tiny budget
@pytest.mark.timeout(600)
def test_vmapped_pqn_population_learns_cartpole(tmp_path):
    """PQN members with a learning-rate search, trained as one stacked model, reach CartPole's
    target; their checkpoints carry each member's own learning rate."""
    _population_learns_cartpole(tmp_path, "pqn", "{log_uniform: [2.0e-4, 2.0e-3]}", 120000,
                                "qnet")  # fmt: skip


@pytest.mark.learning  # 40 s
@pytest.mark.timeout(600)
def test_a_vmapped_population_of_sac_members_learns_pendulum(tmp_path):
    """Replay members (each its own buffer, batches and steps) with a learning-rate search,
    trained as one stacked model from SAC's defaults: 4 members, 3 generations of 4,000 env
    steps; the best reaches Pendulum's -200 (measured: -109, three of four above -200), each
    checkpoint at its steps with its own learning rate and its own replay buffer."""
    (tmp_path / "space.yaml").write_text("learning_rate: {choice: [0.0003, 0.001]}\n")
    out = tmp_path / "pop"
    result = _cli("sac", "Pendulum-v1", "--members", "4", "--population-backend", "vmap",
                  "--max-steps", "12000", "--generation-steps", "4000", "--search",
                  str(tmp_path / "space.yaml"), "--cwd", str(out), "--target-return", "none",
                  "--summary-json", str(tmp_path / "summary.json"))  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["done"] and summary["best_score"] >= -200, summary
    for name, member in summary["members"].items():
        checkpoint = load_plain(out / "members" / name / "checkpoint" / "state.pt")
        assert checkpoint["counters"]["total_steps"] == member["steps"] >= 12000
        lr = checkpoint["agent"]["optimizers"]["actor"]["param_groups"][0]["lr"]
        assert lr == pytest.approx(member["hparams"]["learning_rate"])
        buffer = checkpoint["agent"]["buffer"]  # its own transitions, one per env step
        assert buffer["size"] * buffer["num_envs"] == member["steps"]


@pytest.mark.learning
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "seed", [0, pytest.param(1, marks=pytest.mark.seeds), pytest.param(2, marks=pytest.mark.seeds)]
)
def test_a_vmapped_population_of_16_pqn_members_learns_cartpole(seed, tmp_path):
    """16 PQN members with PQN's defaults, 100k env steps each, trained as one stacked model
    (one generation, no selection): the median member ends at CartPole's target (BENCHMARKS.md,
    "Vmapped members against one member", for the wall time against one member's)."""
    summary_file = tmp_path / "summary.json"
    result = _cli("pqn", "CartPole-v1", "--members", "16", "--population-backend", "vmap",
                  "--max-steps", "100000", "--generation-steps", "100000", "--select-fraction",
                  "0", "--target-return", "none", "--seed", str(seed), "--cwd",
                  str(tmp_path / "pop"), "--summary-json", str(summary_file))  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(summary_file.read_text())
    scores = sorted(member["score"] for member in summary["members"].values())
    assert len(scores) == 16 and scores[8] >= 475, scores


@pytest.mark.parametrize("algo, space, words", [
    ("sac", {"per": {"choice": [True]}}, "not per"),
    ("ppo", {"net_dims": {"choice": [[64, 64], [32]]}}, "not net_dims"),
    ("pqn", {"ratio_clip": {"choice": [0.1, 0.2]}}, "clip_grad_norm, learning_rate of pqn"),
])  # fmt: skip
def test_vmap_backend_refuses_what_it_cannot_stack(algo, space, words):
    pop = PopulationConfig(backend="vmap", search_space=space)
    with pytest.raises(ConfigError, match=words):
        pop.validate(Config(algo=algo, env_id="Pendulum-v1"))


@pytest.mark.parametrize("settings, words", [({"per": True}, "prioritized replay .* per=true"),
                                             ({"explore_noise": "gsde"}, "gSDE")])  # fmt: skip
def test_vmapped_replay_members_refuse_what_reads_each_members_own_draws(settings, words):
    pop = PopulationConfig(backend="vmap")
    with pytest.raises(ConfigError, match=words):
        pop.validate(Config(algo="sac", env_id="Pendulum-v1", **settings))


def test_a_vmapped_population_leaves_out_a_presets_schedules_and_says_so(capsys):
    """PQN's presets decay the learning rate; vmapped members keep their values constant, so
    `population --population-backend vmap` starts from the preset with constant schedules and
    says so (before, the preset's schedule made it refuse); a schedule asked for is kept."""
    from xiaoyarl.cli import _population_settings, build_parser

    parser = build_parser()
    args = parser.parse_args(["population", "pqn", "CartPole-v1", "--population-backend", "vmap"])
    config, pop, _ = _population_settings(args)
    assert pop.backend == "vmap" and config.learning_rate_schedule == "constant"
    assert config.optimizer == "radam"  # the rest of the preset holds
    assert "learning_rate_schedule constant, not the preset's linear" in capsys.readouterr().out
    asked = parser.parse_args(["population", "pqn", "CartPole-v1", "--population-backend", "vmap",
                               "--set", "learning_rate_schedule=linear"])  # fmt: skip
    config, _, _ = _population_settings(asked)
    assert config.learning_rate_schedule == "linear"
