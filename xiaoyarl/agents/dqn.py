"""The DQN family: DQN, Double DQN and D3QN (dueling double DQN).

DQN: Mnih et al., "Human-level control through deep reinforcement learning", Nature 2015.
Double DQN: van Hasselt et al., "Deep Reinforcement Learning with Double Q-learning", 2016.
Dueling: Wang et al., "Dueling Network Architectures for Deep Reinforcement Learning", 2016.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch

from xiaoyarl.agents.critics import CriticLoss, q_kind
from xiaoyarl.agents.epsilon_greedy import EpsilonGreedy
from xiaoyarl.agents.off_policy import OFF_POLICY_FIELDS, AgentOffPolicy
from xiaoyarl.config import Config
from xiaoyarl.core.buffer import Batch
from xiaoyarl.core.off_policy_nets import QNet, QNetDuel
from xiaoyarl.envs.base import EnvSpec
from xiaoyarl.errors import ConfigError

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import OptimizerKit


class AgentDQN(EpsilonGreedy, AgentOffPolicy):
    """Q-learning with a replay buffer, a target network, epsilon-greedy exploration (epsilon
    decays linearly from 1 to `explore_rate` over `explore_decay_steps` env steps) and the
    Huber loss on the TD error, weighted by importance weights when replay is prioritized."""

    if_discrete = True
    config_fields = OFF_POLICY_FIELDS | {"explore_rate", "explore_decay_steps", "critic_atoms",
                                         "critic_v_min", "critic_v_max"}  # fmt: skip
    tune_space: ClassVar[str | None] = "dqn.yaml"
    qnet_class: type[QNet] = QNet

    @classmethod
    def defaults(cls, config: Config, batched: bool, device_type: str) -> dict:
        """Less gradient work than the actor-critics, as Q-learning's usual settings: one step
        of 64 transitions per 2 env steps on [64, 64] networks (Stable-Baselines3's DQN network)
        at lr 1e-3; its cheap gradient steps leave acting a large share of the time, so
        gymnasium envs get 4 sub-envs (2 steps each per rollout) instead of 1 (measured in
        BENCHMARKS.md: 4 sub-envs cost SAC and TD3 more env steps on Pendulum, so they keep 1).
        Evaluations every 2,000 env steps; epsilon decays over the first 10,000."""
        return {
            "num_envs": config.num_envs or (16 if batched else 4),
            "horizon_len": 1 if batched else 2,
            "batch_size": 64,
            "replay_ratio": 0.5,
            "learning_rate": 1e-3,
            "net_dims": [64, 64],
            "state_norm": False,
            "reward_norm": False,
            "eval_every": 2_000,
            "explore_decay_steps": 10_000,
        }

    def __init__(self, spec: EnvSpec, config: Config, device: torch.device, learner: bool = True,
                 kit: OptimizerKit | None = None) -> None:  # fmt: skip
        super().__init__(spec, config, device, learner, kit)
        assert config.net_dims is not None, "resolve_config sets net_dims"
        self.q_kind = q_kind(config)  # expected values, or C51's distributions
        self.qnet: QNet = self.q_kind.build(self, self.make_encoder())
        self.qnet.to(device)
        self.qnet_target: QNet = self.make_target(self.qnet)
        self.actor = self.qnet  # the greedy policy
        self.nets = {"qnet": self.qnet, "qnet_target": self.qnet_target}
        self.optimizers = {"qnet": self.make_optimizer(self.qnet)}

    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        greedy = self.qnet(state)
        return self.epsilon_greedy(greedy, self.qnet.random_like(greedy))

    def next_q(self, next_states: torch.Tensor) -> torch.Tensor:
        """Q_target(s', a') `(B,)` of the next action a' that `next_action` picks (with
        branches, the mean over them)."""
        q = self.qnet_target.q_values(next_states)
        return self.qnet.state_values(q, self.next_action(next_states, q))

    def next_action(self, next_states: torch.Tensor, target_q: torch.Tensor) -> torch.Tensor:
        """The next action a' `(B,)` (with branches `(B, K)`) of the targets, given
        Q_target(s', .) `(B, A)`: argmax_a Q_target(s', a), the target network both selects and
        evaluates."""
        return self.qnet.greedy(target_q)

    critic_nets: ClassVar[tuple[str, ...]] = ("qnet",)

    def critic_loss(self, batch: Batch) -> CriticLoss:
        """The Q-network's loss, its Q(s, a) and TD errors, as its kind computes them
        (`agents/critics.py`)."""
        return self.q_kind.loss(self, batch)

    def update_step(self, batch: Batch) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """A step on the Q-network's loss (`critic_loss`), then the target network's soft
        update."""
        loss, q, td_errors = self.critic_loss(batch)
        self.optimizer_step(self.optimizers["qnet"], self.qnet, loss)
        self.update_targets((self.qnet_target, self.qnet))
        return {"critic_loss": loss.detach(), "q_value": q.detach().mean()}, td_errors.detach()


class AgentDoubleDQN(AgentDQN):
    """Double DQN: the online network selects the next action, the target network scores it."""

    def next_action(self, next_states: torch.Tensor, target_q: torch.Tensor) -> torch.Tensor:
        return self.qnet.greedy(self.qnet.q_values(next_states))  # differs: online selects


class AgentD3QN(AgentDoubleDQN):
    """D3QN: Double DQN with a dueling Q-network."""

    qnet_class = QNetDuel  # differs: Q = V + A - mean(A)

    @classmethod
    def check(cls, config: Config) -> None:
        # differs: the dueling heads branch off the last hidden layer
        if config.net_dims == []:
            raise ConfigError(
                f"invalid config: net_dims=[]; net_dims must be a non-empty list for "
                f"{config.algo} (its dueling heads branch off the last hidden layer)."
            )
