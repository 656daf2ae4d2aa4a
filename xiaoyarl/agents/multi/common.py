"""What the multi-agent algorithms share: agent ids, the agent-view spec, and off-policy
exploration into the ordinary replay buffer.

Shapes: E = num_envs, A = num_agents, O = obs_dim, S = state_dim (the global state),
U = action_dim (discrete: number of actions, continuous: length of one agent's action).

Parameter sharing: one network serves every agent; each agent's observation is given its
agent-id one-hot, `(..., A, O) -> (..., A, O + A)`.

Replay: off-policy algorithms store one joint transition per sub-env in the single-agent
`ReplayBuffer` (its contiguous ring, prioritized replay and checkpoints come for free) by
packing what a sub-env shows at one step into one vector, `JointLayout`:
`[observations (A * O) | global state (S) | available actions (A * U, discrete envs with
masks)]`, and what happens in the step into the "action" vector: `[joint action (A indices, or
A * U values) | the agents' rewards (A)]` (discrete indices are small integers, exact as
floats). The buffer's scalar reward is the team reward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, NamedTuple

import torch

from xiaoyarl.agents.acting import sampling_policy
from xiaoyarl.agents.base import AgentBase
from xiaoyarl.agents.off_policy import AgentOffPolicy
from xiaoyarl.core.buffer import Transitions
from xiaoyarl.envs.base import EnvSpec
from xiaoyarl.envs.multi.base import MultiAgentEnvSpec, team_reward
from xiaoyarl.errors import ConfigError

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import OptimizerKit
    from xiaoyarl.config import Config


def with_agent_ids(obs: torch.Tensor) -> torch.Tensor:
    """Append each agent's id one-hot to its observation: `(..., A, O) -> (..., A, O + A)`."""
    num_agents = obs.shape[-2]
    ids = torch.eye(num_agents, dtype=obs.dtype, device=obs.device)
    return torch.cat([obs, ids.expand(*obs.shape[:-2], num_agents, num_agents)], dim=-1)


def agent_view(spec: MultiAgentEnvSpec) -> EnvSpec:
    """The single-agent spec of one agent's shared network: its observation with the agent
    id, its own actions, all `E * A` agent slots as sub-envs."""
    return EnvSpec(
        name=spec.name, num_envs=spec.num_envs * spec.num_agents,
        state_dim=spec.obs_dim + spec.num_agents, action_dim=spec.action_dim,
        if_discrete=spec.if_discrete, max_step=spec.max_step,
        target_return=spec.target_return, action_low=spec.action_low,
        action_high=spec.action_high,
    )  # fmt: skip


class Joint(NamedTuple):
    """What the sub-envs of a batch show at one step, unpacked from the replay buffer."""

    obs: torch.Tensor  # (B, A, O)
    state: torch.Tensor  # (B, S)
    avail: torch.Tensor | None  # (B, A, U) bool, discrete envs with action masks


