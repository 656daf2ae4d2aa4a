"""Adding an algorithm is one agent class and one registry line (docs/reference/extending.md):
a toy algorithm registered here, with nothing else edited, is offered, checked, tuned, trained,
saved (with a module of its own around its encoder) and exported like the library's own,
because every layer reads what agent classes declare instead of lists of algorithm names."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from xiaoyarl import Config, ConfigError, load_policy
from xiaoyarl.agents import ALGORITHMS
from xiaoyarl.agents.a2c import AgentDiscreteA2C
from xiaoyarl.agents.registry import algorithms_for
from xiaoyarl.agents.settings import check_config, fields_read
from xiaoyarl.cli import main
from xiaoyarl.core.encoders import Encoder
from xiaoyarl.core.nets import ActorDiscretePPO
from xiaoyarl.envs import make_env
from xiaoyarl.export import export_policy
from xiaoyarl.population.schemes import check_vmap_population
from xiaoyarl.run import train_agent
from xiaoyarl.tune.study import default_space, tuned_algorithms

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated")


class ActorToy(ActorDiscretePPO):
    """The toy's own actor class (here A2C's, under a name no module of the library knows): a
    saved policy finds it where the agent built it from."""


class Squashed(Encoder):
    """The toy's own module around its encoder: features squashed by tanh at a `scale` of its
    constructor. A wrapper has `inner` and `init_kwargs()`; a saved policy rebuilds it."""

    def __init__(self, inner: nn.Module, scale: float) -> None:
        super().__init__()
        self.inner, self.scale, self.out_dim = inner, scale, inner.out_dim

    def init_kwargs(self) -> dict:
        return {"scale": self.scale}

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.inner(obs) / self.scale)


class AgentEntropyFreeA2C(AgentDiscreteA2C):
    """A toy: A2C for discrete actions without the entropy bonus, which it refuses, reading
    its observations through its own `Squashed` module."""

    actor_class = ActorToy

    tune_space = "a2c.yaml"  # A2C's search space suits it
    takes_h_term = False
    member_fields = frozenset()  # no vmapped form (A2C's is A2C's)

    def make_encoder(self, layer_norm: bool = False) -> Encoder:
        return Squashed(super().make_encoder(layer_norm), scale=2.5)

    @classmethod
    def check(cls, config: Config) -> None:
        if config.lambda_entropy:
            raise ConfigError(f"invalid config: lambda_entropy={config.lambda_entropy}; toy_a2c "
                              f"has no entropy bonus: set lambda_entropy=0.")  # fmt: skip

    @classmethod
    def defaults(cls, config: Config, batched: bool, device_type: str) -> dict:
        return {**super().defaults(config, batched, device_type), "eval_every": 1_000}


@pytest.fixture
def toy(monkeypatch):
    """The toy registered, as a user's own module would: one line."""
    monkeypatch.setitem(ALGORITHMS, "toy_a2c", (None, AgentEntropyFreeA2C))
    return "toy_a2c"


def test_a_registered_algorithm_is_offered_checked_and_tuned(toy, capsys):
    env = make_env("CartPole-v1", num_envs=2)
    assert toy in algorithms_for(env.spec)
    assert toy not in algorithms_for(make_env("Pendulum-v1", num_envs=2).spec)
    assert main(["list"]) == 0
    assert toy in capsys.readouterr().out
    # checked: its own check, and what it declares (no H-term, no vmapped form)
    check_config(Config(algo=toy, lambda_entropy=0.0))
    with pytest.raises(ConfigError, match="toy_a2c has no entropy bonus"):
        check_config(Config(algo=toy, lambda_entropy=0.01))
    with pytest.raises(ConfigError, match="h_term=True does not apply to toy_a2c"):
        check_config(Config(algo=toy, lambda_entropy=0.0, h_term=True))
    with pytest.raises(ConfigError, match="toy_a2c members need the process backend"):
        check_vmap_population(Config(algo=toy, lambda_entropy=0.0), {})
    assert "ratio_clip" not in fields_read(toy) and "lambda_gae_adv" in fields_read(toy)
    # tuned: the default search space it names
    assert toy in tuned_algorithms()
    assert default_space(toy) == default_space("a2c")


def test_a_registered_algorithm_trains_saves_and_exports(toy, tmp_path):
    torch.set_num_threads(1)
    config = Config(algo=toy, env_id="CartPole-v1", lambda_entropy=0.0, max_steps=2_000,
                    seed=3, cwd=str(tmp_path / "run"), eval_episodes=2)  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["total_steps"] >= 2_000
    policy = load_policy(tmp_path / "run")
    assert type(policy.actor) is ActorToy  # the agent's own actor, rebuilt from its module
    assert type(policy.actor.norm) is Squashed and policy.actor.norm.scale == 2.5  # its wrapper
    model = torch.jit.load(str(export_policy(tmp_path / "run", fmt="torchscript")))
    obs = np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32)
    assert np.array_equal(model(torch.from_numpy(obs)).numpy(), policy(obs))
