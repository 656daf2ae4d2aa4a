"""Single-agent action masks (an env whose info says which actions are allowed, as
`info["action_mask"]`, MaskablePPO's convention; `EnvSpec.action_mask`): honoured by PPO, A2C,
PQN, discrete SAC and the DQN family when exploring, in the loss, and when evaluating.

- PPO and A2C keep each step's mask in the rollout: exploring samples among the allowed
  actions, the loss's log-probabilities and entropy are those of the masked policy (a masked
  action's logit is a large negative number, as the multi-agent agents do), and evaluation picks
  the best allowed action.
- The DQN family packs the mask beside the observation, so the replay buffer keeps the mask of
  every state, and of the true last state of a truncated episode, with no second store; the
  networks read the observation part. Exploring picks the best allowed action, or (epsilon) a
  uniformly random allowed one; the TD target's max (DQN) or argmax (Double DQN, D3QN) runs
  over the next state's allowed actions only.
- Discrete SAC packs the mask as the DQN family does: exploring samples the masked policy, the
  soft value of the target and the actor's loss sum over the allowed actions only, and the
  temperature's target entropy is a share of the uniform policy's over each state's allowed
  actions.
- PQN keeps the mask of each state a step reached in its rollout: exploring picks the best
  allowed action, or (epsilon) a uniformly random allowed one, and the Q(lambda) returns
  bootstrap from the max over the allowed actions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import torch
from torch import nn

from xiaoyarl.agents.a2c import AgentDiscreteA2C
from xiaoyarl.agents.acting import allowed_or_all, masked_greedy, random_allowed, sampling_policy
from xiaoyarl.agents.dqn import AgentD3QN, AgentDoubleDQN, AgentDQN
from xiaoyarl.agents.ppo import AgentDiscretePPO
from xiaoyarl.agents.pqn import AgentPQN
from xiaoyarl.agents.sac import AgentSACDiscrete
from xiaoyarl.core.buffer import Transitions
from xiaoyarl.core.encoders import Encoder
from xiaoyarl.errors import ConfigError

if TYPE_CHECKING:
    from xiaoyarl.core.nets import RunningNorm


class MaskedRollout(NamedTuple):
    """`Rollout` (agents/ppo.py) with each step's allowed actions."""

    states: torch.Tensor  # (T, N, *obs_shape)
    actions: torch.Tensor  # (T, N) int64
    logprobs: torch.Tensor  # (T, N)
    rewards: torch.Tensor  # (T, N)
    terminals: torch.Tensor  # (T, N) bool
    truncates: torch.Tensor  # (T, N) bool
    next_states: torch.Tensor  # (T, N, *obs_shape)
    action_masks: torch.Tensor  # (T, N, A) bool: the actions allowed at each step
    critic_states: torch.Tensor | None = None
    next_critic_states: torch.Tensor | None = None


class MaskedPQNRollout(NamedTuple):
    """PQN's `Rollout` (agents/pqn.py) with the actions allowed in each state a step reached."""

    states: torch.Tensor  # (T, N, *obs_shape)
    actions: torch.Tensor  # (T, N) int64
    rewards: torch.Tensor  # (T, N)
    terminals: torch.Tensor  # (T, N) bool
    truncates: torch.Tensor  # (T, N) bool
    next_states: torch.Tensor  # (T, N, *obs_shape)
    next_action_masks: torch.Tensor  # (T, N, A) bool: the actions allowed where a step arrived


class CarriesMask:
    """An on-policy agent's mask of the actions allowed where each sub-env's exploring goes on,
    read from the env's info and kept in its checkpoints."""

    device: torch.device
    mask: torch.Tensor | None = None  # (N, A) the actions allowed where exploring goes on

    def next_observation(self, state: torch.Tensor, info: dict) -> torch.Tensor:
        self.mask = info["action_mask"]
        return state

    def sub_env_state(self) -> dict:
        return {**super().sub_env_state(), "mask": self.mask}  # type: ignore[misc]

    def load_sub_env_state(self, state: dict) -> None:
        super().load_sub_env_state(state)  # type: ignore[misc]
        self.mask = state["mask"]

    def state_dict(self) -> dict:
        return {**super().state_dict(), "mask": self.mask}  # type: ignore[misc]

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)  # type: ignore[misc]
        mask = state["mask"]
        self.mask = None if mask is None else mask.to(self.device)


