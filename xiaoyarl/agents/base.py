"""`AgentBase`: what every agent shares (optimizer step, checkpoint state, policy export)."""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import torch
from torch import nn

from xiaoyarl.config import Config
from xiaoyarl.envs.base import EnvSpec, VecEnv


class AgentBase:
    """An agent owns its networks, optimizers and normalizers, explores a `VecEnv` and updates.

    Subclasses set `if_off_policy` and `if_discrete` and implement `explore_env` and
    `update_net`. Networks that make up the training state are listed in `self.nets`, optimizers
    in `self.optimizers`; `state_dict` saves both, plus the state the next rollout starts from.
    """

    if_off_policy: ClassVar[bool]
    if_discrete: ClassVar[bool]

    def __init__(self, spec: EnvSpec, config: Config, device: torch.device) -> None:
        if spec.if_discrete != self.if_discrete:
            kind = "discrete" if spec.if_discrete else "continuous"
            raise ValueError(f"{type(self).__name__} cannot act in the {kind} env {spec.name}")
        self.spec = spec
        self.config = config
        self.device = device
        self.nets: dict[str, nn.Module] = {}
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        self.last_state: torch.Tensor | None = (
            None  # (num_envs, state_dim): where exploring resumes
        )
        self.actor: nn.Module  # the policy; `actor(state)` is the deterministic action in [-1, 1]

    # --- what an algorithm implements ---
    def explore_env(self, env: VecEnv, horizon_len: int) -> NamedTuple:
        """Step `env` for `horizon_len` steps from `self.last_state`; return time-major data."""
        raise NotImplementedError

    def update_net(self, rollout: NamedTuple) -> dict[str, torch.Tensor]:
        """Update the networks from `rollout`; return named scalar tensors for logging."""
        raise NotImplementedError

    # --- shared mechanics ---
    def make_optimizer(self, net: nn.Module) -> torch.optim.Optimizer:
        fused = self.device.type == "cuda"
        return torch.optim.Adam(
            net.parameters(), lr=self.config.learning_rate, eps=1e-5, fused=fused or None
        )

    def optimizer_step(
        self, optimizer: torch.optim.Optimizer, net: nn.Module, loss: torch.Tensor
    ) -> None:
        """Backward, clip the global gradient norm to `clip_grad_norm`, and step."""
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), self.config.clip_grad_norm, foreach=True)
        optimizer.step()

    @torch.no_grad()
    def act(self, state: torch.Tensor) -> torch.Tensor:
        """Deterministic env action for a batch of states `(batch, state_dim)`."""
        return self.actor(state)

    def state_dict(self) -> dict:
        """The agent's whole training state as plain data (tensors, dicts, numbers)."""
        return {
            "nets": {name: net.state_dict() for name, net in self.nets.items()},
            "optimizers": {name: opt.state_dict() for name, opt in self.optimizers.items()},
            "last_state": self.last_state,
        }

    def load_state_dict(self, state: dict) -> None:
        for name, net in self.nets.items():
            net.load_state_dict(state["nets"][name])
        for name, opt in self.optimizers.items():
            opt.load_state_dict(state["optimizers"][name])
        last = state["last_state"]
        self.last_state = None if last is None else last.to(self.device)

    def policy_state(self) -> dict:
        """What `load_policy` needs to rebuild the actor: its class, sizes and weights."""
        return {
            "actor_class": type(self.actor).__name__,
            "state_dim": self.spec.state_dim,
            "action_dim": self.spec.action_dim,
            "net_dims": list(self.config.net_dims),
            "state_norm": self.config.state_norm,
            "if_discrete": self.spec.if_discrete,
            "action_low": self.spec.action_low,
            "action_high": self.spec.action_high,
            "env_id": self.spec.name,
            "algo": self.config.algo,
            "actor": {k: v.detach().cpu() for k, v in self.actor.state_dict().items()},
        }
