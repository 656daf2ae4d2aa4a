"""Memory with the other variants: a recurrent policy in an env with action masks,
multi-discrete actions or hybrid actions. Each is the recurrent agents' mixin (on-policy,
`agents/recurrent.py`; replaying sequences, `agents/recurrent_replay.py`) before the variant's
agent, and nothing else: the variant chooses the networks, packs or keeps the masks and
computes its targets, the mixin carries the hidden states. What a mixin needs to know of a
variant is here: the order of a masked rollout's fields, and where masked PQN takes its max.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import torch

from xiaoyarl.agents.hybrid import AgentHybridA2C, AgentHybridPPO
from xiaoyarl.agents.masked import (
    AgentMaskedA2C,
    AgentMaskedD3QN,
    AgentMaskedDoubleDQN,
    AgentMaskedDQN,
    AgentMaskedPPO,
    AgentMaskedPQN,
    AgentMaskedSACDiscrete,
)
from xiaoyarl.agents.multi_discrete import (
    AgentBranchingD3QN,
    AgentBranchingDoubleDQN,
    AgentBranchingDQN,
    AgentBranchingPQN,
    AgentMultiDiscreteA2C,
    AgentMultiDiscretePPO,
)
from xiaoyarl.agents.recurrent import RecurrentActorCritic, RecurrentQ
from xiaoyarl.agents.recurrent_replay import RecurrentReplay

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import Steps


class RecurrentMaskedRollout(NamedTuple):
    """The masked agents' rollout (`agents/masked.py`) and the recurrent agents' hidden states,
    in the order their `record`s give them."""

    states: torch.Tensor  # (T, N, *obs_shape)
    actions: torch.Tensor  # (T, N) int64
    logprobs: torch.Tensor  # (T, N)
    rewards: torch.Tensor  # (T, N)
    terminals: torch.Tensor  # (T, N) bool
    truncates: torch.Tensor  # (T, N) bool
    next_states: torch.Tensor  # (T, N, *obs_shape)
    action_masks: torch.Tensor  # (T, N, A) bool: the actions allowed at each step
    hiddens: torch.Tensor  # (T, N, Hs): the hidden state before each step
    starts: torch.Tensor  # (T, N) bool: the step begins an episode
    critic_states: torch.Tensor | None = None
    next_critic_states: torch.Tensor | None = None


class RecurrentMaskedPQNRollout(NamedTuple):
    """Masked PQN's rollout and the recurrent agents' hidden states, in their `record`s' order."""

    states: torch.Tensor  # (T, N, *obs_shape)
    actions: torch.Tensor  # (T, N) int64
    rewards: torch.Tensor  # (T, N)
    terminals: torch.Tensor  # (T, N) bool
    truncates: torch.Tensor  # (T, N) bool
    next_states: torch.Tensor  # (T, N, *obs_shape)
    next_action_masks: torch.Tensor  # (T, N, A) bool: the actions allowed where a step arrived
    hiddens: torch.Tensor  # (T, N, Hs): the hidden state before each step
    starts: torch.Tensor  # (T, N) bool: the step begins an episode


class RecurrentMaskedQ(RecurrentQ):
    """Recurrent PQN honouring action masks: the Q(lambda) returns bootstrap from the max over
    the allowed actions of the Q-values along each sub-env's sequence."""

    rollout_class: ClassVar[Callable[..., Steps]] = RecurrentMaskedPQNRollout
    qnet: Any
    allowed_max: Callable[[torch.Tensor, Any], torch.Tensor]

    def next_values(self, rollout: Any) -> torch.Tensor:
        q = self.along_rollout(self.qnet.q_values, rollout.states, rollout.next_states)[1]
        return self.allowed_max(q, rollout)


class RecurrentMasked(RecurrentActorCritic):
    """Recurrent PPO and A2C honouring action masks."""

    rollout_class: ClassVar[Callable[..., Steps]] = RecurrentMaskedRollout


