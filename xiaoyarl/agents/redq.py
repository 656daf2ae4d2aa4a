"""REDQ: Chen et al., "Randomized Ensembled Double Q-Learning: Learning Fast Without a Model",
ICLR 2021."""

from __future__ import annotations

import math

import torch

from xiaoyarl.agents.critics import TargetReduce, pick_least
from xiaoyarl.agents.sac import AgentSAC
from xiaoyarl.config import Config
from xiaoyarl.core.distributional import DistributionalCriticEnsemble
from xiaoyarl.errors import ConfigError


class AgentREDQ(AgentSAC):
    """SAC with an ensemble of N critics (`num_critics`, 10 by default) evaluated in one batched
    call, an update-to-data ratio G > 1 (`replay_ratio`), a target that takes the minimum over
    a random subset of M critics (`redq_subset`), and an actor that ascends their mean once
    per G critic steps."""

    config_fields = (AgentSAC.config_fields - {"target_q_reduce"}) | {"redq_subset"}
    default_num_critics = 10  # differs: the ensemble, N = 10 as in the paper
    default_replay_ratio = 4.0  # differs: G = 4 (the paper's 20 is slow on a CPU)

    @classmethod
    def check(cls, config: Config) -> None:
        super().check(config)
        if config.num_critics and config.redq_subset > config.num_critics:
            raise ConfigError(
                f"invalid config: redq_subset={config.redq_subset!r}; redq_subset must be at "
                f"most num_critics ({config.num_critics})."
            )

    def make_target_reduce(self) -> TargetReduce:
        # differs: the minimum over a random subset of M of the N target critics
        return RandomSubsetMin(self.config)

    def should_update_actor(self, critic_loss: torch.Tensor) -> bool:
        # differs: the policy takes one step per G critic steps (once per env step, as in the
        # paper's Algorithm 1)
        assert self.config.replay_ratio is not None, "resolve_config sets replay_ratio"
        return self.updates % max(1, round(self.config.replay_ratio)) == 0

    def update_cycle(self) -> int | None:
        # differs: the actor steps once per G critic steps
        assert self.config.replay_ratio is not None, "resolve_config sets replay_ratio"
        return math.lcm(self.config.target_update_every, max(1, round(self.config.replay_ratio)))

    def reduce_actor_q(self, q: torch.Tensor) -> torch.Tensor:
        return q.mean(0)  # differs: the actor ascends the ensemble mean


class RandomSubsetMin(TargetReduce):
    """REDQ's target: the least of a random subset of `redq_subset` (M) of the N target
    critics, drawn anew at each gradient step."""

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.subset = config.redq_subset

    def values(self, q: torch.Tensor) -> torch.Tensor:
        subset = torch.randperm(q.shape[0], device=q.device)[: self.subset]
        return q[subset].min(0).values

    def distributions(self, probs: torch.Tensor, critic: DistributionalCriticEnsemble
                      ) -> torch.Tensor:  # fmt: skip
        subset = torch.randperm(probs.shape[0], device=probs.device)[: self.subset]
        return pick_least(probs[subset], critic.mean(probs[subset]))
