"""Critic kinds and target reductions, components of the off-policy actor-critics (DDPG, TD3,
SAC, REDQ and their fast and multi-agent versions), chosen once at construction from the
config (`critic_kind`, `TargetReduce`):

- `TDCritics`: `num_critics` Q(s, a) networks regressed on r + gamma^m * Q'(s', a') of target
  networks (squared TD errors);
- `C51Critics` (`critic_atoms`): each critic a C51 distribution over `critic_atoms` returns
  in [critic_v_min, critic_v_max], learnt by the cross-entropy against the projected target
  distribution (FastTD3's critic);
- `CrossQCritics` (`crossq`): Bhatt et al., "CrossQ: Batch Normalization in Deep Reinforcement
  Learning for Greater Sample Efficiency and Simplicity", ICLR 2024: batch-renormalised
  critics and no target networks; (s, a) and (s', a') go through the critics in one batch,
  so their batch renormalisation sees both distributions, and the target comes from that
  same pass, without gradient.

Each kind builds the critics' network and computes their loss from what the algorithm
gives: its next action and penalty in s' (`next_action`: TD3's smoothed target action, SAC's
sampled action and entropy term) and how its target combines the critics (`TargetReduce`).

The value-based agents (the DQN family) take a Q-network kind the same way (`q_kind`):
`ExpectedQ`, Q(s, .) regressed with the Huber loss (with action branches, each branch's Q of
its component on the one target), or `C51Q` (`critic_atoms`; Bellemare et
al., "A Distributional Perspective on Reinforcement Learning", ICML 2017).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, cast

import torch
from torch import nn
from torch.nn import functional as F

from xiaoyarl.config import Config
from xiaoyarl.core.buffer import Batch
from xiaoyarl.core.distributional import (
    DISTRIBUTIONAL_Q,
    DistributionalCriticEnsemble,
    DistributionalQNet,
    c51_target,
)
from xiaoyarl.core.off_policy_nets import CriticEnsemble, QNet

if TYPE_CHECKING:
    from xiaoyarl.core.encoders import Encoder
    from xiaoyarl.core.nets import RunningNorm
    from xiaoyarl.envs.base import EnvSpec


class CriticOwner(Protocol):
    """What a critic kind reads of its agent (`agents/actor_critic.py`'s `AgentActorCritic`)."""

    config: Config
    spec: EnvSpec
    feature_dim: int
    critic: nn.Module
    critic_target: nn.Module
    target_reduce: TargetReduce

    def next_action(self, next_states: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor | None]: ...  # fmt: skip

    def td_target(self, batch: Batch) -> torch.Tensor: ...

    def critic_q(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor: ...


class QOwner(Protocol):
    """What a Q-network kind reads of its agent (`agents/dqn.py`'s `AgentDQN`)."""

    config: Config
    spec: EnvSpec
    qnet_class: type[QNet]
    qnet: QNet
    qnet_target: QNet

    def next_q(self, next_states: torch.Tensor) -> torch.Tensor: ...

    def next_action(self, next_states: torch.Tensor, target_q: torch.Tensor) -> torch.Tensor: ...


# the critics' loss (summed over critics), their Q(s, a) and their TD errors `(num_critics, B)`
CriticLoss = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


class TargetReduce:
    """How the target combines the target critics: their minimum (clipped double Q), or their
    mean with `target_q_reduce: mean` (an averaged ensemble)."""

    def __init__(self, config: Config) -> None:
        self.mean = config.target_q_reduce == "mean"

    def values(self, q: torch.Tensor) -> torch.Tensor:
        """One value `(B,)` from the critics' `(num_critics, B)`."""
        return q.mean(0) if self.mean else q.min(0).values

    def distributions(self, probs: torch.Tensor, critic: DistributionalCriticEnsemble
                      ) -> torch.Tensor:  # fmt: skip
        """One distribution `(B, K)` from the critics' `(num_critics, B, K)` (their means read by
        `critic.mean`): their mixture, or the one whose mean is least."""
        return probs.mean(0) if self.mean else pick_least(probs, critic.mean(probs))


def pick_least(probs: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Per sample, the distribution `(B, K)` among `probs` `(num, B, K)` whose mean `values`
    `(num, B)` is least: clipped double Q for distributional critics."""
    least = values.argmin(0)  # (B,)
    return probs.gather(0, least.view(1, -1, 1).expand(1, *probs.shape[1:])).squeeze(0)


class TDCritics:
    """Q(s, a) critics with target networks, regressed on the agent's `td_target`."""

    has_target = True  # the agent keeps target critics (and, where it uses one, a target actor)
    batch_renorm = False  # batch-renormalised hidden layers (CrossQ's)

    def build(self, agent: CriticOwner, encoder: nn.Module) -> nn.Module:
        """The critics' network: `num_critics` Q(s, a) on the agent's features."""
        cfg = agent.config
        assert cfg.net_dims is not None and cfg.num_critics is not None, "set by resolve_config"
        return CriticEnsemble(agent.feature_dim, agent.spec.action_dim, cfg.net_dims, encoder,
                              cfg.num_critics, cfg.layer_norm, self.batch_renorm)  # fmt: skip

    def loss(self, agent: CriticOwner, batch: Batch) -> CriticLoss:
        """Squared TD errors against the agent's target (its `td_target`), each weighted by
        prioritized replay's weights."""
        with torch.no_grad():
            target = agent.td_target(batch)
        q = agent.critic_q(batch.states, batch.actions)  # (num_critics, B)
        td_errors = target - q
        return (batch.weights * td_errors.square()).mean(-1).sum(), q, td_errors


class C51Critics(TDCritics):
    """C51 critics: the cross-entropy of each critic's distribution against C51's target (TD
    errors between the distributions' means)."""

    def build(self, agent: CriticOwner, encoder: nn.Module) -> nn.Module:
        cfg = agent.config
        assert cfg.net_dims is not None and cfg.num_critics is not None, "set by resolve_config"
        assert cfg.critic_v_min is not None and cfg.critic_v_max is not None, "check_config"
        return DistributionalCriticEnsemble(
            agent.feature_dim, agent.spec.action_dim, cfg.net_dims, encoder, cfg.num_critics,
            cfg.layer_norm, cfg.critic_atoms, cfg.critic_v_min, cfg.critic_v_max)  # fmt: skip

    def loss(self, agent: CriticOwner, batch: Batch) -> CriticLoss:
        with torch.no_grad():
            target_probs = self.td_target(agent, batch)  # (B, K)
        critic = cast(DistributionalCriticEnsemble, agent.critic)
        log_probs = critic.logits(batch.states, batch.actions).log_softmax(-1)
        cross_entropy = -(target_probs * log_probs).sum(-1)  # (num_critics, B)
        q = critic.mean(log_probs.detach().exp())
        td_errors = critic.mean(target_probs) - q
        return (batch.weights * cross_entropy).mean(-1).sum(), q, td_errors

    def td_target(self, agent: CriticOwner, batch: Batch) -> torch.Tensor:
        """C51's target `(B, K)`: the target critics' distribution of Z(s', a') (combined by
        the agent's `target_reduce`), each atom z moved to r + gamma * (z - penalty) and
        projected back onto the support; no bootstrap past a terminal."""
        action, penalty = agent.next_action(batch.next_states)
        target = cast(DistributionalCriticEnsemble, agent.critic_target)
        probs = target.logits(batch.next_states, action).softmax(-1)
        critic = cast(DistributionalCriticEnsemble, agent.critic)
        probs = agent.target_reduce.distributions(probs, critic)
        return c51_target(probs, batch, critic.support, penalty)


class CrossQCritics(TDCritics):
    """CrossQ's critics (see the module docstring): no target networks."""

    has_target = False
    batch_renorm = True

    def loss(self, agent: CriticOwner, batch: Batch) -> CriticLoss:
        """The target r + gamma * Q(s', a') (minus any penalty) from the same pass as Q(s, a)."""
        with torch.no_grad():
            action, penalty = agent.next_action(batch.next_states)
        both = agent.critic(torch.cat([batch.states, batch.next_states]),
                            torch.cat([batch.actions, action]))  # fmt: skip
        q, next_q = both.split(batch.rewards.shape[0], dim=-1)  # (num_critics, B) each
        with torch.no_grad():
            value = agent.target_reduce.values(next_q)
            if penalty is not None:
                value = value - penalty
            target = batch.rewards + batch.discounts * (~batch.terminals).float() * value
        td_errors = target - q
        return (batch.weights * td_errors.square()).mean(-1).sum(), q, td_errors


def critic_kind(config: Config) -> TDCritics:
    """The critic kind the config asks for: C51 (`critic_atoms`), CrossQ (`crossq`) or plain."""
    if config.critic_atoms:
        return C51Critics()
    return CrossQCritics() if config.crossq else TDCritics()


# --- Q-networks of the value-based agents (the DQN family) -----------------------------------
class ExpectedQ:
    """Q(s, .) of `qnet_class`, regressed on r + gamma^m * Q_target(s', a') with the Huber loss,
    a' the agent's `next_action`."""

    def build(self, agent: QOwner, encoder: Encoder | RunningNorm) -> QNet:
        """The Q-network: the agent's `qnet_class` on the encoder's features."""
        cfg = agent.config
        assert cfg.net_dims is not None, "resolve_config sets net_dims"
        return agent.qnet_class(encoder.out_dim, agent.spec.action_dim, cfg.net_dims, encoder,
                                layer_norm=cfg.layer_norm)  # fmt: skip

    def loss(self, agent: QOwner, batch: Batch) -> CriticLoss:
        """The Huber loss of Q(s, a) against the target (with branches, its mean over them),
        weighted for prioritized replay; Q(s, a) and the size of the TD errors `(B,)`."""
        with torch.no_grad():
            not_terminal = (~batch.terminals).float()
            next_q = agent.next_q(batch.next_states)
            target = batch.rewards + batch.discounts * not_terminal * next_q
        q = agent.qnet.action_values(agent.qnet.q_values(batch.states), batch.actions)
        q = q.view(q.shape[0], -1)  # (B, branches): one branch, or one per action component
        target = target.unsqueeze(1).expand_as(q)  # each branch regressed on the one target
        losses = F.huber_loss(q, target, reduction="none").mean(1)
        # the TD errors' size per transition (branches of opposite errors do not cancel)
        return (batch.weights * losses).mean(), q.mean(1), (target - q).abs().mean(1)


class C51Q(ExpectedQ):
    """C51: the target network's distribution of the next action (`next_action`), each atom z
    moved to r + gamma^m * z (r alone past a terminal) and projected onto the support; the
    cross-entropy of the taken action's distribution against it, weighted for prioritized
    replay. TD errors between the means."""

    def build(self, agent: QOwner, encoder: Encoder | RunningNorm) -> QNet:
        cfg = agent.config
        assert cfg.net_dims is not None, "resolve_config sets net_dims"
        assert cfg.critic_v_min is not None and cfg.critic_v_max is not None, "check_config"
        return DISTRIBUTIONAL_Q[agent.qnet_class](
            encoder.out_dim, agent.spec.action_dim, cfg.net_dims, encoder, cfg.layer_norm,
            cfg.critic_atoms, cfg.critic_v_min, cfg.critic_v_max)  # fmt: skip

    def loss(self, agent: QOwner, batch: Batch) -> CriticLoss:
        qnet = cast(DistributionalQNet, agent.qnet)
        rows = torch.arange(batch.actions.shape[0], device=batch.actions.device)
        with torch.no_grad():
            logits = cast(DistributionalQNet, agent.qnet_target).logits(batch.next_states)
            probs = logits.softmax(-1)  # (B, A, K)
            best = agent.next_action(batch.next_states, (probs * qnet.support).sum(-1))
            target = c51_target(probs[rows, best], batch, qnet.support)
        taken = qnet.logits(batch.states)[rows, batch.actions].log_softmax(-1)
        loss = (batch.weights * -(target * taken).sum(-1)).mean()
        q = (taken.detach().exp() * qnet.support).sum(-1)
        td_errors = (target * qnet.support).sum(-1) - q
        return loss, q, td_errors


def q_kind(config: Config) -> ExpectedQ:
    """The Q-network kind the config asks for: C51 (`critic_atoms`) or expected values."""
    return C51Q() if config.critic_atoms else ExpectedQ()
