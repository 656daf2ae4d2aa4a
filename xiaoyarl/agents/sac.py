"""SAC and its variants.

SAC: Haarnoja et al., "Soft Actor-Critic Algorithms and Applications", 2018 (learned
temperature, target entropy -action_dim). ModSAC: ElegantRL's SAC whose actor-update frequency
follows the critic's reliability. Discrete SAC: Christodoulou, "Soft Actor-Critic for Discrete
Action Settings", 2019.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar, cast

import torch
from torch import nn

from xiaoyarl.agents.actor_critic import AgentActorCritic
from xiaoyarl.config import Config
from xiaoyarl.core.buffer import Batch
from xiaoyarl.core.off_policy_nets import ActorDiscreteSAC, ActorGSDE, ActorSAC, QEnsemble
from xiaoyarl.envs.base import EnvSpec

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import OptimizerKit, Steps
    from xiaoyarl.core.encoders import Encoder
    from xiaoyarl.core.nets import RunningNorm
    from xiaoyarl.envs.base import VecEnv


class Temperature(nn.Module):
    """The entropy temperature alpha, learned as log(alpha) so it stays positive."""

    def __init__(self, alpha_init: float) -> None:
        super().__init__()
        self.log_alpha = nn.Parameter(torch.tensor(math.log(alpha_init)))

    def forward(self) -> torch.Tensor:
        return self.log_alpha.exp()


class AgentSAC(AgentActorCritic):
    """A squashed-Gaussian actor that explores by sampling itself (or, with `explore_noise:
    gsde`, by gSDE's state-dependent perturbation of it), twin critics (clipped double Q), the
    soft (entropy-regularised) target from the current actor, and a temperature tuned so the
    policy's entropy stays near -action_dim."""

    config_fields = AgentActorCritic.config_fields | {"alpha_init", "alpha_auto", "explore_noise"}
    takes_h_term = True
    tune_space: ClassVar[str | None] = "sac.yaml"
    actor_class: type[nn.Module] = ActorSAC
    default_num_critics = 2  # clipped double Q
    explore_noises: ClassVar[tuple[str, ...]] = ("gaussian", "gsde")  # a policy sample, or gSDE

    def __init__(self, spec: EnvSpec, config: Config, device: torch.device, learner: bool = True,
                 kit: OptimizerKit | None = None) -> None:  # fmt: skip
        super().__init__(spec, config, device, learner, kit)
        # gSDE: each sub-env's exploration matrix, drawn as each rollout starts
        self.sde_matrices: torch.Tensor | None = None
        self.temperature = Temperature(config.alpha_init).to(device)
        self.target_entropy = self.default_target_entropy()
        self.nets["temperature"] = self.temperature
        self.optimizers["temperature"] = self.make_optimizer(self.temperature, decay=False)

    def make_actor(self, encoder: Encoder | RunningNorm) -> nn.Module:
        # gSDE (`explore_noise: gsde`): the squashed Gaussian with its exploration matrices
        if self.config.explore_noise == "gsde":
            assert self.config.net_dims is not None, "resolve_config sets net_dims"
            return ActorGSDE(encoder.out_dim, self.spec.action_dim, self.config.net_dims, encoder)
        return super().make_actor(encoder)

    def default_target_entropy(self) -> float:
        return -float(self.spec.action_dim)

    def gaussian_actor(self) -> ActorSAC:
        """The actor, which `make_actor` built as an `ActorSAC` (`nn.Module` to the base)."""
        return cast(ActorSAC, self.actor)

    # --- exploring ---
    @torch.no_grad()
    def explore_env(self, env: VecEnv, horizon_len: int) -> Steps:
        # with gSDE each sub-env explores with one matrix for the whole rollout (the paper's
        # and SB3's default: drawn anew as each rollout starts)
        if isinstance(self.actor, ActorGSDE):
            self.sde_matrices = self.actor.draw_exploration(env.spec.num_envs)
        return super().explore_env(env, horizon_len)

    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        """A sample of the policy (gSDE's perturbation of its mean with gSDE)."""
        if self.sde_matrices is not None:
            return cast(ActorGSDE, self.actor).explore(state, self.sde_matrices)
        return self.gaussian_actor().get_action_logprob(state)[0]

    def explore_logprob(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return self.gaussian_actor().logprob(states, actions)

    # --- the update ---
    def next_action(self, next_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The soft target r + gamma * (min Q'(s', a') - alpha * log pi(a'|s')): a' ~ pi(.|s')
        from the current actor, and the entropy term alpha * log pi(a'|s')."""
        action, logprob = self.gaussian_actor().get_action_logprob(next_states)
        return action, self.temperature() * logprob

    def should_update_actor(self, critic_loss: torch.Tensor) -> bool:
        """Whether this gradient step also steps the actor and the temperature: every one."""
        return True

    def reduce_actor_q(self, q: torch.Tensor) -> torch.Tensor:
        """The critics `(num_critics, B)` for the actor's objective: the smallest's value."""
        return q.min(0).values

    def actor_losses(self, batch: Batch,
                     ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:  # fmt: skip
        """Minimise E[alpha * log pi(a|s) - Q(s, a)], a ~ pi(.|s) (plus the auxiliary loss, if
        any), and tune alpha towards the target entropy (`temperature_losses`)."""
        states = batch.states
        action, logprob = self.gaussian_actor().get_action_logprob(states)
        alpha = self.temperature().detach()
        q = self.reduce_actor_q(self.critic_q_for_actor(states, action))
        actor_loss = (alpha * logprob - q).mean()
        aux_loss, aux_log = self.auxiliary_loss()
        losses, logs = self.temperature_losses(logprob.detach())
        return ({"actor": actor_loss + aux_loss, **losses},
                {"actor_loss": actor_loss.detach(), **aux_log, **logs})  # fmt: skip

    def temperature_losses(
        self, logprob: torch.Tensor, target: torch.Tensor | float | None = None
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """J(alpha) = E[-log(alpha) * (log pi + target entropy)] as the temperature's loss
        (none with `alpha_auto` off: alpha stays `alpha_init`, as SB3's fixed `ent_coef`); the
        target is `target_entropy` unless `target` gives one (per state)."""
        logs = {"entropy": -logprob.mean()}
        if not self.config.alpha_auto:
            return {}, logs
        target = self.target_entropy if target is None else target
        return {"temperature": -(self.temperature.log_alpha * (logprob + target)).mean()}, logs

    def update_actor(self, batch: Batch) -> dict[str, torch.Tensor]:
        # (the temperature after its step)
        return {**super().update_actor(batch), "alpha": self.temperature().detach()}

    def update_step(self, batch: Batch) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """A critic step on the soft target; an actor and temperature step when due
        (`should_update_actor`); the target critics' soft update."""
        critic_loss, q, td_errors = self.critic_loss(batch)
        self.optimizer_step(self.optimizers["critic"], self.critic, critic_loss)
        logs = {"critic_loss": critic_loss.detach(), "q_value": q.detach().mean()}
        if self.should_update_actor(critic_loss.detach()):
            logs.update(self.update_actor(batch))
        self.update_critic_targets()
        return logs, td_errors.detach().abs().mean(0)  # critics of opposite error: no cancelling


class AgentModSAC(AgentSAC):
    """ModSAC: SAC that updates the actor less often while the critic is unreliable.

    A running average L of the critic loss gives a reliability `r = exp(-L^2)` in (0, 1]; within
    each update call (`update_net`), the actor is updated only while (actor updates so far) /
    (critic updates so far) < 1 / (2 - r): every critic step when the critic is accurate, every
    other step when it is not. Both counts restart with every call, as in ElegantRL's
    `update_net`, so a rise of the loss after a calm phase slows the actor at once rather than
    stopping it for thousands of steps. (This reads L on the host once per gradient step.)
    L follows the whole batch's critic loss (`reducer`)."""

    def __init__(self, spec: EnvSpec, config: Config, device: torch.device, learner: bool = True,
                 kit: OptimizerKit | None = None) -> None:  # fmt: skip
        super().__init__(spec, config, device, learner, kit)
        self.critic_loss_avg = 1.0  # pessimistic start: the critic is not yet reliable
        self.actor_updates = 0
        self.critic_updates = 0

    def start_update(self) -> None:
        # differs: the actor schedule's counts restart with every update call
        self.actor_updates = self.critic_updates = 0

    def should_update_actor(self, critic_loss: torch.Tensor) -> bool:
        # differs: adaptive actor-update frequency
        critic_loss = self.reducer.average(critic_loss)
        self.critic_loss_avg = 0.995 * self.critic_loss_avg + 0.005 * critic_loss.item()
        self.critic_updates += 1
        reliability = math.exp(-(self.critic_loss_avg**2))
        if self.actor_updates < self.critic_updates / (2.0 - reliability):
            self.actor_updates += 1
            return True
        return False

    def update_cycle(self) -> int | None:
        return None  # differs: whether the actor steps depends on the critic loss read back

    def state_dict(self) -> dict:
        state = super().state_dict()
        state["modsac"] = {
            "critic_loss_avg": self.critic_loss_avg,
            "actor_updates": self.actor_updates,
            "critic_updates": self.critic_updates,
        }
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        for name, value in state["modsac"].items():
            setattr(self, name, value)


class AgentSACDiscrete(AgentSAC):
    """SAC for discrete actions: the critics give Q(s, .) for every action, so expectations over
    the categorical policy are exact sums instead of samples. Target entropy 0.5 log |A|, half
    the uniform policy's entropy. Higher targets (the paper's 0.98, CleanRL's 0.89) ask every
    state for a near-uniform policy; where the task needs decisive actions (two actions: 0.89
    log 2 is a policy of 72% / 28% in every state) no policy reaches them, and the temperature
    grows without end: alpha x entropy rose from 0.7 to 101 in 22k CartPole steps, where with
    0.5 alpha settles near 0.2 (BENCHMARKS.md, "The divergence guard and discrete SAC")."""

    if_discrete = True
    action_reason = ("its critics give one Q-value per action and its expectations over the "
                     "policy are exact sums over them, so over finitely many actions")  # fmt: skip
    # differs: what it cannot do with multi-discrete actions, and why
    multi_discrete_reason = ("its exact sums run over every joint action, as many as the "
                             "product of the components' choices")  # fmt: skip
    actor_class = ActorDiscreteSAC
    takes_h_term = False  # differs: not SAC's H-term (its search space, sac.yaml, applies)
    explore_noises = ("gaussian",)  # differs: a sample of the categorical policy
    config_fields = AgentSAC.config_fields - {"critic_atoms", "critic_v_min", "critic_v_max",
                                              "crossq"}  # fmt: skip

    def make_critic(self, encoder: nn.Module) -> nn.Module:
        spec, cfg = self.spec, self.config
        assert cfg.net_dims is not None and cfg.num_critics is not None, "set by resolve_config"
        return QEnsemble(self.feature_dim, spec.action_dim, cfg.net_dims, encoder, cfg.num_critics,
                         cfg.layer_norm)  # fmt: skip

    entropy_fraction = 0.5  # the target entropy's share of the uniform policy's

    def default_target_entropy(self) -> float:
        return self.entropy_fraction * math.log(self.spec.action_dim)

    def categorical_actor(self) -> ActorDiscreteSAC:
        """The actor, which `actor_class` built as an `ActorDiscreteSAC`."""
        return cast(ActorDiscreteSAC, self.actor)

    def policy(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """pi(.|s) and log pi(.|s) `(B, A)` of the actor on `states`."""
        return self.categorical_actor().probs_logprobs(states)

    def state_target_entropy(self, states: torch.Tensor) -> torch.Tensor | float:
        """The temperature's target entropy at `states`: the same everywhere."""
        return self.target_entropy

    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        return self.categorical_actor().sample(state)

    def td_target(self, batch: Batch) -> torch.Tensor:
        # differs: the exact soft value V(s') = sum_a pi(a|s') (min Q'(s', a) - alpha log pi(a|s'))
        probs, logprobs = self.policy(batch.next_states)
        q = self.reduce_target_q(self.critic_target(batch.next_states))  # (B, A)
        next_value = (probs * (q - self.temperature() * logprobs)).sum(-1)
        not_terminal = (~batch.terminals).float()
        return batch.rewards + batch.discounts * not_terminal * next_value

    def critic_q(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        q = self.critic(states)  # (num_critics, B, A)
        index = actions.view(1, -1, 1).expand(q.shape[0], -1, 1)
        return q.gather(-1, index).squeeze(-1)

    def actor_losses(self, batch: Batch,
                     ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:  # fmt: skip
        states = batch.states
        probs, logprobs = self.policy(states)
        with torch.no_grad():
            q = self.reduce_actor_q(self.critic(states))  # (B, A)
        alpha = self.temperature().detach()
        actor_loss = (probs * (alpha * logprobs - q)).sum(-1).mean()
        expected_logprob = (probs * logprobs).sum(-1).detach()  # -entropy per state
        losses, logs = self.temperature_losses(expected_logprob, self.state_target_entropy(states))
        return {"actor": actor_loss, **losses}, {"actor_loss": actor_loss.detach(), **logs}