class MaskedPPO(CarriesMask):
    """Mixed in before a discrete PPO-family agent (see the module)."""

    rollout_class: ClassVar[Any] = MaskedRollout
    actor: Any

    def explore_step(self, state: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        action, logprob = self.actor.get_action(state, self.mask)
        return action, (state, action, logprob, self.mask)

    def record(self, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
               truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
        state, action, logprob, mask = kept
        return state, action, logprob, reward, terminal, truncate, info["final_state"], mask

    @torch.no_grad()
    def act(self, state: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The most likely allowed action (all allowed without a mask)."""
        return self.actor(state, mask)


class MaskedPQN(CarriesMask):
    """Mixed in before PQN (see the module)."""

    rollout_class: ClassVar[Any] = MaskedPQNRollout
    qnet: Any
    spec: Any

    def explore_step(self, state: torch.Tensor, epsilon: float | torch.Tensor | None = None,
                     ) -> tuple[torch.Tensor, tuple]:  # fmt: skip
        assert self.mask is not None, "next_observation keeps the env's mask"
        greedy = masked_greedy(self.qnet.q_values(state), self.mask)
        action = self.epsilon_greedy(greedy, random_allowed(self.mask), epsilon)  # type: ignore[attr-defined]
        return action, (state, action)

    def record(self, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
               truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
        steps = super().record(kept, reward, terminal, truncate, info)  # type: ignore[misc]
        return (*steps, info["final_action_mask"])

    def next_values(self, rollout: Any) -> torch.Tensor:
        """max over the allowed actions of Q(s', a) `(T * N,)` of the states the steps reached."""
        return self.allowed_max(self.qnet.q_values(rollout.next_states.flatten(0, 1)), rollout)

    @staticmethod
    def allowed_max(q: torch.Tensor, rollout: Any) -> torch.Tensor:
        """The max over the allowed actions of the Q-values `(T * N, A)` of the states the
        rollout's steps reached."""
        allowed = allowed_or_all(rollout.next_action_masks.flatten(0, 1))
        return q.masked_fill(~allowed, -torch.inf).max(-1).values

    @torch.no_grad()
    def act(self, state: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The best allowed action (all allowed without a mask)."""
        q = self.qnet.q_values(state)
        return q.argmax(-1) if mask is None else masked_greedy(q, mask)


class MaskSlice(Encoder):
    """An encoder of packed `[observation, mask]` rows `(B, S + A)`: `inner` on the first S
    values (the masked DQN family's networks)."""

    reads_mask = True  # what acts through it packs the mask beside the observation

    def __init__(self, inner: nn.Module, obs_dim: int) -> None:
        super().__init__()
        self.inner = inner
        self.obs_dim = obs_dim
        self.out_dim = int(inner.out_dim)  # type: ignore[arg-type]

    def init_kwargs(self) -> dict:
        """Its constructor's arguments besides `inner` (a saved policy rebuilds it from them)."""
        return {"obs_dim": self.obs_dim}

    def forward(self, packed: torch.Tensor) -> torch.Tensor:
        return self.inner(packed[:, : self.obs_dim])


class PacksMask:
    """An off-policy agent's mask packed beside each observation (see the module): the replay
    buffer keeps it, the networks read the observation part (`MaskSlice`). Exploring takes a
    uniformly random allowed action before learning starts, then `masked_explore_action`."""

    spec: Any
    config: Any
    device: torch.device
    explored: int
    state_norm: RunningNorm

    def __init__(self, spec, config, device, learner=True, kit=None) -> None:  # noqa: ANN001
        if len(spec.obs_shape) != 1 or spec.obs_keys:
            raise ConfigError(
                f"{spec.name}: {config.algo} reads action masks with vector observations; for "
                f"images or Dict observations with masks use ppo or a2c."
            )
        super().__init__(spec, config, device, learner, kit)  # type: ignore[call-arg]

    def make_encoder(self, layer_norm: bool = False) -> Any:
        inner = super().make_encoder(layer_norm)  # type: ignore[misc]
        encoder = MaskSlice(inner, self.spec.state_dim)
        return encoder.to(self.device)

    # the packed rows: the observation, then the mask as 0/1
    def pack(self, state: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.cat([state, mask.float()], dim=-1)

    def split(self, packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return packed[:, : self.spec.state_dim], packed[:, self.spec.state_dim :] > 0.5

    def all_allowed(self, state: torch.Tensor) -> torch.Tensor:
        """A mask `(B, A)` allowing every action, for rows of `state` acted on without one."""
        return torch.ones(state.shape[0], self.spec.action_dim, dtype=torch.bool,
                          device=state.device)  # fmt: skip

    def buffer_sizes(self) -> tuple:
        capacity, n, s, a, discrete, max_step = super().buffer_sizes()  # type: ignore[misc]
        return capacity, n, s + a, a, discrete, max_step

    def buffer_obs(self) -> tuple[tuple[int, ...] | None, torch.dtype]:
        return None, torch.float32

    def next_observation(self, state: torch.Tensor, info: dict) -> torch.Tensor:
        return self.pack(state, info["action_mask"])

    def explore_step(self, packed: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        _, mask = self.split(packed)
        if self.explored < self.config.learning_starts:
            action = random_allowed(mask)
        else:
            action = self.masked_explore_action(packed, mask)
        return action, (packed, action)

    def masked_explore_action(self, packed: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The agent's exploring action `(B,)` among the allowed ones, once learning started."""
        raise NotImplementedError

    def record(self, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
               truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
        packed, action = kept
        reached = self.pack(info["final_state"], info["final_action_mask"])
        return packed, action, reward, terminal, truncate, reached

    def update_normalizers(self, rollout: Transitions) -> None:
        self.state_norm.update(self.split(rollout.states.flatten(0, 1))[0])

    def evaluation_policy(self) -> Any:
        if self.config.eval_deterministic:
            return self.act  # type: ignore[attr-defined]
        sample = sampling_policy(self.actor, self.config)  # type: ignore[attr-defined]
        return lambda state, mask: sample(self.pack(state, mask), mask)  # it reads packed rows


class MaskedDQN(PacksMask):
    """Mixed in before a DQN-family agent (see the module)."""

    qnet: Any

    def masked_explore_action(self, packed: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        greedy = masked_greedy(self.qnet.q_values(packed), mask)
        return self.epsilon_greedy(greedy, random_allowed(mask))  # type: ignore[attr-defined]

    @torch.no_grad()
    def act(self, state: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The best allowed action of raw observations (all allowed without a mask)."""
        mask = self.all_allowed(state) if mask is None else mask
        return masked_greedy(self.qnet.q_values(self.pack(state, mask)), mask)


class MaskedDQNTarget(MaskedDQN):
    """DQN: max over the next state's allowed actions of the target network's Q."""

    def next_action(self, next_states: torch.Tensor, target_q: torch.Tensor) -> torch.Tensor:
        return masked_greedy(target_q, self.split(next_states)[1])


class MaskedDoubleTarget(MaskedDQN):
    """Double DQN, D3QN: the online network picks the best allowed next action."""

    def next_action(self, next_states: torch.Tensor, target_q: torch.Tensor) -> torch.Tensor:
        return masked_greedy(self.qnet.q_values(next_states), self.split(next_states)[1])


class MaskedSACDiscrete(PacksMask):
    """Mixed in before discrete SAC (see the module)."""

    actor: Any

    def masked_explore_action(self, packed: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.actor.sample(packed, allowed_or_all(mask))

    def policy(self, packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.actor.probs_logprobs(packed, allowed_or_all(self.split(packed)[1]))

    def state_target_entropy(self, packed: torch.Tensor) -> torch.Tensor:
        """`entropy_fraction` of the uniform policy's entropy over each state's allowed
        actions (0 where one is allowed)."""
        allowed = allowed_or_all(self.split(packed)[1]).sum(-1).float()
        return self.entropy_fraction * allowed.log()  # type: ignore[attr-defined]

    @torch.no_grad()
    def act(self, state: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The most likely allowed action of raw observations (all allowed without a mask)."""
        mask = self.all_allowed(state) if mask is None else mask
        return self.actor(self.pack(state, mask), allowed_or_all(mask))


class AgentMaskedPPO(MaskedPPO, AgentDiscretePPO):
    """PPO honouring action masks."""


class AgentMaskedA2C(MaskedPPO, AgentDiscreteA2C):
    """A2C honouring action masks."""


class AgentMaskedPQN(MaskedPQN, AgentPQN):
    """PQN honouring action masks."""


class AgentMaskedSACDiscrete(MaskedSACDiscrete, AgentSACDiscrete):
    """Discrete SAC honouring action masks."""


class AgentMaskedDQN(MaskedDQNTarget, AgentDQN):
    """DQN honouring action masks."""


class AgentMaskedDoubleDQN(MaskedDoubleTarget, AgentDoubleDQN):
    """Double DQN honouring action masks."""


class AgentMaskedD3QN(MaskedDoubleTarget, AgentD3QN):
    """D3QN honouring action masks."""


# the masked agent of each agent that honours masks
MASKED: dict[type, type] = {
    AgentDiscretePPO: AgentMaskedPPO, AgentDiscreteA2C: AgentMaskedA2C, AgentDQN: AgentMaskedDQN,
    AgentDoubleDQN: AgentMaskedDoubleDQN, AgentD3QN: AgentMaskedD3QN, AgentPQN: AgentMaskedPQN,
    AgentSACDiscrete: AgentMaskedSACDiscrete,
}  # fmt: skip
