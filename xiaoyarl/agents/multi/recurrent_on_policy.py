"""MAPPO and PQN-VDN with recurrent agent networks (`--set recurrent=gru`, or lstm): the
single-agent recurrent PPO and PQN (`agents/recurrent.py`) with one memory row per (sub-env,
agent), as MAPPO's paper trains its recurrent policies (`use_recurrent_policy`) and PQN's
authors their recurrent multi-agent agents.

The shared network reads each agent's observation (with its id) through a `RecurrentEncoder`
(a GRU or LSTM of `recurrent_dim` units); each agent's hidden state carries its episode so far,
zeroed where its sub-env's episode ends. Everything else is the single-agent recurrent agents':
the rollout stores the hidden states before each step; the update runs the network along each
agent's sequence over the rollout (truncated backpropagation through time), its mini-batches
whole sequences; evaluation and saved policies keep their own hidden states; the hidden states
are part of the checkpoint. MAPPO's centralized value function stays feed-forward on the global
state (the state is what the env is; the memory is what an agent's own observations lack).
Shapes: T = horizon, E = sub-envs, A = agents, N = E * A, Hs = the width of a hidden state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import torch

from xiaoyarl.agents.multi.mappo import AgentDiscreteMAPPO, AgentMAPPO
from xiaoyarl.agents.multi.pqn_vdn import AgentPQNVDN
from xiaoyarl.agents.recurrent import Recurrent, RecurrentPQNRollout, RecurrentQ

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import Steps


class RecurrentMultiRollout(NamedTuple):
    """`MultiRollout`'s fields, in its order, and what a recurrent agent adds (as
    `RecurrentRollout`)."""

    states: torch.Tensor  # (T, N, O + A)
    next_states: torch.Tensor  # (T, N, O + A)
    actions: torch.Tensor  # (T, N, U) float, or (T, N) int64
    logprobs: torch.Tensor  # (T, N)
    agent_rewards: torch.Tensor  # (T, N)
    agent_terminals: torch.Tensor  # (T, N) bool
    agent_truncates: torch.Tensor  # (T, N) bool
    critic_states: torch.Tensor  # (T, N, S + A)
    next_critic_states: torch.Tensor  # (T, N, S + A)
    avail: torch.Tensor  # (T, N, U) bool
    rewards: torch.Tensor  # (T, E)
    terminals: torch.Tensor  # (T, E) bool
    truncates: torch.Tensor  # (T, E) bool
    hiddens: torch.Tensor  # (T, N, Hs): each agent's hidden state before each step
    starts: torch.Tensor  # (T, N) bool: the step begins the agent's episode


class JointMemory:
    """Mixed in before a recurrent agent of a multi-agent algorithm: every observation the env
    gives holds one memory row per agent."""

    multi_spec: Any  # set by the agent this is mixed into

    @property
    def per_state(self) -> int:
        return self.multi_spec.num_agents


class RecurrentMAPPO(JointMemory, Recurrent):
    """MAPPO's rollout is already one of PPO's sub-envs per (sub-env, agent): its sequences are
    those rows."""

    rollout_class: ClassVar[Callable[..., Steps]] = RecurrentMultiRollout

    def update_net(self, rollout: Any) -> dict[str, torch.Tensor]:
        self.read_sequences(rollout)
        return super().update_net(rollout)  # type: ignore[misc]


class AgentRecurrentMAPPO(RecurrentMAPPO, AgentMAPPO):
    """MAPPO with a recurrent actor, continuous actions."""


class AgentRecurrentDiscreteMAPPO(RecurrentMAPPO, AgentDiscreteMAPPO):
    """MAPPO with a recurrent actor, discrete actions."""


class AgentRecurrentPQNVDN(JointMemory, RecurrentQ, AgentPQNVDN):
    """PQN-VDN with a recurrent Q-network: its rollout holds joint steps, one per sub-env, each
    the sequences of its A agents."""

    # states (T, E, width); hiddens and starts (T, N, ...)
    rollout_class: ClassVar[Callable[..., Steps]] = RecurrentPQNRollout

    def sequence_rows(self, envs: torch.Tensor) -> torch.Tensor:
        a = self.multi_spec.num_agents
        return (envs.unsqueeze(1) * a + torch.arange(a, device=envs.device)).flatten()


# the recurrent agent of each feed-forward one (`recurrent`)
RECURRENT_ON_POLICY = {AgentMAPPO: AgentRecurrentMAPPO,
                       AgentDiscreteMAPPO: AgentRecurrentDiscreteMAPPO,
                       AgentPQNVDN: AgentRecurrentPQNVDN}  # fmt: skip
