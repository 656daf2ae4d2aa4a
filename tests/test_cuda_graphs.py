"""CUDA-graph replay of the off-policy gradient step: the same updates as eager steps."""

import pytest
import torch

from xiaoyarl import Config, make_env, train_agent
from xiaoyarl.agents.ppo import Rollout
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.core.buffer import Batch
from xiaoyarl.core.graphs import capture_updates
from xiaoyarl.run import agent_class
from xiaoyarl.train.schedules import Schedules


def make_agent(algo: str, device: str, env_id: str | None = None, **overrides):
    discrete = algo in ("dqn", "double_dqn", "d3qn", "sac_discrete")
    env_id = env_id or ("CartPole-v1" if discrete else "Pendulum-v1")
    values = {"net_dims": [64, 64], "buffer_size": 4096, "batch_size": 32, "num_envs": 4}
    config = Config(algo=algo, env_id=env_id, **{**values, **overrides})
    config = resolve_config(config, batched=True)
    env = make_env(env_id, config.num_envs, device=device, seed=0)
    torch.manual_seed(0)
    agent = agent_class(algo, env.spec)(env.spec, config, torch.device(device))
    agent.graphed = capture_updates(agent)  # as the trainer decides
    return agent


def random_batches(spec, count: int, size: int, device: str) -> list[Batch]:
    g = torch.Generator().manual_seed(1)
    batches = []
    for _ in range(count):
        if spec.if_discrete:
            actions = torch.randint(spec.action_dim, (size,), generator=g)
        else:
            actions = torch.rand(size, spec.action_dim, generator=g) * 2 - 1
        batch = Batch(
            states=torch.randn(size, spec.state_dim, generator=g), actions=actions,
            rewards=torch.randn(size, generator=g), terminals=torch.rand(size, generator=g) < 0.1,
            next_states=torch.randn(size, spec.state_dim, generator=g),
            indices=torch.arange(size), weights=torch.rand(size, generator=g) + 0.5,
            discounts=torch.full((size,), 0.99) ** torch.randint(1, 4, (size,), generator=g),
        )  # fmt: skip
        batches.append(Batch(*(t.to(device) for t in batch)))
    return batches


@pytest.mark.parametrize(
    ("algo", "overrides", "period"),
    [
        ("dqn", {}, 1),
        ("dqn", {"target_update_every": 4, "soft_update_tau": 1.0}, 4),
        ("dqn", {"target_update_every": 1000, "soft_update_tau": 1.0}, 1000),
        ("ddpg", {}, 1),
        ("td3", {}, 2),
        ("sac", {}, 1),
        ("redq", {}, 4),
        ("redq", {"replay_ratio": 20.0}, 20),
        ("modsac", {}, None),
    ],
)
def test_update_cycle_is_when_the_steps_choices_repeat(algo, overrides, period):
    agent = make_agent(algo, "cpu", **overrides)
    assert agent.update_cycle() == period
    assert not agent.graphed  # only on CUDA


GRAPHED = [
    ("dqn", {}),
    ("double_dqn", {"target_update_every": 2, "soft_update_tau": 1.0}),
    ("d3qn", {}),
    ("ddpg", {}),
    ("td3", {}),
    ("sac", {}),
    ("sac_discrete", {}),
    ("redq", {}),
    ("redq", {"replay_ratio": 20.0}),  # 20 graphs
    ("ddpg", {"per": True}),
    ("fast_td3", {"weight_decay": 0.1}),  # AdamW, no target actor, targets every step
    ("fast_sac", {"weight_decay": 0.1, "policy_delay": 2}),
]


@pytest.mark.parametrize(("algo", "overrides"), GRAPHED)
def test_the_graph_tests_batches_feed_an_eager_step_on_the_cpu(algo, overrides):
    """The scaffolding of the `cuda` test below runs on every machine: it cannot rot unseen
    between GPU loans (it once did: the batches lacked a field that Batch had gained)."""
    agent = make_agent(algo, "cpu", **overrides)
    for batch in random_batches(agent.spec, 2, agent.config.batch_size, "cpu"):
        logs = agent.gradient_step(batch)
        assert logs and all(torch.isfinite(v).all() for v in logs.values()), logs


@pytest.mark.cuda
@pytest.mark.parametrize(("algo", "overrides"), GRAPHED)
def test_graphed_steps_equal_eager_steps(algo, overrides):
    graphed = make_agent(algo, "cuda", **overrides)
    eager = make_agent(algo, "cuda", cuda_graph=False, **overrides)
    assert graphed.graphed and not eager.graphed
    for name, net in eager.nets.items():
        net.load_state_dict(graphed.nets[name].state_dict())
    # eager warm-up (3 periods), then every phase captured and replayed at least once
    count = 4 * graphed.update_cycle() + 4
    batches = random_batches(graphed.spec, count, graphed.config.batch_size, "cuda")
    for i, batch in enumerate(batches):
        torch.cuda.manual_seed(i)  # a graph replay draws the same numbers as the eager step
        logs_graphed = graphed.gradient_step(batch)
        torch.cuda.manual_seed(i)
        logs_eager = eager.gradient_step(batch)
        assert logs_graphed.keys() == logs_eager.keys()
        for name in logs_eager:
            assert torch.allclose(logs_graphed[name], logs_eager[name], rtol=1e-4, atol=1e-5)
    graphs = graphed.update_runner.step.graphs
    assert len(graphs) == graphed.update_cycle()  # one per phase, replayed
    for name, net in graphed.nets.items():
        assert_same_state(net, eager.nets[name], name)