class AgentRecurrentMaskedPPO(RecurrentMasked, AgentMaskedPPO):
    """PPO with a recurrent policy, honouring action masks."""


class AgentRecurrentMaskedA2C(RecurrentMasked, AgentMaskedA2C):
    """A2C with a recurrent policy, honouring action masks."""


class AgentRecurrentMultiDiscretePPO(RecurrentActorCritic, AgentMultiDiscretePPO):
    """PPO with a recurrent policy, multi-discrete actions."""


class AgentRecurrentMultiDiscreteA2C(RecurrentActorCritic, AgentMultiDiscreteA2C):
    """A2C with a recurrent policy, multi-discrete actions."""


class AgentRecurrentHybridPPO(RecurrentActorCritic, AgentHybridPPO):
    """PPO with a recurrent policy, hybrid actions."""


class AgentRecurrentHybridA2C(RecurrentActorCritic, AgentHybridA2C):
    """A2C with a recurrent policy, hybrid actions."""


class AgentRecurrentMaskedPQN(RecurrentMaskedQ, AgentMaskedPQN):
    """PQN with a recurrent Q-network, honouring action masks."""


class AgentRecurrentBranchingPQN(RecurrentQ, AgentBranchingPQN):
    """PQN with a recurrent Q-network, multi-discrete actions (action branching)."""


class AgentRecurrentMaskedDQN(RecurrentReplay, AgentMaskedDQN):
    """DQN with a recurrent Q-network (R2D2's replay), honouring action masks."""


class AgentRecurrentMaskedDoubleDQN(RecurrentReplay, AgentMaskedDoubleDQN):
    """Double DQN with a recurrent Q-network, honouring action masks."""


class AgentRecurrentMaskedD3QN(RecurrentReplay, AgentMaskedD3QN):
    """D3QN with a recurrent dueling Q-network, honouring action masks."""


class AgentRecurrentMaskedSACDiscrete(RecurrentReplay, AgentMaskedSACDiscrete):
    """Discrete SAC with a recurrent actor and critics, honouring action masks."""


class AgentRecurrentBranchingDQN(RecurrentReplay, AgentBranchingDQN):
    """DQN with a recurrent Q-network, multi-discrete actions (action branching)."""


class AgentRecurrentBranchingDoubleDQN(RecurrentReplay, AgentBranchingDoubleDQN):
    """Double DQN with a recurrent Q-network, multi-discrete actions (action branching)."""


class AgentRecurrentBranchingD3QN(RecurrentReplay, AgentBranchingD3QN):
    """D3QN with a recurrent dueling Q-network, multi-discrete actions (action branching)."""


# the recurrent agent of each variant
RECURRENT_COMBINED = {
    AgentMaskedPPO: AgentRecurrentMaskedPPO, AgentMaskedA2C: AgentRecurrentMaskedA2C,
    AgentMultiDiscretePPO: AgentRecurrentMultiDiscretePPO,
    AgentMultiDiscreteA2C: AgentRecurrentMultiDiscreteA2C,
    AgentHybridPPO: AgentRecurrentHybridPPO, AgentHybridA2C: AgentRecurrentHybridA2C,
    AgentMaskedPQN: AgentRecurrentMaskedPQN, AgentBranchingPQN: AgentRecurrentBranchingPQN,
    AgentMaskedDQN: AgentRecurrentMaskedDQN, AgentMaskedDoubleDQN: AgentRecurrentMaskedDoubleDQN,
    AgentMaskedD3QN: AgentRecurrentMaskedD3QN,
    AgentMaskedSACDiscrete: AgentRecurrentMaskedSACDiscrete,
    AgentBranchingDQN: AgentRecurrentBranchingDQN,
    AgentBranchingDoubleDQN: AgentRecurrentBranchingDoubleDQN,
    AgentBranchingD3QN: AgentRecurrentBranchingD3QN,
}  # fmt: skip
