"""DDPG: Lillicrap et al., "Continuous control with deep reinforcement learning", ICLR 2016.

A deterministic actor that explores with added noise (`agents/noise.py`), critics of the
config's kind (`agents/critics.py`), and target networks for both. TD3 (`td3.py`) overrides the
hooks its paper changes: the target action, the actor's schedule and the targets'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch

from xiaoyarl.agents.actor_critic import AgentActorCritic
from xiaoyarl.agents.noise import NOISE_FIELDS, ExplorationNoise
from xiaoyarl.config import Config
from xiaoyarl.core.buffer import Batch
from xiaoyarl.envs.base import EnvSpec
from xiaoyarl.errors import ConfigError

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import OptimizerKit


class AgentDDPG(AgentActorCritic):
    """Deterministic actor, Q critic, target networks for both, exploration noise."""

    config_fields = AgentActorCritic.config_fields | NOISE_FIELDS
    takes_h_term = True
    tune_space: ClassVar[str | None] = "td3.yaml"
    uses_target_actor = True
    explore_noises = ("gaussian", "ou")

    @classmethod
    def check(cls, config: Config) -> None:
        """The H-term's density here is the exploration noise's, N(actor(s),
        explore_noise_std^2), independent at each step and one std for every sub-env."""
        if not config.h_term:
            return
        if config.explore_noise_std <= 0:
            raise ConfigError(
                f"invalid config: explore_noise_std={config.explore_noise_std!r} with "
                f"h_term=True on {config.algo}: the H-term needs the exploration density "
                f"N(actor(s), explore_noise_std^2), which has no log-probability without noise; "
                f"set explore_noise_std > 0 or h_term off (the default noise is 0.1)."
            )
        if config.explore_noise_std_max:
            raise ConfigError(
                f"invalid config: explore_noise_std_max={config.explore_noise_std_max!r} with "
                f"h_term=True on {config.algo}: the H-term reads the exploration density of one "
                f"noise std for every sub-env; remove explore_noise_std_max or h_term."
            )
        if config.explore_noise == "ou":
            raise ConfigError(
                f"invalid config: explore_noise='ou' with h_term=True on {config.algo}: the "
                f"H-term reads the density of independent Gaussian noise at each step; set "
                f"explore_noise=gaussian or h_term off."
            )

    def __init__(self, spec: EnvSpec, config: Config, device: torch.device, learner: bool = True,
                 kit: OptimizerKit | None = None) -> None:  # fmt: skip
        super().__init__(spec, config, device, learner, kit)
        self.noise = ExplorationNoise(config, device)

    # --- exploring ---
    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        action = self.actor(state)
        return (action + self.noise(action)).clamp(-1.0, 1.0)

    def record(self, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
               truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
        self.noise.episodes_ended(terminal | truncate)
        return super().record(kept, reward, terminal, truncate, info)

    def explore_logprob(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The exploration distribution's density: N(actor(s), explore_noise_std^2)."""
        return self.noise.logprob(actions - self.actor(states))

    def exploring_state(self) -> dict[str, torch.Tensor]:
        return {k: v for k, v in self.noise.state_dict().items() if v is not None}

    def load_exploring_state(self, state: dict[str, torch.Tensor]) -> None:
        self.noise.load_state_dict(state)

    def sub_env_state(self) -> dict:
        # differs: each sub-env's noise std (explore_noise_std_max) and OU noise (ou)
        return {**super().sub_env_state(), **self.noise.state_dict()}

    def load_sub_env_state(self, state: dict) -> None:
        super().load_sub_env_state(state)
        self.noise.load_state_dict(state)

    def state_dict(self) -> dict:
        return {**super().state_dict(), **self.noise.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.noise.load_state_dict(state)

    # --- the hooks TD3 overrides ---
    def target_action(self, next_states: torch.Tensor) -> torch.Tensor:
        """The action the target policy takes in s' `(B, A)`."""
        return self.target_actor()(next_states)

    def target_actor(self) -> torch.nn.Module:
        """The policy of the targets: the target actor, or the actor itself where there is
        none (critics without targets, or `uses_target_actor` off)."""
        return self.actor if self.actor_target is None else self.actor_target

    def next_action(self, next_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.target_action(next_states), None

    def should_update_actor(self, critic_loss: torch.Tensor) -> bool:
        return True  # DDPG updates the actor after every critic step

    def reduce_actor_q(self, q: torch.Tensor) -> torch.Tensor:
        """Combine the critics `(num_critics, B)` for the actor's objective: the first critic's."""
        return q[0]

    def actor_losses(self, batch: Batch,
                     ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:  # fmt: skip
        """Ascend Q(s, actor(s)) of the critics combined by `reduce_actor_q` (plus the auxiliary
        loss, if any)."""
        aux_loss, aux_log = self.auxiliary_loss()
        states = batch.states
        q = self.reduce_actor_q(self.critic_q_for_actor(states, self.actor(states)))
        actor_loss = -q.mean()
        return {"actor": actor_loss + aux_loss}, {"actor_loss": actor_loss.detach(), **aux_log}

    # --- one gradient step ---
    def update_step(self, batch: Batch) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """A critic step on the TD target; an actor step when due, with the target actor's
        update; the target critics' update when due."""
        critic_loss, q, td_errors = self.critic_loss(batch)
        self.optimizer_step(self.optimizers["critic"], self.critic, critic_loss)
        logs = {"critic_loss": critic_loss.detach(), "q_value": q.detach().mean()}
        actor_updated = self.should_update_actor(critic_loss.detach())
        if actor_updated:
            logs.update(self.update_actor(batch))
            if self.actor_target is not None:
                self.update_targets((self.actor_target, self.actor))
        if self.critic_target_due(actor_updated):
            self.update_critic_targets()
        return logs, td_errors.detach().abs().mean(0)  # critics of opposite error: no cancelling