class JointLayout:
    """Packs a joint step of a sub-env into one float vector and back (see the module)."""

    def __init__(self, spec: MultiAgentEnvSpec) -> None:
        self.spec = spec
        a, o, s, u = spec.num_agents, spec.obs_dim, spec.state_dim, spec.action_dim
        self.masked = spec.if_discrete and spec.has_action_mask
        self.sizes = (a * o, s, a * u if self.masked else 0)
        self.width = sum(self.sizes)
        self.joint_action_width = a if spec.if_discrete else a * u
        self.action_width = self.joint_action_width + a  # and the agents' rewards

    def pack(self, obs: torch.Tensor, state: torch.Tensor, avail: torch.Tensor | None
             ) -> torch.Tensor:  # fmt: skip
        """`(E, A, O), (E, S), (E, A, U) | None -> (E, width)`."""
        parts = [obs.flatten(1), state]
        if self.masked:
            ones = torch.ones(obs.shape[:2] + (self.spec.action_dim,), device=obs.device)
            parts.append((avail if avail is not None else ones).float().flatten(1))
        return torch.cat(parts, dim=1)

    def unpack(self, packed: torch.Tensor) -> Joint:
        spec = self.spec
        obs, state, avail = packed.split(self.sizes, dim=-1)
        obs = obs.view(*packed.shape[:-1], spec.num_agents, spec.obs_dim)
        if self.masked:
            avail = avail.view(*packed.shape[:-1], spec.num_agents, spec.action_dim) > 0.5
        else:
            avail = None
        return Joint(obs, state, avail)

    def pack_step(self, actions: torch.Tensor, rewards: torch.Tensor) -> torch.Tensor:
        """Joint actions `(E, A)` or `(E, A, U)` and rewards `(E, A)` -> `(E, action_width)`."""
        return torch.cat([actions.float().flatten(1), rewards], dim=1)

    def unpack_step(self, packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`(B, action_width)` -> joint actions `(B, A)` int64 or `(B, A, U)`, rewards `(B, A)`."""
        spec = self.spec
        actions, rewards = packed.split([self.joint_action_width, spec.num_agents], dim=-1)
        if spec.if_discrete:
            return actions.round().long(), rewards
        return actions.reshape(*packed.shape[:-1], spec.num_agents, spec.action_dim), rewards


def masked_random_actions(avail: torch.Tensor | None, shape: tuple[int, ...], n: int,
                          device: torch.device) -> torch.Tensor:  # fmt: skip
    """Uniformly random discrete actions `shape` int64 among the available ones (all when
    `avail` is None)."""
    if avail is None:
        return torch.randint(n, shape, device=device)
    weights = avail.float()
    return torch.multinomial(weights.view(-1, n), 1).view(shape)


def joint_evaluation_policy(agent: AgentBase) -> Callable[..., torch.Tensor]:
    """A multi-agent agent's evaluation policy `(obs (E, A, O), avail) -> (E, A[, U])`: its
    `act`, or where `eval_deterministic` is false each agent's exploring action."""
    if agent.config.eval_deterministic:
        return agent.act
    sample = sampling_policy(agent.actor, agent.config)

    def policy(obs: torch.Tensor, avail: torch.Tensor | None = None) -> torch.Tensor:
        masks = None if avail is None else avail.flatten(0, 1)
        action = sample(with_agent_ids(obs).flatten(0, 1), masks)
        return action.view(*obs.shape[:2], *action.shape[1:])

    return policy


class MultiAgentOffPolicy(AgentOffPolicy):
    """Mix-in of the off-policy multi-agent agents: builds the agent-view spec, explores the
    multi-agent env into the single-agent replay buffer (see the module docstring), and acts
    on `(E, A, O)` observations. It comes first in a class's bases, before the single-agent
    algorithm it extends (`AgentVDN(MultiAgentOffPolicy, AgentDQN)`)."""

    if_multi_agent = True
    # differs: the H-term and the search space of the single-agent algorithm are its own
    takes_h_term = False
    tune_space: ClassVar[str | None] = None

    @classmethod
    def check(cls, config: Config) -> None:
        # differs: one-step targets, the single-agent algorithm's own critics and noise
        if config.n_step > 1:
            raise ConfigError(
                f"n_step={config.n_step}: n-step returns are for the single-agent off-policy "
                "agents; the multi-agent ones learn from one-step targets (vdn and qmix with "
                "recurrent take td_lambda instead). Leave n_step at 1."
            )
        if config.recurrent and config.per:
            raise ConfigError(
                f"per=true with recurrent={config.recurrent}: recurrent agents replay whole "
                f"episodes, uniformly; set per=false."
            )
        if config.critic_atoms or config.crossq or config.explore_noise_std_max is not None:
            raise ConfigError(
                f"critic_atoms={config.critic_atoms}, crossq={config.crossq}, "
                f"explore_noise_std_max={config.explore_noise_std_max}: distributional critics, "
                "CrossQ's critics and per-sub-env noise are for the single-agent agents (the dqn "
                "family, ddpg, td3, sac, redq); leave them at their defaults (0, false and null) "
                "for the multi-agent ones."
            )
        super().check(config)

    def __init__(self, spec: MultiAgentEnvSpec, config, device, learner: bool = True,
                 kit: OptimizerKit | None = None) -> None:  # fmt: skip
        self.multi_spec = spec
        self.layout = JointLayout(spec)
        super().__init__(agent_view(spec), config, device, learner, kit)

    # --- the replay buffer holds joint steps ---
    def buffer_sizes(self) -> tuple:
        spec, layout = self.multi_spec, self.layout
        return (self.config.buffer_size, spec.num_envs, layout.width, layout.action_width,
                False, spec.max_step)  # fmt: skip

    def buffer_obs(self) -> tuple[tuple[int, ...] | None, torch.dtype]:
        return None, torch.float32  # differs: a joint step packed in one float vector

    def next_observation(self, obs: torch.Tensor, info: dict) -> torch.Tensor:
        return self.layout.pack(obs, info["state"], info.get("avail_actions"))

    def update_normalizers(self, rollout: Transitions) -> None:
        """The shared networks normalise observations with their agent ids."""
        obs = self.layout.unpack(rollout.states.flatten(0, 1)).obs
        self.state_norm.update(with_agent_ids(obs).flatten(0, 1))

    # --- exploring: joint steps, packed for the replay buffer ---
    def explore_step(self, packed: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        joint = self.layout.unpack(packed)
        self.read_observation(joint)
        if self.explored < self.config.learning_starts:
            action = self.random_joint_action(joint)
        else:
            action = self.explore_joint_action(joint)
        return action, (packed, action)

    def record(self, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
               truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
        packed, action = kept
        self.episodes_ended(terminal | truncate)
        final = self.layout.pack(info["final_obs"], info["final_state"],
                                 info.get("final_avail_actions"))  # fmt: skip
        return (packed, self.layout.pack_step(action, reward), team_reward(self.multi_spec, reward),
                terminal, truncate, final)  # fmt: skip

    def read_observation(self, joint: Joint) -> None:
        """Take in each exploring step's observations, whatever then acts (the random warm-up
        too): recurrent agents advance their hidden state here; others need nothing."""

    def episodes_ended(self, done: torch.Tensor) -> None:
        """The sub-envs whose episode ended in the last step `(E,)` bool (they have reset)."""

    def random_joint_action(self, joint: Joint) -> torch.Tensor:
        """Uniformly random joint actions (the warm-up before learning starts)."""
        spec = self.multi_spec
        shape = joint.obs.shape[:2]
        if spec.if_discrete:
            return masked_random_actions(joint.avail, shape, spec.action_dim, self.device)
        return torch.rand((*shape, spec.action_dim), device=self.device) * 2 - 1

    def explore_joint_action(self, joint: Joint) -> torch.Tensor:
        """The exploring joint action `(E, A)` or `(E, A, U)` for packed joint steps."""
        raise NotImplementedError

    @torch.no_grad()
    def act(self, obs: torch.Tensor, avail: torch.Tensor | None = None) -> torch.Tensor:
        """Deterministic joint action for observations `(E, A, O)` (and masks)."""
        return self.greedy_joint_action(obs, avail)

    def greedy_joint_action(self, obs: torch.Tensor, avail: torch.Tensor | None) -> torch.Tensor:
        raise NotImplementedError

    def evaluation_policy(self) -> Callable[..., torch.Tensor]:
        return joint_evaluation_policy(self)
