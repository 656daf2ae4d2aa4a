"""TD3: Fujimoto et al., "Addressing Function Approximation Error in Actor-Critic Methods", 2018."""

from __future__ import annotations

import torch

from xiaoyarl.agents.actor_critic import DelayedActor
from xiaoyarl.agents.ddpg import AgentDDPG
from xiaoyarl.core.off_policy_nets import batch_randn_like


class AgentTD3(DelayedActor, AgentDDPG):
    """DDPG plus clipped double Q (the minimum of two critics, via `num_critics=2`), target
    policy smoothing and a delayed actor update; the target networks (actor and critics) are
    soft-updated only on the delayed steps, as in the paper's Algorithm 1."""

    config_fields = AgentDDPG.config_fields | {"policy_noise_std", "policy_noise_clip",
                                               "policy_delay"}  # fmt: skip
    default_num_critics = 2  # differs: clipped double Q

    def target_action(self, next_states: torch.Tensor) -> torch.Tensor:
        # differs: clipped Gaussian noise smooths the target policy
        cfg = self.config
        action = self.target_actor()(next_states)
        noise = (batch_randn_like(action) * cfg.policy_noise_std).clamp(
            -cfg.policy_noise_clip, cfg.policy_noise_clip
        )
        return (action + noise).clamp(-1.0, 1.0)

    def critic_target_due(self, actor_updated: bool) -> bool:
        return actor_updated  # differs: the critic targets move with the delayed actor step