def assert_same_state(a: torch.nn.Module, b: torch.nn.Module, name: str) -> None:
    other = b.state_dict()
    for key, value in a.state_dict().items():
        assert torch.allclose(value, other[key], rtol=1e-4, atol=1e-5), f"{name}.{key}"


@pytest.mark.cuda
@pytest.mark.learning
@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_graphed_agent_learns_pendulum_on_cuda(tmp_path, algo):
    config = Config(algo=algo, env_id="Pendulum-v1", device="cuda", num_envs=1, max_steps=12_000,
                    eval_every=1_000, cwd=str(tmp_path / algo))  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["solved"], summary  # the env's target, -200


@pytest.mark.cuda
@pytest.mark.parametrize(
    ("algo", "env_id"), [("ppo", "Pendulum-v1"), ("ppo", "CartPole-v1"), ("a2c", "CartPole-v1")]
)
def test_graphed_ppo_update_equals_eager_update(algo, env_id):
    sizes = {"num_envs": 16, "horizon_len": 8, "batch_size": 32}
    graphed = make_agent(algo, "cuda", env_id, **sizes)
    eager = make_agent(algo, "cuda", env_id, cuda_graph=False, **sizes)
    assert graphed.graphed and not eager.graphed
    spec, g = graphed.spec, torch.Generator().manual_seed(2)
    for i in range(6):  # 3 eager warm-up updates, a capture, then replays
        shape = (8, 16)
        if spec.if_discrete:
            actions = torch.randint(spec.action_dim, shape, generator=g)
        else:
            actions = torch.randn(*shape, spec.action_dim, generator=g)
        rollout = Rollout(
            states=torch.randn(*shape, spec.state_dim, generator=g), actions=actions,
            logprobs=-torch.rand(shape, generator=g), rewards=torch.randn(shape, generator=g),
            terminals=torch.rand(shape, generator=g) < 0.05,
            truncates=torch.rand(shape, generator=g) < 0.05,
            next_states=torch.randn(*shape, spec.state_dim, generator=g),
        )  # fmt: skip
        rollout = Rollout(*(t if t is None else t.cuda() for t in rollout))
        torch.cuda.manual_seed(i)  # the same mini-batch permutation in both
        logs_graphed = graphed.update_net(rollout)
        torch.cuda.manual_seed(i)
        logs_eager = eager.update_net(rollout)
        for name in logs_eager:
            assert torch.allclose(logs_graphed[name], logs_eager[name], rtol=1e-4, atol=1e-5)
    assert len(graphed.update_runner.step.graphs) == 1
    for name, net in graphed.nets.items():
        assert_same_state(net, eager.nets[name], name)


@pytest.mark.cuda
@pytest.mark.parametrize(("algo", "overrides"), [("dqn", {"optimizer": "radam"}), ("sac", {})])
def test_graphed_steps_follow_a_scheduled_learning_rate(algo, overrides):
    """A scheduled learning rate is a device tensor the replays read: graphed steps under a
    linear decay equal eager ones, the rate falling at every step (train/schedules.py)."""
    overrides = {**overrides, "learning_rate_schedule": "linear", "max_steps": 64}
    graphed = make_agent(algo, "cuda", **overrides)
    eager = make_agent(algo, "cuda", cuda_graph=False, **overrides)
    assert graphed.graphed and not eager.graphed
    schedules = [Schedules(graphed.config, graphed), Schedules(eager.config, eager)]
    for name, net in eager.nets.items():
        net.load_state_dict(graphed.nets[name].state_dict())
    batches = random_batches(graphed.spec, 12, graphed.config.batch_size, "cuda")
    for i, batch in enumerate(batches):
        for schedule in schedules:
            schedule.apply(4 * i)
        torch.cuda.manual_seed(i)
        logs_graphed = graphed.gradient_step(batch)
        torch.cuda.manual_seed(i)
        logs_eager = eager.gradient_step(batch)
        for name in logs_eager:
            assert torch.allclose(logs_graphed[name], logs_eager[name], rtol=1e-4, atol=1e-5)
    assert graphed.update_runner.step.graphs  # replayed, not eager
    for name, net in graphed.nets.items():
        assert_same_state(net, eager.nets[name], name)
