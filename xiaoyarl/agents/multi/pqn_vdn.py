"""PQN-VDN: PQN's Q(lambda) over vectorized rollouts with VDN's additive team value.

PQN: Gallici et al., "Simplifying Deep Temporal Difference Learning", ICLR 2025, whose
multi-agent experiments (SMAX, Overcooked, Hanabi) train this form; VDN: Sunehag et al.,
"Value-Decomposition Networks For Cooperative Multi-Agent Learning", 2017.

One LayerNorm Q-network shared by all agents (each observation with its agent id) gives every
agent's Q(o_i, .); the team's value is their sum, Q_tot(s, a) = sum_i Q(o_i, a_i). As PQN
(`agents/pqn.py`): epsilon-greedy rollouts of every sub-env (each agent its own random action
with probability epsilon, among its available ones), Peng's Q(lambda) returns of the team
reward over each rollout, bootstrapped from max Q_tot = sum_i max_a Q(o'_i, a) (additivity
makes the joint maximisation each agent's own), then several epochs of mini-batch regression
of Q_tot onto them. No replay buffer, no target network and no mixer to train.
Shapes: T = horizon, E = sub-envs, A = agents, O = observation, U = actions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, NamedTuple

import torch

from xiaoyarl.agents.multi.common import (
    JointLayout,
    agent_view,
    joint_evaluation_policy,
    masked_random_actions,
    with_agent_ids,
)
from xiaoyarl.agents.multi.value_decomposition import masked
from xiaoyarl.agents.pqn import AgentPQN
from xiaoyarl.envs.multi.base import team_reward

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import OptimizerKit, Steps
    from xiaoyarl.config import Config
    from xiaoyarl.envs.multi.base import MultiAgentEnvSpec


class JointRollout(NamedTuple):
    """PQN's rollout with joint steps: each step's observations, global state and masks packed
    in one vector per sub-env (`JointLayout`); the rewards are the team's."""

    states: torch.Tensor  # (T, E, width) packed joint steps
    actions: torch.Tensor  # (T, E, A) int64
    rewards: torch.Tensor  # (T, E) the team's reward
    terminals: torch.Tensor  # (T, E) bool
    truncates: torch.Tensor  # (T, E) bool
    next_states: torch.Tensor  # (T, E, width) the joint step each step reached


class AgentPQNVDN(AgentPQN):
    """PQN on the team reward with Q_tot the sum of the agents' Q-values (discrete actions,
    honouring action masks)."""

    if_multi_agent = True
    rollout_class: ClassVar[Callable[..., Steps]] = JointRollout

    def __init__(self, spec: MultiAgentEnvSpec, config: Config, device: torch.device,
                 learner: bool = True, kit: OptimizerKit | None = None) -> None:  # fmt: skip
        self.multi_spec = spec
        self.layout = JointLayout(spec)
        super().__init__(agent_view(spec), config, device, learner, kit)

    def next_observation(self, obs: torch.Tensor, info: dict) -> torch.Tensor:
        return self.layout.pack(obs, info["state"], info.get("avail_actions"))

    def agent_q(self, packed: torch.Tensor) -> torch.Tensor:
        """Every agent's Q(o_i, .) `(B, A, U)`, unavailable actions at -inf, from packed joint
        steps `(B, width)`."""
        joint = self.layout.unpack(packed)
        return masked(self.q_values(joint.obs), joint.avail)

    def q_values(self, obs: torch.Tensor) -> torch.Tensor:
        """Every agent's Q(o_i, .) `(B, A, U)` for observations `(B, A, O)`, the agents' rows
        `(B * A, ...)` in one batch (a recurrent network's memory reads them so)."""
        q = self.qnet.q_values(with_agent_ids(obs).flatten(0, 1))
        return q.view(*obs.shape[:2], -1)

    # --- acting ---
    def explore_step(
        self, packed: torch.Tensor, epsilon: float | torch.Tensor | None = None
    ) -> tuple[torch.Tensor, tuple]:
        # differs: each agent epsilon-greedy among its own available actions
        joint = self.layout.unpack(packed)
        greedy = self.agent_q(packed).argmax(-1)  # (E, A)
        random = masked_random_actions(joint.avail, tuple(greedy.shape),
                                       self.multi_spec.action_dim, self.device)  # fmt: skip
        action = self.epsilon_greedy(greedy, random, epsilon)
        return action, (packed, action)

    def record(self, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
               truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
        packed, action = kept
        final = self.layout.pack(info["final_obs"], info["final_state"],
                                 info.get("final_avail_actions"))  # fmt: skip
        return packed, action, team_reward(self.multi_spec, reward), terminal, truncate, final

    @torch.no_grad()
    def act(self, obs: torch.Tensor, avail: torch.Tensor | None = None) -> torch.Tensor:
        """Greedy joint action `(E, A)` for observations `(E, A, O)` (and masks `(E, A, U)`)."""
        return masked(self.q_values(obs), avail).argmax(-1)

    def evaluation_policy(self) -> Callable[..., torch.Tensor]:
        return joint_evaluation_policy(self)

    # --- learning: PQN's update with the team's value ---
    def greedy_values(self, states: torch.Tensor) -> torch.Tensor:
        # differs: max Q_tot, the sum of each agent's best available action's value (read from
        # the unmasked values at the masked argmax: an agent with no available action then adds
        # a finite value, as in VDN and QMIX, not -inf)
        joint = self.layout.unpack(states)
        q = self.q_values(joint.obs)  # (B, A, U)
        best = masked(q, joint.avail).argmax(-1, keepdim=True)
        return q.gather(-1, best).squeeze(-1).sum(-1)

    def chosen_values(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        # differs: Q_tot of the joint action taken (unmasked values: the action was taken)
        q = self.q_values(self.layout.unpack(states).obs)  # (B, A, U)
        return q.gather(-1, actions.unsqueeze(-1)).squeeze(-1).sum(-1)

    def update_state_norm(self, states: torch.Tensor) -> None:
        # differs: the shared network normalises observations with their agent ids
        obs = self.layout.unpack(states).obs
        self.state_norm.update(with_agent_ids(obs).flatten(0, 1))
