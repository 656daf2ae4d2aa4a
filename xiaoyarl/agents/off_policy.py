"""`AgentOffPolicy`: what the off-policy agents share (the replay buffer, exploring into it,
gradient steps on sampled batches, target networks)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, TypeVar

import torch
from torch import nn

from xiaoyarl.agents.base import AgentBase
from xiaoyarl.config import Config
from xiaoyarl.core.buffer import Batch, Episodes, PrioritizedReplayBuffer, ReplayBuffer, Transitions
from xiaoyarl.envs.base import EnvSpec
from xiaoyarl.errors import ConfigError

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import OptimizerKit, Steps

# The Config fields every off-policy agent reads (replay, targets, prioritized replay).
OFF_POLICY_FIELDS = frozenset({
    "replay_ratio", "buffer_size", "learning_starts", "soft_update_tau", "target_update_every",
    "n_step", "layer_norm", "per",
    "per_alpha", "per_beta", "per_beta_steps",
    "recurrent", "recurrent_dim", "sequence_len", "burn_in",  # the recurrent variants'
})  # fmt: skip

Net = TypeVar("Net", bound=nn.Module)
# a replay buffer's shape (`AgentOffPolicy.buffer_sizes`)
BufferSizes = tuple[int, int, int, int, bool, int]


class AgentOffPolicy(AgentBase):
    """Explores with random actions for the first `learning_starts` env steps, then
    `explore_action`; each rollout goes into the replay buffer and is followed by
    `replay_ratio` gradient steps per env step. An algorithm implements `explore_action` and
    `update_step` on one sampled batch."""

    if_off_policy = True
    # what members of a vmapped population may vary (`population/vmap.py`: each member's own
    # optimizer steps)
    member_fields: ClassVar[frozenset[str]] = frozenset({"learning_rate", "clip_grad_norm"})

    def __init__(self, spec: EnvSpec, config: Config, device: torch.device, learner: bool = True,
                 kit: OptimizerKit | None = None) -> None:  # fmt: skip
        super().__init__(spec, config, device, learner, kit)
        self.buffer: ReplayBuffer | None = self.make_buffer() if learner else None
        self._target_params: dict[tuple[int, int], tuple[list, list]] = {}  # update_targets

    # --- what an algorithm implements ---
    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        """The exploratory action for a batch of states (in [-1, 1], or int64)."""
        raise NotImplementedError

    def update_step(self, batch: Batch) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """One gradient step on `batch`; returns (named scalars, TD errors `(B,)`)."""
        raise NotImplementedError

    # the networks `critic_loss` steps, by their optimizers' names (the DQN family's "qnet"; VDN's
    # and QMIX's with their mixer)
    critic_nets: ClassVar[tuple[str, ...]] = ("critic",)

    def critic_loss(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The critics' loss on `batch` (the first step of `update_step`), their Q(s, a) and
        TD errors."""
        raise NotImplementedError

    def should_update_actor(self, critic_loss: torch.Tensor) -> bool:
        """Whether this gradient step also steps an actor (after the critics' step, whose loss
        it may read): never, where the agent has no actor of its own (the DQN family)."""
        return False

    def critic_target_due(self, actor_updated: bool) -> bool:
        """Whether this gradient step soft-updates the target critics (besides the
        `target_update_every` schedule): every step, unless the agent says otherwise."""
        return True

    def exploring_state(self) -> dict[str, torch.Tensor]:
        """What exploring keeps per sub-env besides the networks and the buffer (DDPG's noise
        stds and OU values), where it has any: a vmapped population keeps it stacked."""
        return {}

    def load_exploring_state(self, state: dict[str, torch.Tensor]) -> None:
        """Take back what `exploring_state` gave (missing entries: none kept yet)."""

    def start_update(self) -> None:
        """Called as each `update_net` starts, before its gradient steps (ModSAC restarts the
        counts of its actor's schedule there)."""

    def update_cycle(self) -> int | None:
        return self.config.target_update_every  # the target networks' schedule

    rollout_class: ClassVar[Callable[..., Steps]] = Transitions

    def explore_step(self, state: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        """Random actions for the first `learning_starts` env steps, then `explore_action`."""
        if self.explored < self.config.learning_starts:
            action = self.random_action(state.shape[0])
        else:
            action = self.explore_action(state)
        return action, (state, action)

    def record(self, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
               truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
        state, action = kept
        return state, action, reward, terminal, truncate, info["final_state"]

    def random_action(self, n: int) -> torch.Tensor:
        """Uniformly random actions for `n` sub-envs (the warm-up before learning starts)."""
        if self.if_discrete:
            return torch.randint(self.spec.action_dim, (n,), device=self.device)
        return torch.rand((n, self.spec.action_dim), device=self.device) * 2 - 1

    def update_net(self, rollout: Transitions) -> dict[str, torch.Tensor]:
        """Store the rollout, update the observation normaliser (when enabled) with its states,
        then take `replay_ratio` gradient steps per new env step."""
        assert self.buffer is not None, "an acting-only copy (learner=False) never updates"
        self.start_update()
        self.buffer.add(rollout)
        self.update_normalizers(rollout)
        self.observe_auxiliary(rollout)
        if self.explored < self.config.learning_starts or self.buffer.num_sampleable == 0:
            return {}
        num_updates = self.gradient_steps(rollout.rewards.numel())
        totals: dict[str, torch.Tensor] = {}
        counts: dict[str, int] = {}
        for _ in range(num_updates):
            logs = self.gradient_step(self.sample_batch())
            for name, value in logs.items():  # some (e.g. a delayed actor loss) not every step
                totals[name] = totals.get(name, 0) + value
                counts[name] = counts.get(name, 0) + 1
        return {name: value / counts[name] for name, value in totals.items()}

    def gradient_steps(self, new_steps: int) -> int:
        """The gradient steps an update takes after `new_steps` env steps: `replay_ratio` per
        env step, at least one."""
        assert self.config.replay_ratio is not None, "resolve_config sets replay_ratio"
        return max(1, round(self.config.replay_ratio * new_steps))

    def sample_batch(self) -> Batch | Episodes:
        """Off-policy: what one gradient step learns from: `batch_size` replayed transitions
        (recurrent agents replay whole episodes instead)."""
        assert self.buffer is not None, "an acting-only copy (learner=False) never updates"
        assert self.config.batch_size is not None, "resolve_config sets batch_size"
        return self.buffer.sample(self.config.batch_size)

    def step_together(self, loss: torch.Tensor, optimizers: list, max_norm: float) -> None:
        """One backward pass through `loss`, the gradients of every optimizer's parameters
        clipped together (their global norm at most `max_norm`, where `optimizer_steps` clips
        per network), then each optimizer steps (the model-based agents' world models)."""
        assert all(optimizers), "an acting-only copy (learner=False) never updates"
        for optimizer in optimizers:
            optimizer.zero_grad(set_to_none=True)
        loss.backward()
        groups = [optimizer.param_groups[0]["params"] for optimizer in optimizers]
        self.reducer.average_gradients(groups)
        self.kit.clip_grad_norm([param for group in groups for param in group], max_norm)
        for optimizer in optimizers:
            optimizer.step()

    def update_normalizers(self, rollout: Transitions) -> None:
        """Off-policy: merge a rollout's states into the observation normaliser (if enabled)."""
        self.state_norm.update(rollout.states.flatten(0, 1))

    def gradient_step(self, batch: Batch | Episodes) -> dict[str, torch.Tensor]:
        """`update_step` on `batch` (through `run_update`), then count it and
        give prioritized replay the new TD errors."""
        logs, td_errors = self.run_update(self.update_step, batch)
        self.updates += 1
        if isinstance(self.buffer, PrioritizedReplayBuffer):
            assert isinstance(batch, Batch), "prioritized replay samples transitions"
            self.buffer.update_priorities(batch.indices, td_errors)
        return logs

    def buffer_sizes(self) -> BufferSizes:
        """The replay buffer's shape: capacity, sub-envs, state width, action width, whether
        actions are discrete indices, the time limit (see `ReplayBuffer`)."""
        cfg, spec = self.config, self.spec
        return (cfg.buffer_size, spec.num_envs, spec.state_dim, spec.action_dim,
                spec.if_discrete, spec.max_step)  # fmt: skip

    def buffer_obs(self) -> tuple[tuple[int, ...] | None, torch.dtype]:
        """The shape and dtype of a stored observation (images stay uint8)."""
        return self.spec.obs_shape, self.spec.obs_dtype

    def make_buffer(self) -> ReplayBuffer | None:
        """The replay buffer the config asks for, refused where it cannot fit in free memory."""
        cfg, spec = self.config, self.spec
        sizes = self.buffer_sizes()
        obs_shape, obs_dtype = self.buffer_obs()
        # stacked frames (Atari) are stored once each, unless the agent stores its own layout
        stack = spec.frame_stack if obs_shape == spec.obs_shape else 1
        need = self.buffer_bytes(sizes, obs_dtype.itemsize, stack)
        free = _free_memory(self.device)
        if free is not None and need > 0.8 * free:
            raise ConfigError(
                f"a replay buffer of buffer_size={cfg.buffer_size:,} transitions for "
                f"{spec.name} needs {need / 2**30:.2f} GiB, but only {free / 2**30:.2f} GiB is "
                f"free on {self.device}; lower buffer_size (e.g. --set buffer_size=100000)."
            )
        return self.build_buffer(sizes, obs_shape, obs_dtype, stack)

    def buffer_bytes(self, sizes: BufferSizes, obs_bytes: int, stack: int) -> int:
        """Bytes the replay buffer of `sizes` (`buffer_sizes`) will take."""
        buffer_class = PrioritizedReplayBuffer if self.config.per else ReplayBuffer
        return buffer_class.bytes_needed(*sizes, obs_bytes, stack)

    def build_buffer(self, sizes: BufferSizes, obs_shape: tuple[int, ...] | None,
                     obs_dtype: torch.dtype, stack: int) -> ReplayBuffer:  # fmt: skip
        """The replay buffer: uniform, or prioritized (`per`)."""
        cfg = self.config
        if cfg.per:
            assert cfg.replay_ratio is not None, "resolve_config sets replay_ratio"
            return PrioritizedReplayBuffer(
                *sizes, self.device, obs_shape, obs_dtype, stack, cfg.n_step, cfg.gamma,
                alpha=cfg.per_alpha,
                beta=cfg.per_beta, beta_steps=max(1, round(cfg.per_beta_steps * cfg.replay_ratio)),
            )  # fmt: skip
        return ReplayBuffer(*sizes, self.device, obs_shape, obs_dtype, stack, cfg.n_step,
                            cfg.gamma)  # fmt: skip

    def make_target(self, net: Net) -> Net:
        """A frozen copy of `net` for targets that shares `net`'s observation normaliser (a
        target network must see states scaled as the online one does; only weights lag). An
        encoder with weights (a CNN) is copied and lags with the rest."""
        norm = getattr(net, "norm", None)
        target = copy.deepcopy(net).requires_grad_(False)
        if norm is not None and next(norm.parameters(), None) is None:
            target.norm = norm
        return target

    @staticmethod
    @torch.no_grad()
    def soft_update(target: nn.Module, online: nn.Module, tau: float) -> None:
        """target <- tau * online + (1 - tau) * target, for every parameter."""
        torch._foreach_lerp_(list(target.parameters()), list(online.parameters()), tau)

    def update_targets(self, *pairs: tuple[nn.Module, nn.Module]) -> None:
        """Soft-update each (target, online) pair every `target_update_every` gradient steps
        (the parameter lists are gathered once: walking the modules costs more than the lerp)."""
        if self.updates % self.config.target_update_every == 0:
            for target, online in pairs:
                key = (id(target), id(online))
                if key not in self._target_params:
                    self._target_params[key] = (list(target.parameters()),
                                                list(online.parameters()))  # fmt: skip
                if self._target_params[key][0]:  # (VDN's sum has nothing to update)
                    with torch.no_grad():
                        torch._foreach_lerp_(*self._target_params[key],
                                             self.config.soft_update_tau)  # fmt: skip

    def state_dict(self) -> dict:
        return {**super().state_dict(), "buffer": self._buffer_state()}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        if self.buffer is not None:
            self.buffer.load_state_dict(state["buffer"])

    def sub_env_state(self) -> dict:
        # differs: the replay buffer holds this agent's own sub-envs' steps
        return {**super().sub_env_state(), "buffer": self._buffer_state()}

    def _buffer_state(self) -> dict | None:
        return self.buffer.state_dict() if self.buffer is not None else None

    def load_sub_env_state(self, state: dict) -> None:
        super().load_sub_env_state(state)
        if self.buffer is not None and state["buffer"] is not None:
            self.buffer.load_state_dict(state["buffer"])


def _free_memory(device: torch.device) -> int | None:
    """Bytes of memory free for new tensors on `device` (None when it cannot be told)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
