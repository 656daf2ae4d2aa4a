"""Replay of sequences for the off-policy agents with memory, as R2D2 replays them (Kapturowski
et al., "Recurrent Experience Replay in Distributed Reinforcement Learning", ICLR 2019): the
buffer keeps, beside each transition, the hidden state the exploring networks had before it;
a sampled sequence is a window of consecutive steps of one sub-env, whose networks start from
the stored hidden state of its first step, run a burn-in of `burn_in` steps without gradients
(refreshing that stale state with today's weights), then the `sequence_len` steps trained on.

A window may cross episode boundaries: where a step begins an episode its hidden state is
zeroed, as it was while exploring. The state a transition reached is read one step on from the
hidden state after its last step (the true last state of a truncated episode included), so
n-step returns and truncation bootstrap as with transitions; a window runs `n_step - 1` steps
past its trained ones for that.

Shapes: W = burn_in + sequence_len + n_step - 1 (a window's steps), L = sequence_len,
B = sequences per batch, H = the stored hidden state's width (the agent's memories' widths side
by side). Flat time-major: step t of sequence b at t * B + b.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from xiaoyarl.core.buffer import Batch, ReplayBuffer, Transitions
from xiaoyarl.errors import ConfigError


class MemoryTransitions(NamedTuple):
    """`Transitions` and the hidden state before each step, as `SequenceReplayBuffer.add` takes
    them."""

    states: torch.Tensor  # (T, N, *obs_shape)
    actions: torch.Tensor  # (T, N, A) float32, or (T, N) int64
    rewards: torch.Tensor  # (T, N)
    terminals: torch.Tensor  # (T, N) bool
    truncates: torch.Tensor  # (T, N) bool
    next_states: torch.Tensor  # (T, N, *obs_shape): before any auto-reset
    hiddens: torch.Tensor  # (T, N, H): the hidden state the step continued (zero: an episode began)


class Sequences(NamedTuple):
    """A sampled batch of windows (see the module docstring)."""

    batch: Batch  # the L * B transitions trained on, flat time-major
    states: torch.Tensor  # (W * B, *obs_shape): the state of every window step, flat time-major
    starts: torch.Tensor  # (W, B) bool: the step begins an episode (never the first step)
    hiddens: torch.Tensor  # (B, H): the stored hidden state the first step continued
    burn_in: int  # steps run before the trained ones, without gradients
    last: torch.Tensor  # (L * B,) the window step (flat) the next state continues from


class Windows(NamedTuple):
    """Sampled windows as the model-based agents learn from them (no burn-in, one-step
    transitions): B windows of T consecutive steps, each field flat and time-major (step t of
    window b at t * B + b), plain tensors that a captured update copies into its inputs."""

    states: torch.Tensor  # (T * B, *obs_shape)
    actions: torch.Tensor  # (T * B, A) float32, or (T * B,) int64
    rewards: torch.Tensor  # (T * B,)
    terminals: torch.Tensor  # (T * B,) bool
    next_states: torch.Tensor  # (T * B, *obs_shape): the true last state of a truncated episode
    starts: torch.Tensor  # (T, B) bool: the step begins an episode (never the first step)

    @classmethod
    def of(cls, sampled: Sequences) -> Windows:
        """The windows of `sampled` (drawn with burn_in 0 and n_step 1)."""
        steps = sampled.batch
        assert sampled.burn_in == 0 and sampled.starts.numel() == steps.rewards.shape[0], (
            "windows without burn-in or n-step tails"
        )
        return cls(steps.states, steps.actions, steps.rewards, steps.terminals,
                   steps.next_states, sampled.starts)  # fmt: skip


class SequenceReplayBuffer(ReplayBuffer):
    """A `ReplayBuffer` that keeps each step's hidden state and samples windows of steps
    (`Sequences`) in place of single transitions: `sample(batch_size)` draws
    `batch_size // sequence_len` windows (at least one), uniformly among those whose trained
    steps have their next state stored and whose burn-in is stored."""

    _TENSORS = (*ReplayBuffer._TENSORS, "hiddens")
    _ROW_TENSORS = ReplayBuffer._ROW_TENSORS | {"hiddens"}

    def __init__(self, capacity: int, num_envs: int, state_dim: int, action_dim: int,
                 if_discrete: bool, max_step: int, device: torch.device | str = "cpu",
                 obs_shape: tuple[int, ...] | None = None, obs_dtype: torch.dtype = torch.float32,
                 frame_stack: int = 1, n_step: int = 1, gamma: float = 0.99, *,
                 hidden_dim: int, sequence_len: int, burn_in: int) -> None:  # fmt: skip
        super().__init__(capacity, num_envs, state_dim, action_dim, if_discrete, max_step, device,
                         obs_shape, obs_dtype, frame_stack, n_step, gamma)  # fmt: skip
        if sequence_len < 1 or burn_in < 0:
            raise ConfigError(f"SequenceReplayBuffer: need sequence_len >= 1 and burn_in >= 0, "
                              f"got {sequence_len} and {burn_in}.")  # fmt: skip
        window = burn_in + sequence_len + n_step - 1
        if self.rows < window + frame_stack + 1:
            raise ConfigError(
                f"a replay buffer of {self.capacity:,} transitions over {num_envs} sub-envs "
                f"holds {self.rows} steps of each, fewer than one window of burn_in + "
                f"sequence_len + n_step - 1 = {window} steps and the step after it; raise "
                f"buffer_size to at least {(window + frame_stack + 1) * num_envs}."
            )
        self.hidden_dim, self.sequence_len, self.burn_in = hidden_dim, sequence_len, burn_in
        self.hiddens = torch.zeros((self.rows, num_envs, hidden_dim), device=self.device)

    @staticmethod
    def hidden_bytes(capacity: int, num_envs: int, hidden_dim: int) -> int:
        """Bytes the stored hidden states take, besides what `ReplayBuffer.bytes_needed` says."""
        return (capacity // num_envs) * num_envs * hidden_dim * 4

    def _shape_info(self) -> dict:
        return {**super()._shape_info(), "hidden_dim": self.hidden_dim}

    @torch.no_grad()
    def add(self, transitions: MemoryTransitions) -> None:  # type: ignore[override]
        """Append like `ReplayBuffer.add`, with each step's hidden state."""
        first = self.ptr
        super().add(Transitions(*transitions[:6]))
        t_len = transitions.rewards.shape[0]
        keep = min(t_len, self.rows)
        hiddens = transitions.hiddens[t_len - keep :].to(self.device, torch.float32)
        if tuple(hiddens.shape[1:]) != (self.num_envs, self.hidden_dim):
            raise ValueError(f"SequenceReplayBuffer.add: hiddens must have shape (T, "
                             f"{self.num_envs}, {self.hidden_dim}), got "
                             f"{tuple(transitions.hiddens.shape)}.")  # fmt: skip
        rows = (first + torch.arange(keep, device=self.device)) % self.rows
        self.hiddens[rows] = hiddens

    def _windows(self) -> int:
        """The window starts of one sub-env that can be sampled (see the class docstring)."""
        return max(self.size - self._skip_rows() - self.burn_in - self.sequence_len, 0)

    @property
    def num_sampleable(self) -> int:
        """Windows `sample` draws from, over every sub-env (0 until one is stored)."""
        return self._windows() * self.num_envs

    def sample(self, batch_size: int) -> Sequences:  # type: ignore[override]
        """Draw `batch_size // sequence_len` windows (at least one) uniformly, with replacement;
        uses the global torch RNG of the buffer's device."""
        if self._windows() == 0:
            raise ValueError(
                f"SequenceReplayBuffer.sample: no window of burn_in + sequence_len = "
                f"{self.burn_in + self.sequence_len} steps and the step after it is stored yet "
                f"({self.size} row(s) stored)."
            )
        num, length, burn = max(1, batch_size // self.sequence_len), self.sequence_len, self.burn_in
        steps = burn + length + self.n_step - 1
        dev, n = self.device, self.num_envs
        skip = self._skip_rows()
        first = torch.randint(skip, skip + self._windows(), (num,), device=dev)  # (B,) from oldest
        env = torch.randint(n, (num,), device=dev)
        # rows past the newest are only read by the n-step tail where no step reaches them
        ahead = (first + torch.arange(steps, device=dev).unsqueeze(1)).clamp(max=self.size - 1)
        flat = ((self._oldest_row() + ahead) % self.rows) * n + env  # (W, B)
        ended = self.terminals.view(-1)[flat] | (self.next_index.view(-1)[flat] >= self.capacity)
        starts = torch.zeros_like(ended)
        starts[1:] = ended[:-1]  # the step after an episode's last begins one
        where = flat.flatten()
        states = self._stacked(where) if self.frame_stack > 1 else self.store.index_select(0, where)
        trained = flat[burn : burn + length].flatten()  # (L * B,)
        batch, last_flat = self._gather_last(trained, torch.ones(trained.shape[0], device=dev))
        spans = (last_flat // n - trained // n) % self.rows  # steps after the first, m - 1
        step = torch.arange(length * num, device=dev)
        last = (burn + step // num + spans) * num + step % num
        return Sequences(batch=batch, states=states.view(-1, *self.obs_shape), starts=starts,
                         hiddens=self.hiddens.flatten(0, 1)[flat[0]], burn_in=burn,
                         last=last)  # fmt: skip
