"""Recurrent PPO, A2C and PQN (`--set recurrent=lstm|gru`): policies with memory, for tasks
where one observation does not tell the state (partial observability).

The networks read observations through a `RecurrentEncoder` (`core/recurrent.py`): the usual
encoder, then an LSTM (Hochreiter and Schmidhuber 1997) or a GRU (Cho et al. 2014) of
`recurrent_dim` units, whose output the heads (`net_dims`) read. PPO's and A2C's actor and critic
share it, as in CleanRL's recurrent PPO, so one hidden state per sub-env carries the episode so
far; PQN's Q-network reads it as its own recurrent Q-network (DRQN, Hausknecht and Stone 2015),
trained on its own rollouts as the feed-forward PQN.

What changes against the feed-forward agent:
- exploring carries the hidden state from step to step and zeroes it where an episode starts;
  the rollout stores the hidden state before each step and the episode starts;
- values (PPO's V, PQN's max Q) are computed over each sub-env's whole rollout as one
  sequence, from its stored first hidden state; the value of the state a step reached (for the
  bootstrap, also through truncation) continues from the hidden state after that step;
- mini-batches are whole sub-envs' sequences (truncated backpropagation through time over the
  rollout): `batch_size // horizon_len` sub-envs each, every epoch a new partition;
- evaluation and saved policies keep their own hidden states (`reset()` starts anew);
- the hidden states and episode starts are part of the checkpoint, so a resume continues
  bit-exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import torch

from xiaoyarl.agents.a2c import AgentA2C, AgentDiscreteA2C
from xiaoyarl.agents.memory import Memory
from xiaoyarl.agents.ppo import AgentDiscretePPO, AgentPPO, PPOBatch, Rollout
from xiaoyarl.agents.pqn import AgentPQN
from xiaoyarl.core.recurrent import RecurrentEncoder
from xiaoyarl.core.reduce import MiniBatches
from xiaoyarl.errors import ConfigError

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import Steps
    from xiaoyarl.core.encoders import Encoder
    from xiaoyarl.core.nets import RunningNorm


class RecurrentRollout(NamedTuple):
    """`Rollout`'s fields and what a recurrent agent adds; T = horizon_len, N = num_envs,
    Hs = the hidden state's width."""

    states: torch.Tensor  # (T, N, *obs_shape)
    actions: torch.Tensor  # (T, N, A) or (T, N)
    logprobs: torch.Tensor  # (T, N)
    rewards: torch.Tensor  # (T, N)
    terminals: torch.Tensor  # (T, N) bool
    truncates: torch.Tensor  # (T, N) bool
    next_states: torch.Tensor  # (T, N, *obs_shape): before any auto-reset
    hiddens: torch.Tensor  # (T, N, Hs): the hidden state before each step
    starts: torch.Tensor  # (T, N) bool: the step begins an episode (its hidden state is zeroed)
    critic_states: torch.Tensor | None = None
    next_critic_states: torch.Tensor | None = None
    action_masks: torch.Tensor | None = None


class RecurrentPQNRollout(NamedTuple):
    """PQN's `Rollout` fields and what a recurrent agent adds (as `RecurrentRollout`)."""

    states: torch.Tensor  # (T, N, *obs_shape)
    actions: torch.Tensor  # (T, N) int64
    rewards: torch.Tensor  # (T, N)
    terminals: torch.Tensor  # (T, N) bool
    truncates: torch.Tensor  # (T, N) bool
    next_states: torch.Tensor  # (T, N, *obs_shape): before any auto-reset
    hiddens: torch.Tensor  # (T, N, Hs): the hidden state before each step
    starts: torch.Tensor  # (T, N) bool: the step begins an episode (its hidden state is zeroed)


