"""DDPG: Lillicrap et al., "Continuous control with deep reinforcement learning", ICLR 2016.

The root of the off-policy actor-critic line: TD3 (`td3.py`), SAC (`sac.py`) and REDQ
(`redq.py`) each override only the hooks their paper changes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import nn

from xiaoyarl.agents.off_policy import OFF_POLICY_FIELDS, AgentOffPolicy
from xiaoyarl.config import Config
from xiaoyarl.core.buffer import Batch
from xiaoyarl.core.nets import gaussian_logprob
from xiaoyarl.core.off_policy_nets import Actor, CriticEnsemble
from xiaoyarl.envs.base import EnvSpec

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import OptimizerKit


class AgentDDPG(AgentOffPolicy):
    """Deterministic actor, Q critic, target networks for both, Gaussian exploration noise."""

    if_discrete = False
    config_fields = OFF_POLICY_FIELDS | {"explore_noise_std", "num_critics", "target_q_reduce"}
    actor_class: type[nn.Module] = Actor
    uses_target_actor = True
    default_num_critics = 1  # critics unless `num_critics` says otherwise
    default_repeat_times = 1.0  # gradient steps per env step unless `repeat_times` says otherwise

    @classmethod
    def defaults(cls, config: Config, batched: bool, device_type: str) -> dict:
        """A few sub-envs, one gradient step of 256 transitions per env step on [256, 256]
        networks, no normalisation, and evaluations every 2,000 env steps, since these
        algorithms learn within tens of thousands."""
        return {
            "num_envs": config.num_envs or (16 if batched else 1),
            "horizon_len": 1 if batched else 8,
            "batch_size": 256,
            "repeat_times": cls.default_repeat_times,
            "learning_rate": 3e-4,
            "net_dims": [256, 256],
            "state_norm": False,
            "reward_norm": False,
            "num_critics": cls.default_num_critics,
            "eval_every": 2_000,
        }

    def __init__(self, spec: EnvSpec, config: Config, device: torch.device, learner: bool = True,
                 kit: OptimizerKit | None = None) -> None:  # fmt: skip
        super().__init__(spec, config, device, learner, kit)
        assert config.net_dims is not None, "resolve_config sets net_dims"
        encoder = self.make_encoder()  # image encoders: the actor's and the critic's own
        self.actor = self.actor_class(encoder.out_dim, spec.action_dim, config.net_dims, encoder)
        self.actor.to(device)
        self.critic = self.make_critic(self.make_encoder()).to(device)
        self.critic_target = self.make_target(self.critic)
        self.nets = {
            "actor": self.actor,
            "critic": self.critic,
            "critic_target": self.critic_target,
        }
        self.actor_target: nn.Module | None = None
        if self.uses_target_actor:
            self.actor_target = self.make_target(self.actor)
            self.nets["actor_target"] = self.actor_target
        self.optimizers = {
            "actor": self.make_optimizer(self.actor),
            "critic": self.make_optimizer(self.critic),
        }

    def make_critic(self, encoder: nn.Module) -> nn.Module:
        spec, cfg = self.spec, self.config
        assert cfg.net_dims is not None and cfg.num_critics is not None, "set by resolve_config"
        return CriticEnsemble(self.feature_dim, spec.action_dim, cfg.net_dims, encoder,
                              cfg.num_critics, cfg.layer_norm)  # fmt: skip

    # --- the hooks the successors override ---
    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        action = self.actor(state)
        noise = torch.randn_like(action) * self.config.explore_noise_std
        return (action + noise).clamp(-1.0, 1.0)

    def target_action(self, next_states: torch.Tensor) -> torch.Tensor:
        """The action the target policy takes in s' `(B, A)`."""
        assert self.actor_target is not None, "built where uses_target_actor, which this needs"
        return self.actor_target(next_states)

    def reduce_target_q(self, q: torch.Tensor) -> torch.Tensor:
        """Combine the target critics' values `(num_critics, B)` into one `(B,)`: their
        minimum, or their mean with `target_q_reduce: mean` (an averaged ensemble)."""
        return q.mean(0) if self.config.target_q_reduce == "mean" else q.min(0).values

    def td_target(self, batch: Batch) -> torch.Tensor:
        """The critics' target `(B,)`: r + gamma * Q'(s', a') (gamma^m over an m-step transition:
        `Batch`), a' the target policy's action in
        s', Q' the target critics combined by `reduce_target_q`; no bootstrap past a terminal."""
        q = self.critic_target(batch.next_states, self.target_action(batch.next_states))
        not_terminal = (~batch.terminals).float()
        return batch.rewards + batch.discounts * not_terminal * self.reduce_target_q(q)

    def critic_q(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Every critic's Q(s, a) for the batch's actions `(num_critics, B)`."""
        return self.critic(states, actions)

    def critic_q_for_actor(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The critics' Q(s, a) `(num_critics, B)` with gradients to the actions only: the
        actor's loss never needs the critics' weight gradients, so they are not computed."""
        self.critic.requires_grad_(False)
        try:
            return self.critic(states, actions)
        finally:
            self.critic.requires_grad_(True)

    def should_update_actor(self, critic_loss: torch.Tensor) -> bool:
        return True  # DDPG updates the actor after every critic step

    def critic_target_due(self, actor_updated: bool) -> bool:
        """Whether this gradient step soft-updates the target critics (besides the
        `target_update_every` schedule): every step in DDPG."""
        return True

    def update_actor(self, states: torch.Tensor) -> dict[str, torch.Tensor]:
        """Ascend Q(s, actor(s)) of the first critic (plus the auxiliary loss, if any)."""
        aux_loss, aux_log = self.auxiliary_loss()
        actor_loss = -self.critic_q_for_actor(states, self.actor(states))[0].mean()
        self.optimizer_step(self.optimizers["actor"], self.actor, actor_loss + aux_loss)
        return {"actor_loss": actor_loss.detach(), **aux_log}

    def explore_logprob(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The exploration distribution's density: N(actor(s), explore_noise_std^2)."""
        log_std = torch.full_like(actions, math.log(self.config.explore_noise_std))
        return gaussian_logprob((actions - self.actor(states)) * (-log_std).exp(), log_std).sum(-1)

    # --- one gradient step ---
    def update_step(self, batch: Batch) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        with torch.no_grad():
            target = self.td_target(batch)
        q = self.critic_q(batch.states, batch.actions)  # (num_critics, B)
        td_errors = target - q
        critic_loss = (batch.weights * td_errors.square()).mean(-1).sum()
        self.optimizer_step(self.optimizers["critic"], self.critic, critic_loss)
        logs = {"critic_loss": critic_loss.detach(), "q_value": q.detach().mean()}
        actor_updated = self.should_update_actor(critic_loss.detach())
        if actor_updated:
            logs.update(self.update_actor(batch.states))
            if self.actor_target is not None:
                self.update_targets((self.actor_target, self.actor))
        if self.critic_target_due(actor_updated):
            self.update_targets((self.critic_target, self.critic))
        return logs, td_errors.detach().abs().mean(0)  # critics of opposite error: no cancelling