class Recurrent(Memory):
    """The recurrent version of an on-policy agent, mixed in before it (see the module): what
    every such agent shares; `RecurrentActorCritic` and `RecurrentQ` say where the PPO family
    and PQN read their rollouts' sequences."""

    feature_dim: int  # set by the agent this is mixed into

    def __init__(self, spec, config, device, learner=True, kit=None) -> None:  # noqa: ANN001
        super().__init__(spec, config, device, learner, kit)  # type: ignore[call-arg]
        self.memory: RecurrentEncoder = self.actor.norm
        n = spec.num_envs * self.per_state  # the memory rows
        self.hidden = self.memory.initial(n)  # (N, Hs) where exploring goes on
        self.starts = torch.ones(n, dtype=torch.bool, device=device)  # (N,) next step begins one
        self.sequences: tuple[torch.Tensor, torch.Tensor] | None = None  # of the batch updated

    def make_encoder(self, layer_norm: bool = False) -> Encoder | RunningNorm:
        inner = super().make_encoder(layer_norm)  # type: ignore[misc]
        encoder = RecurrentEncoder(inner, self.config.recurrent_dim, self.config.recurrent)
        self.feature_dim = encoder.out_dim
        return encoder.to(self.device)  # type: ignore[return-value]

    # --- exploring ---
    def explore_step(self, state: torch.Tensor, *args: Any) -> tuple[torch.Tensor, tuple]:
        """The agent's step, its networks continuing each sub-env's hidden state; keeps the
        hidden state before the step and the episode starts too."""
        hidden, starts = self.hidden, self.starts
        with self.memory.context(hidden, starts.unsqueeze(0)):
            action, kept = super().explore_step(state, *args)  # type: ignore[misc]
        assert self.memory.hiddens is not None
        self.hidden = self.memory.hiddens[0]
        return action, (*kept, hidden, starts)

    def record(self, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
               truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
        *own, hidden, starts = kept
        # the next step of these sub-envs begins an episode
        self.starts = (terminal | truncate).repeat_interleave(self.per_state)
        steps = super().record(tuple(own), reward, terminal, truncate, info)  # type: ignore[misc]
        return (*steps, hidden, starts)

    # --- the update ---
    def read_sequences(self, rollout: Any) -> None:
        """Keep the rollout's first hidden states and episode starts: the update's networks run
        along each sub-env's sequence from them."""
        self.sequences = (rollout.hiddens[0], rollout.starts)

    def along_rollout(self, net: Callable[[torch.Tensor], torch.Tensor], states: torch.Tensor,
                      next_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """`net` `(T * N, ...)` on the rollout's states `(T, N, ...)`, along each sub-env's
        sequence; and on the states its steps reached, each from the hidden state after its
        step (before any reset: the bootstrap, also through truncation)."""
        assert self.sequences is not None, "set by read_sequences"
        first, starts = self.sequences
        with self.memory.context(first, starts):
            outputs = net(states.flatten(0, 1))
        assert self.memory.hiddens is not None
        after = self.memory.hiddens.flatten(0, 1)  # (T * N, Hs)
        with self.memory.context(after, torch.zeros_like(starts.view(1, -1))):
            next_outputs = net(next_states.flatten(0, 1))
        return outputs, next_outputs

    def minibatches(self, horizon_len: int, num_envs: int) -> MiniBatches:
        """Whole sub-envs' sequences: `batch_size // horizon_len` sub-envs a mini-batch (at
        least one), `repeat_times` epochs, each a new partition of the sub-envs; indices into
        the flat, time-major batch."""
        cfg = self.config
        per = min(num_envs, max(1, cfg.batch_size // horizon_len))
        count = max(1, int(cfg.repeat_times * num_envs / per))
        order = torch.cat([torch.randperm(num_envs, device=self.device)
                           for _ in range(-(-count * per // num_envs))])  # fmt: skip
        steps = torch.arange(horizon_len, device=self.device).unsqueeze(1) * num_envs
        groups = [order[i * per : (i + 1) * per] for i in range(count)]
        return MiniBatches([(steps + group).flatten() for group in groups], torch.mean)

    def sequence_rows(self, envs: torch.Tensor) -> torch.Tensor:
        """The memory rows (sequences) of the rollout's sub-envs `envs`: themselves, where each
        sub-env of the rollout is one sequence."""
        return envs

    def minibatch_loss(self, data: Any, idx: torch.Tensor,
                       mean: Callable[[torch.Tensor], torch.Tensor],
                       ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """The agent's loss on the mini-batch `idx` (whole sub-envs' sequences), its networks
        running along those sequences."""
        assert self.sequences is not None, "set by read_sequences"
        first, starts = self.sequences
        group = self.sequence_rows(idx[: idx.shape[0] // starts.shape[0]])  # step 0's indices
        with self.memory.context(first[group], starts[:, group]):
            return super().minibatch_loss(data, idx, mean)  # type: ignore[misc]


class RecurrentActorCritic(Recurrent):
    """Recurrent PPO and A2C: values along each sub-env's sequence, one encoder (and hidden
    state) shared by actor and critic."""

    rollout_class: ClassVar[Callable[..., Steps]] = RecurrentRollout
    critic: Any

    def __init__(self, spec, config, device, learner=True, kit=None) -> None:  # noqa: ANN001
        if not config.share_encoder:
            raise ConfigError(
                "recurrent=... with share_encoder=false: recurrent PPO and A2C share one "
                "recurrent encoder between actor and critic (one hidden state per sub-env); "
                "remove share_encoder=false."
            )
        super().__init__(spec, config, device, learner, kit)

    def ppo_batch(self, rollout: Rollout) -> PPOBatch:
        assert hasattr(rollout, "hiddens"), "a recurrent agent explores its rollouts"
        self.read_sequences(rollout)
        return super().ppo_batch(rollout)  # type: ignore[misc]

    def critic_outputs(self, states: torch.Tensor, next_states: torch.Tensor,
                       ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        return self.along_rollout(self.critic, states, next_states)


class RecurrentQ(Recurrent):
    """Recurrent PQN (a DRQN trained on its own rollouts, as PQN's recurrent variant in its
    authors' code): the Q(lambda) returns bootstrap from Q-values along each sub-env's
    sequence, and the regression runs along whole sequences."""

    rollout_class: ClassVar[Callable[..., Steps]] = RecurrentPQNRollout
    greedy_values: Callable[[torch.Tensor], torch.Tensor]

    def pqn_update(self, rollout: Any) -> dict[str, torch.Tensor]:
        self.read_sequences(rollout)
        return super().pqn_update(rollout)  # type: ignore[misc]

    def next_values(self, rollout: Any) -> torch.Tensor:
        return self.along_rollout(self.greedy_values, rollout.states, rollout.next_states)[1]


class AgentRecurrentPPO(RecurrentActorCritic, AgentPPO):
    """PPO with a recurrent policy and value function, continuous actions."""


class AgentRecurrentDiscretePPO(RecurrentActorCritic, AgentDiscretePPO):
    """PPO with a recurrent policy and value function, discrete actions."""


class AgentRecurrentA2C(RecurrentActorCritic, AgentA2C):
    """A2C with a recurrent policy and value function, continuous actions."""


class AgentRecurrentDiscreteA2C(RecurrentActorCritic, AgentDiscreteA2C):
    """A2C with a recurrent policy and value function, discrete actions."""


class AgentRecurrentPQN(RecurrentQ, AgentPQN):
    """PQN with a recurrent Q-network."""


# the recurrent agent of each feed-forward one
RECURRENT = {AgentPPO: AgentRecurrentPPO, AgentDiscretePPO: AgentRecurrentDiscretePPO,
             AgentA2C: AgentRecurrentA2C, AgentDiscreteA2C: AgentRecurrentDiscreteA2C,
             AgentPQN: AgentRecurrentPQN}  # fmt: skip
