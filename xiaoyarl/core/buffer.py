"""Replay buffers for off-policy agents: a contiguous ring on the device, and prioritized replay.

`ReplayBuffer` keeps `capacity // num_envs` time rows x `num_envs` columns, preallocated on one
device, and samples with pure tensor indexing. Each state is stored once: the next state of
transition (t, n) is `states[t + 1, n]` while the episode goes on; the true last state of a
truncated episode (needed to bootstrap, since truncation is not termination) lives in a small
side ring. `PrioritizedReplayBuffer` adds proportional prioritized replay (Schaul et al.,
"Prioritized Experience Replay", ICLR 2016) over a vectorized sum tree.

Shapes: T = horizon_len, N = num_envs, S = state_dim (an observation of any shape is stored flat
as its S values, in its own dtype: uint8 images stay uint8; batches give it back shaped as it
came, `(B, *obs_shape)`), A = action_dim, B = batch size,
R = rows = capacity // num_envs. A transition's flat position (`Batch.indices`) is `row * N + n`.

Stacked frames (`frame_stack` K > 1: an observation `(K, *frame)` holds the env's last K frames,
oldest first, as Atari's 4-frame stacks do) are stored once each, as the DQN paper's replay
stored frames (Mnih et al. 2015; storing each state once, not twice, is what Stable-Baselines3's
`optimize_memory_usage` does, and this buffer always does): a state keeps only its newest frame,
and its stack is rebuilt from the frames of the rows before it when sampled, 4x less memory for
Atari (a million transitions in ~7 GB instead of ~28 GB). What the rebuilding needs is checked
on `add`, state by state, against the stacks the env gave: a state whose older frames are the
previous state's frames shifted by one continues it; a new episode's stack padded with its first
frame (gymnasium's `FrameStackObservation`) or with zeros needs nothing more; any other state
(an env that stacks in its own way) keeps its whole stack in a side store that grows as needed,
so a sampled stack always equals, bit for bit, the one the env gave.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from xiaoyarl.errors import CheckpointError, ConfigError, EnvError


class Transitions(NamedTuple):
    """Time-major data from one exploration of N sub-envs, as `ReplayBuffer.add` takes it."""

    states: torch.Tensor  # (T, N, S) (or (T, N, *obs_shape)): the state before the action
    actions: torch.Tensor  # (T, N, A) float32, or (T, N) int64 for discrete actions
    rewards: torch.Tensor  # (T, N) float32
    terminals: torch.Tensor  # (T, N) bool: the episode ended for good (no bootstrap)
    truncates: torch.Tensor  # (T, N) bool: the episode was cut by a time limit (bootstrap)
    next_states: torch.Tensor  # (T, N, S): the state each step reached, before any auto-reset


class Batch(NamedTuple):
    """A sampled minibatch of transitions, on the buffer's device. With n-step returns
    (`n_step` > 1), a transition is the m <= n steps from its state: `rewards` their discounted
    sum, `next_states` and `terminals` those of its last step, `discounts` gamma^m (the TD
    target is `rewards + discounts * (1 - terminals) * V(next_states)`)."""

    states: torch.Tensor  # (B, S)
    actions: torch.Tensor  # (B, A) float32, or (B,) int64 for discrete actions
    rewards: torch.Tensor  # (B,)
    terminals: torch.Tensor  # (B,) bool: do not bootstrap from next_states
    next_states: torch.Tensor  # (B, S): the true last state where the episode was truncated
    indices: torch.Tensor  # (B,) int64 flat positions, for `update_priorities`
    weights: torch.Tensor  # (B,) float32 importance weights (ones for uniform sampling)
    discounts: torch.Tensor  # (B,) float32: gamma ** (steps the transition spans)


class Episodes(NamedTuple):
    """Sampled whole episodes, time-major `(T, B, ...)`: step t of episode b, from its first
    step. `mask` is False past the episode's end (the steps there belong to whatever followed)
    and past the newest transition that can be sampled yet."""

    states: torch.Tensor  # (T, B, S)
    actions: torch.Tensor  # (T, B, A) float32, or (T, B) int64
    rewards: torch.Tensor  # (T, B)
    terminals: torch.Tensor  # (T, B) bool
    next_states: torch.Tensor  # (T, B, S): the true last state where the episode was truncated
    mask: torch.Tensor  # (T, B) bool: a real step of the episode


def _ring_slices(start: int, count: int, size: int) -> list[tuple[int, int]]:
    """The (at most two) slices `[a, b)` of a ring of `size` holding `count` items from `start`."""
    end = start + count
    if end <= size:
        return [(start, end)]
    return [(start, size), (0, end - size)]


def _is_view(x: torch.Tensor) -> bool:
    """Whether `x` uses only part of its storage (a slice of a larger tensor)."""
    return x.untyped_storage().nbytes() > x.numel() * x.element_size()


class ReplayBuffer:
    """Uniform experience replay over a preallocated `(rows, num_envs)` ring on one device.

    Consecutive `add` calls must continue the same env streams (the first state of an add is the
    state the previous add's last step reached). Where it is not — the envs were reset between
    two explorations, e.g. after a resume with an env that cannot restore its state — `add`
    notices and keeps the last row's true next state in the side ring, like a truncation.

    The newest row is never sampled: its next state arrives with the next `add`.
    """

    # What `state_dict` holds besides the constructor's shape arguments.
    _TENSORS: tuple[str, ...] = (
        "states",
        "actions",
        "rewards",
        "terminals",
        "next_index",
        "trunc_states",
        "trunc_counts",
        "last_next_states",
    )
    _COUNTERS: tuple[str, ...] = ("ptr", "size", "trunc_ptr", "trunc_live")
    # the tensors with a row per time step (R, ...), saved up to the rows filled
    _ROW_TENSORS = frozenset({"states", "actions", "rewards", "terminals", "next_index",
                              "trunc_counts", "frames", "history", "stack_index",
                              "stack_counts"})  # fmt: skip
    # what stacked frames store in place of "states" (see the module docstring)
    _FRAME_TENSORS: tuple[str, ...] = ("frames", "history", "stack_index", "stack_counts",
                                       "last_states")  # fmt: skip

    def __init__(
        self,
        capacity: int,
        num_envs: int,
        state_dim: int,
        action_dim: int,
        if_discrete: bool,
        max_step: int,
        device: torch.device | str = "cpu",
        obs_shape: tuple[int, ...] | None = None,
        obs_dtype: torch.dtype = torch.float32,
        frame_stack: int = 1,
        n_step: int = 1,
        gamma: float = 0.99,
    ) -> None:
        for name, value in (
            ("num_envs", num_envs),
            ("state_dim", state_dim),
            ("action_dim", action_dim),
            ("max_step", max_step),
            ("n_step", n_step),
        ):
            if value < 1:
                raise ConfigError(f"ReplayBuffer: {name} must be a positive integer, got {value}.")
        if capacity < 2 * num_envs:
            raise ConfigError(
                f"ReplayBuffer: capacity must hold at least two steps of all {num_envs} envs "
                f"(>= {2 * num_envs} transitions), got {capacity}."
            )
        self.num_envs = num_envs
        self.state_dim = state_dim
        # one observation's shape and type (images stay uint8); stored flat, shaped when sampled
        self.obs_shape = tuple(obs_shape or (state_dim,))
        self.obs_dtype = obs_dtype
        self.frame_stack = frame_stack
        self.n_step, self.gamma = n_step, gamma
        if frame_stack > 1 and (self.obs_shape[0] != frame_stack or len(self.obs_shape) < 2):
            raise ConfigError(
                f"ReplayBuffer: frame_stack={frame_stack} needs observations of shape "
                f"({frame_stack}, *frame), the frames on the first axis; got {self.obs_shape}."
            )
        self.action_dim = action_dim
        self.if_discrete = if_discrete
        self.max_step = max_step
        self.device = torch.device(device)
        self.rows = capacity // num_envs
        self.capacity = self.rows * num_envs  # what is really stored (a multiple of num_envs)
        # Each env truncates at most once per max_step steps, so the rows in the buffer hold at
        # most rows // max_step + 1 truncations per env; one more slot per env absorbs a break
        # between two adds (see the class docstring).
        self.capacity_trunc = num_envs * (self.rows // max_step + 2)

        r, n, s, dev = self.rows, num_envs, state_dim, self.device
        if frame_stack > 1:
            self._init_frames()
        else:
            # One store for every state, so a batch's next states are one gather: the ring of
            # states (R * N rows, time-major) followed by the side ring of truncated last states.
            self.store = torch.zeros((self.capacity + self.capacity_trunc, s), dtype=obs_dtype,
                                     device=dev)  # fmt: skip
            self.states = self.store[: self.capacity].view(r, n, s)  # (R, N, S)
            self.trunc_states = self.store[self.capacity :]  # (R_trunc, S)
        if if_discrete:
            self.actions = torch.zeros((r, n), dtype=torch.int64, device=dev)  # (R, N)
        else:
            self.actions = torch.zeros((r, n, action_dim), device=dev)  # (R, N, A)
        self.rewards = torch.zeros((r, n), device=dev)  # (R, N)
        self.terminals = torch.zeros((r, n), dtype=torch.bool, device=dev)  # (R, N)
        # Row of `store` holding each transition's next state: states[t + 1, n] (also after a
        # terminal step, where it is never used), or a slot of trunc_states (capacity + slot).
        self.next_index = self._default_next_index(0, r)  # (R, N) int64
        self.trunc_counts = torch.zeros(r, dtype=torch.int64, device=dev)  # (R,) slots per row
        self.last_next_states = torch.zeros((n, s), dtype=obs_dtype, device=dev)  # (N, S)

        self.ptr = 0  # row the next add writes first
        self.size = 0  # rows stored
        self.trunc_ptr = 0  # slot the next explicit next state goes to
        self.trunc_live = 0  # slots in use by rows still stored

    def _init_frames(self) -> None:
        """Stacked frames' tensors: each state's newest frame, how to rebuild its older ones."""
        k, r, n, s, dev = self.frame_stack, self.rows, self.num_envs, self.state_dim, self.device
        if r < 2 * k:
            raise ConfigError(
                f"ReplayBuffer: frame_stack={k} needs at least {2 * k} time rows; raise "
                f"buffer_size to at least {2 * k * n} for {n} envs."
            )
        self.frame_dim = s // k
        self.frames = torch.zeros((r, n, self.frame_dim), dtype=self.obs_dtype, device=dev)
        # history[t, n]: h >= 1, the state continues the one before it and its last h + 1
        # frames are those of rows t - h .. t (h < K - 1: its older frames are those of the
        # state at row t - h, shifted); for a state that continues none (h = 0), how its older
        # frames are padded: 0 with its first frame, -1 with zeros, -2 by its own stack, kept
        # whole in stack_states[stack_index[t, n]]
        self.history = torch.zeros((r, n), dtype=torch.int8, device=dev)
        self.stack_index = torch.zeros((r, n), dtype=torch.int32, device=dev)
        self.stack_counts = torch.zeros(r, dtype=torch.int64, device=dev)  # (R,) slots per row
        self.stack_states = torch.zeros((max(n, self.capacity // 256), s), dtype=self.obs_dtype,
                                        device=dev)  # fmt: skip  # a ring that grows as needed
        self.stack_ptr = 0
        self.stack_live = 0
        self.last_states = torch.zeros((n, s), dtype=self.obs_dtype, device=dev)  # newest row's
        self.trunc_states = torch.zeros((self.capacity_trunc, s), dtype=self.obs_dtype,
                                        device=dev)  # fmt: skip
        self.store = self.states = None  # type: ignore[assignment]

    def _default_next_index(self, first_row: int, count: int) -> torch.Tensor:
        """`(count, N)` store rows of `states[t + 1, n]` for `count` ring rows from `first_row`."""
        rows = torch.arange(first_row + 1, first_row + count + 1, device=self.device) % self.rows
        columns = torch.arange(self.num_envs, device=self.device)
        return rows.unsqueeze(1) * self.num_envs + columns  # (count, N)

    @staticmethod
    def bytes_needed(
        capacity: int,
        num_envs: int,
        state_dim: int,
        action_dim: int,
        if_discrete: bool,
        max_step: int,
        obs_bytes: int = 4,
        frame_stack: int = 1,
    ) -> int:
        """Bytes the buffer's tensors take, so a caller can refuse one that will not fit.
        `obs_bytes`: bytes per observation value (4 for float32, 1 for uint8 images). With
        stacked frames, the side store of whole stacks as allocated (it grows if an env's
        stacks need it)."""
        rows = capacity // num_envs
        action_bytes = 8 if if_discrete else 4 * action_dim
        state_bytes = obs_bytes * state_dim
        per_state = state_bytes if frame_stack == 1 else state_bytes // frame_stack + 1 + 4
        per_transition = per_state + action_bytes + 4 + 1 + 8  # state, action, r, term, next
        capacity_trunc = num_envs * (rows // max_step + 2)
        frames = 0
        if frame_stack > 1:  # stack_states, stack_counts, last_states
            stored = rows * num_envs
            frames = max(num_envs, stored // 256) * state_bytes + rows * 8 + num_envs * state_bytes
        return (
            rows * num_envs * per_transition
            + rows * 8  # trunc_counts
            + capacity_trunc * state_bytes  # trunc_states
            + num_envs * state_bytes  # last_next_states
            + frames
        )

    def __len__(self) -> int:
        """Number of stored transitions (the newest row included)."""
        return self.size * self.num_envs

    @property
    def num_sampleable(self) -> int:
        """Number of transitions `sample` draws from (0 until two rows are stored)."""
        return max(self.size - 1 - self._skip_rows(), 0) * self.num_envs

    def _check(self, transitions: Transitions) -> None:
        """Raise a ValueError naming the field whose shape breaks the `Transitions` contract."""
        t = transitions.rewards.shape[0] if transitions.rewards.dim() > 0 else 0
        n, s = self.num_envs, self.state_dim
        action = (t, n) if self.if_discrete else (t, n, self.action_dim)
        expected = {
            "states": (t, n, *self.obs_shape),
            "actions": action,
            "rewards": (t, n),
            "terminals": (t, n),
            "truncates": (t, n),
            "next_states": (t, n, *self.obs_shape),
        }
        for name, shape in expected.items():
            got = tuple(getattr(transitions, name).shape)
            if got != shape:
                raise ValueError(
                    f"ReplayBuffer.add: {name} must have shape {shape} (T, N={n}, S={s} as "
                    f"{self.obs_shape}, "
                    f"A={self.action_dim}, discrete={self.if_discrete}), got {got}."
                )
        if t == 0:
            raise ValueError("ReplayBuffer.add: the transitions hold no time step (T == 0).")

    @torch.no_grad()
    def add(self, transitions: Transitions) -> None:
        """Append T time rows, overwriting the oldest; where T > rows only the newest rows stay.

        One host sync per call (the number of new truncated steps).
        """
        self._check(transitions)
        t_len = transitions.rewards.shape[0]
        keep = min(t_len, self.rows)
        dev, s = self.device, self.state_dim
        states = transitions.states[t_len - keep :].to(dev, self.obs_dtype).flatten(2)  # (K,N,S)
        actions = transitions.actions[t_len - keep :].to(dev, self.actions.dtype)
        rewards = transitions.rewards[t_len - keep :].to(dev, torch.float32)  # (K, N)
        terminals = transitions.terminals[t_len - keep :].to(dev, torch.bool)  # (K, N)
        truncates = transitions.truncates[t_len - keep :].to(dev, torch.bool)  # (K, N)
        next_states = transitions.next_states[t_len - keep :].to(dev, self.obs_dtype).flatten(2)

        # Steps whose next state must be kept explicitly: truncated (not terminal) ones, and the
        # previous newest row where this add does not continue it.
        explicit = truncates & ~terminals  # (K, N)
        explicit_next = next_states  # (K, N, S)
        first_row = self.ptr
        if self.size > 0 and keep < self.rows:
            prev = (self.ptr - 1) % self.rows
            open_ = ~self.terminals[prev] & (self.next_index[prev] < self.capacity)  # (N,)
            broken = open_ & (self.last_next_states != states[0]).any(dim=1)  # (N,)
            explicit = torch.cat([broken.unsqueeze(0), explicit])  # (K + 1, N)
            explicit_next = torch.cat([self.last_next_states.unsqueeze(0), next_states])
            first_row = prev

        if self.frame_stack > 1:
            written = self._frame_rows(states, has_prev=self.size > 0 and keep < self.rows)
        evicted = sum(
            self.trunc_counts[a:b].sum() for a, b in _ring_slices(self.ptr, keep, self.rows)
        )
        num_new, num_evicted = torch.stack([explicit.sum(), torch.as_tensor(evicted)]).tolist()
        live = self.trunc_live - num_evicted + num_new
        if live > self.capacity_trunc:
            raise EnvError(
                f"ReplayBuffer: {live} truncated steps would be stored, more than the "
                f"{self.capacity_trunc} that fit when each env truncates at most once per "
                f"max_step={self.max_step} steps. The env truncates more often than its max_step, "
                "or consecutive adds do not continue the same episodes."
            )

        # Explicit next states go to consecutive slots, in time order (row-major), so the slots
        # in use are always the newest `trunc_live` ones of the side ring.
        positions = torch.nonzero_static(explicit.flatten(), size=num_new).squeeze(1)
        slots = (self.trunc_ptr + torch.arange(num_new, device=dev)) % self.capacity_trunc
        self.trunc_states[slots] = explicit_next.reshape(-1, s)[positions]
        index = self._default_next_index(first_row, explicit.shape[0])  # (K [+ 1], N)
        index.view(-1)[positions] = self.capacity + slots
        counts = explicit.sum(dim=1)  # (K [+ 1],)
        if first_row != self.ptr:  # the previous newest row: only its broken steps change
            self.next_index[first_row] = torch.where(
                explicit[0], index[0], self.next_index[first_row]
            )
            self.trunc_counts[first_row] += counts[0]
            index, counts = index[1:], counts[1:]

        done = 0
        for a, b in _ring_slices(self.ptr, keep, self.rows):
            src = slice(done, done + b - a)
            if self.frame_stack > 1:
                for name, value in zip(("frames", "history", "stack_index", "stack_counts"),
                                       written, strict=True):  # fmt: skip
                    getattr(self, name)[a:b] = value[src]
            else:
                self.states[a:b] = states[src]
            self.actions[a:b] = actions[src]
            self.rewards[a:b] = rewards[src]
            self.terminals[a:b] = terminals[src]
            self.next_index[a:b] = index[src]
            self.trunc_counts[a:b] = counts[src]
            done += b - a
        self.last_next_states.copy_(next_states[-1])
        if self.frame_stack > 1:
            self.last_states.copy_(states[-1])
        self.ptr = (self.ptr + keep) % self.rows
        self.size = min(self.size + keep, self.rows)
        self.trunc_ptr = (self.trunc_ptr + num_new) % self.capacity_trunc
        self.trunc_live = live

    def _frame_rows(self, states: torch.Tensor, has_prev: bool) -> tuple[torch.Tensor, ...]:
        """What stacked frames store of K new rows of whole states `(K, N, S)`: their newest
        frames `(K, N, F)`, history and stack_index `(K, N)` and stack_counts `(K,)` (see
        `_init_frames`); the stacks that cannot be rebuilt go to the side store, whose slots
        of the rows about to be overwritten are freed first. One host sync."""
        k_len, n, k, dev = states.shape[0], self.num_envs, self.frame_stack, self.device
        x = states.view(k_len, n, k, self.frame_dim)
        before = torch.cat([self.last_states.view(1, n, k, -1), x[:-1]])  # the previous states
        cont = (x[:, :, :-1] == before[:, :, 1:]).flatten(2).all(2)  # (K, N)
        if not has_prev:  # the row before is not stored (first add, or all rows rewritten)
            cont[0] = False
        t = torch.arange(k_len, device=dev).unsqueeze(1)  # (K, 1)
        base = torch.where(cont, -1, t).cummax(0).values  # newest row continuing none, or -1
        prev_h = self.history[(self.ptr - 1) % self.rows].long().clamp(min=0)  # (N,)
        h = torch.where(base >= 0, t - base, prev_h + 1 + t).clamp(max=k - 1)
        reset = (x[:, :, :-1] == x[:, :, -1:]).flatten(2).all(2)  # padded with its first frame
        zero = (x[:, :, :-1] == 0).flatten(2).all(2)  # padded with zeros
        history = torch.where(cont, h, torch.where(reset, 0, torch.where(zero, -1, -2)))
        whole = history == -2  # (K, N): kept whole in the side store
        evicted = sum(
            self.stack_counts[a:b].sum() for a, b in _ring_slices(self.ptr, k_len, self.rows)
        )
        num_new, num_evicted = torch.stack([whole.sum(), torch.as_tensor(evicted)]).tolist()
        self.stack_live -= num_evicted  # the oldest slots: they belong to the evicted rows
        if self.stack_live + num_new > self.stack_states.shape[0]:
            self._grow_stacks(self.stack_live + num_new)
        capacity = self.stack_states.shape[0]
        positions = torch.nonzero_static(whole.flatten(), size=num_new).squeeze(1)
        slots = (self.stack_ptr + torch.arange(num_new, device=dev)) % capacity
        self.stack_states[slots] = states.reshape(-1, self.state_dim)[positions]
        index = torch.zeros((k_len, n), dtype=torch.int32, device=dev)
        index.view(-1)[positions] = slots.to(torch.int32)
        self.stack_ptr = (self.stack_ptr + num_new) % capacity
        self.stack_live += num_new
        return x[:, :, -1], history.to(torch.int8), index, whole.sum(dim=1)

    def _grow_stacks(self, needed: int) -> None:
        """Reallocate the side store of whole stacks to hold `needed` (at least twice its size),
        its live slots moved to the front in order."""
        capacity, live = self.stack_states.shape[0], self.stack_live
        first = (self.stack_ptr - live) % capacity
        order = (first + torch.arange(live, device=self.device)) % capacity
        grown = torch.zeros((max(2 * capacity, needed), self.state_dim), dtype=self.obs_dtype,
                            device=self.device)  # fmt: skip
        grown[:live] = self.stack_states[order]
        self.stack_index = ((self.stack_index.long() - first) % capacity).to(torch.int32)
        self.stack_states, self.stack_ptr = grown, live

    def _stacked(self, flat: torch.Tensor) -> torch.Tensor:
        """The whole states `(B, S)` of ring positions `flat (B,)`, rebuilt from stored frames."""
        k, n, f = self.frame_stack, self.num_envs, self.frame_dim
        row, col = flat // n, (flat % n).unsqueeze(1)
        h = self.history.view(-1)[flat].long().clamp(min=0)  # (B,)
        distance = torch.arange(k - 1, -1, -1, device=self.device)  # (K,) slot k's rows back
        back = torch.minimum(distance.unsqueeze(0), h.unsqueeze(1))  # (B, K)
        out = self.frames.view(-1, f)[((row.unsqueeze(1) - back) % self.rows) * n + col]
        base = ((row - h) % self.rows) * n + col.squeeze(1)  # the state continuing none
        kind = self.history.view(-1)[base].long().unsqueeze(1)  # (B, 1)
        padded = distance.unsqueeze(0) > h.unsqueeze(1)  # (B, K): older than the base's frame
        out = out.masked_fill((padded & (kind == -1)).unsqueeze(2), 0)
        if self.stack_live > 0:  # slot k of a state h rows past its base is the base's k + h
            stacks = self.stack_states[self.stack_index.view(-1)[base].long()].view(-1, k, f)
            src = (torch.arange(k, device=self.device) + h.unsqueeze(1)).clamp(max=k - 1)
            shifted = stacks.gather(1, src.unsqueeze(2).expand(-1, -1, f))
            out = torch.where((padded & (kind == -2)).unsqueeze(2), shifted, out)
        return out.reshape(flat.shape[0], self.state_dim)

    def _skip_rows(self) -> int:
        """Oldest rows not sampled: with stacked frames, a wrapped ring's oldest K - 1 rows,
        whose stacks need frames already overwritten."""
        return self.frame_stack - 1 if self.frame_stack > 1 and self.size == self.rows else 0

    def _check_can_sample(self) -> None:
        if self.num_sampleable == 0:
            raise ValueError(
                f"ReplayBuffer.sample: no transition has its next state yet ({self.size} row(s) "
                "stored; the newest row becomes sampleable with the next add)."
            )

    def _oldest_row(self) -> int:
        return (self.ptr - self.size) % self.rows

    def sample(self, batch_size: int) -> Batch:
        """Draw `batch_size` transitions uniformly (with replacement) from the valid ones.

        Uses the global torch RNG of the buffer's device, so a run's RNG checkpoint covers it.
        """
        self._check_can_sample()
        skip = self._skip_rows()
        first = (self._oldest_row() + skip) * self.num_envs
        last = first + (self.size - 1 - skip) * self.num_envs  # every row but the newest
        indices = torch.randint(first, last, (batch_size,), device=self.device) % self.capacity
        return self._gather(indices, torch.ones(batch_size, device=self.device))

    def sample_episodes(self, num: int, length: int) -> Episodes:
        """Draw `num` episodes uniformly (with replacement) among those whose first step is
        stored, each as its first `length` steps (recurrent agents replay whole episodes).

        A row starts an episode of its env where the row before ended one (terminal, or cut
        with its last state kept aside), and the very first row does; the oldest row of a
        buffer that has wrapped does not count, as its episode began in a row since evicted.
        One host sync per call (the number of episode starts).
        """
        self._check_can_sample()
        if self.frame_stack > 1:
            raise ConfigError("ReplayBuffer.sample_episodes: stacked frames are replayed as "
                              "transitions only; whole episodes need frame_stack=1.")  # fmt: skip
        rows, n, oldest = self.rows, self.num_envs, self._oldest_row()
        sampleable = self.size - 1  # rows before the newest one, oldest first
        order = (oldest + torch.arange(sampleable, device=self.device)) % rows  # (K,)
        previous = (order - 1) % rows
        ended = self.terminals[previous] | (self.next_index[previous] >= self.capacity)  # (K, N)
        if self.size == self.rows:
            ended[0] = False  # the wrapped buffer's oldest row: its episode began earlier
        else:
            ended[0] = True  # the first row ever written starts every env's first episode
        starts = ended.flatten().nonzero().squeeze(1)  # positions k * N + env, (num_starts,)
        if starts.numel() == 0:
            raise ValueError(
                "ReplayBuffer.sample_episodes: no episode start is stored yet; the buffer must "
                "hold a whole episode's beginning (raise buffer_size above max_step * num_envs)."
            )
        pick = starts[torch.randint(starts.numel(), (num,), device=self.device)]  # (B,)
        first, env = pick // n, pick % n
        offsets = torch.arange(length, device=self.device).unsqueeze(1)  # (T, 1)
        position = first.unsqueeze(0) + offsets  # (T, B): rows counted from the oldest
        stored = position < sampleable
        flat = order[position.clamp(max=sampleable - 1)] * n + env  # (T, B) flat indices
        terminals = self.terminals.view(-1)[flat]
        cut = self.next_index.view(-1)[flat] >= self.capacity
        # a step belongs to the episode while no earlier step of it ended the episode
        done_before = torch.cumsum((terminals | cut).int(), 0) - (terminals | cut).int()
        mask = stored & (done_before == 0)
        next_index = self.next_index.view(-1)[flat]
        return Episodes(
            states=self.store[flat].view(*flat.shape, *self.obs_shape),
            actions=self.actions.flatten(0, 1)[flat],
            rewards=self.rewards.view(-1)[flat],
            terminals=terminals,
            next_states=self.store[next_index].view(*flat.shape, *self.obs_shape),
            mask=mask,
        )

    def _n_steps(self, indices: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The n-step view of the transitions at `indices (B,)`: the flat position of each one's
        last step, its discounted reward sum and gamma ** steps. A transition spans n steps, or
        fewer where its episode ends (terminal, or cut with the true last state kept aside) or
        where the newest sampleable row is reached."""
        n, envs, dev = self.n_step, self.num_envs, self.device
        row, col = indices // envs, indices % envs
        offsets = torch.arange(n, device=dev)  # (n,)
        rows = (row.unsqueeze(1) + offsets) % self.rows  # (B, n)
        flat = rows * envs + col.unsqueeze(1)
        ended = self.terminals.view(-1)[flat] | (self.next_index.view(-1)[flat] >= self.capacity)
        stored = (rows - self._oldest_row()) % self.rows < self.size - 1  # a next state exists
        # step k is taken while every step before it went on and step k is stored
        go_on = torch.ones_like(ended)
        go_on[:, 1:] = (~ended[:, :-1]).cumprod(1).bool() & stored[:, 1:]
        go_on = go_on.long().cumprod(1).bool()
        steps = go_on.sum(1)  # (B,) m in 1..n
        powers = self.gamma ** offsets.to(torch.float64)  # (n,) gamma^k, k < n
        rewards = (self.rewards.view(-1)[flat].double() * powers * go_on).sum(1).float()
        last = flat.gather(1, (steps - 1).unsqueeze(1)).squeeze(1)
        discounts = (self.gamma ** steps.to(torch.float64)).float()
        return last, rewards, discounts

    def _gather(self, indices: torch.Tensor, weights: torch.Tensor) -> Batch:
        """The transitions at flat positions `indices (B,)`."""
        return self._gather_last(indices, weights)[0]

    def _gather_last(self, indices: torch.Tensor, weights: torch.Tensor,
                     ) -> tuple[Batch, torch.Tensor]:  # fmt: skip
        """`_gather`, and the flat position `(B,)` of each transition's last step (itself, or
        its n-th where transitions span n steps)."""
        if self.n_step > 1:
            last, rewards, discounts = self._n_steps(indices)
        else:
            last, rewards = indices, self.rewards.view(-1).index_select(0, indices)
            discounts = torch.full_like(rewards, self.gamma)
        next_index = self.next_index.view(-1).index_select(0, last)  # (B,)
        shape = (indices.shape[0], *self.obs_shape)
        if self.frame_stack > 1:
            ring = next_index < self.capacity  # (B,) else a truncated episode's last state
            side = (next_index - self.capacity).clamp(0, self.capacity_trunc - 1)
            states = self._stacked(indices)
            next_states = torch.where(ring.unsqueeze(1),
                                      self._stacked(torch.where(ring, next_index, indices)),
                                      self.trunc_states.index_select(0, side))  # fmt: skip
        else:
            states = self.store.index_select(0, indices)
            next_states = self.store.index_select(0, next_index)
        batch = Batch(
            states=states.view(shape),
            actions=self.actions.flatten(0, 1).index_select(0, indices),
            rewards=rewards,
            terminals=self.terminals.view(-1).index_select(0, last),
            next_states=next_states.view(shape),
            indices=indices,
            weights=weights,
            discounts=discounts,
        )
        return batch, last

    def _shape_info(self) -> dict:
        info = {
            "capacity": self.capacity,
            "num_envs": self.num_envs,
            "state_dim": self.state_dim,
            "action_dim": self.action_dim,
            "if_discrete": self.if_discrete,
            "max_step": self.max_step,
        }
        if self.frame_stack > 1:
            info["frame_stack"] = self.frame_stack
        return info

    def _tensor_names(self) -> tuple[str, ...]:
        if self.frame_stack == 1:
            return self._TENSORS
        return (*(name for name in self._TENSORS if name != "states"), *self._FRAME_TENSORS)

    def _counter_names(self) -> tuple[str, ...]:
        frames = ("stack_ptr", "stack_live") if self.frame_stack > 1 else ()
        return (*self._COUNTERS, *frames)

    def state_dict(self) -> dict:
        """Contents and position as plain data (the tensors are the buffer's own, not copies).
        Of the tensors with a row per time step, only the rows filled so far: a buffer filled to
        a fraction of its capacity saves that fraction (`load_state_dict` restores the rest as
        a new buffer has it)."""
        state = self._shape_info()
        filled = self.size  # rows 0 .. size - 1 until the ring is full, then all of them
        state.update({name: getattr(self, name)[:filled] if name in self._ROW_TENSORS
                      else getattr(self, name) for name in self._tensor_names()})  # fmt: skip
        # views copied: torch.save writes a view's whole storage, the empty rows too
        state = {k: v.clone() if isinstance(v, torch.Tensor) and _is_view(v) else v
                 for k, v in state.items()}  # fmt: skip
        state.update({name: getattr(self, name) for name in self._counter_names()})
        if self.frame_stack > 1:
            state["stack_states"] = self.stack_states  # its size depends on what it held
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned, into this buffer's tensors on its device."""
        mine = self._shape_info()
        theirs = {key: state.get(key) for key in mine}
        if theirs != mine:
            raise CheckpointError(
                f"{type(self).__name__}: the saved buffer was built with {theirs}, this one with "
                f"{mine}; they must match to resume."
            )
        filled = int(state["size"])
        for name in self._tensor_names():
            mine = getattr(self, name)
            if name in self._ROW_TENSORS and len(state[name]) < self.rows:  # only filled rows
                mine[:filled].copy_(state[name][:filled])
                mine[filled:] = self._default_next_index(filled, self.rows - filled) \
                    if name == "next_index" else 0  # fmt: skip
            else:
                mine.copy_(state[name])
        for name in self._counter_names():
            setattr(self, name, int(state[name]))
        if self.frame_stack > 1:
            self.stack_states = state["stack_states"].to(self.device, self.obs_dtype, copy=True)


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritized replay (Schaul et al. 2016) over a vectorized sum tree.

    A transition is drawn with probability p_i^alpha / sum_j p_j^alpha and weighted by
    w_i = (N * P(i))^-beta / max_j w_j, with beta annealed linearly to 1 over `beta_steps` calls
    to `sample`. New transitions get the largest priority seen so far. The trees are flat tensors
    of size 2P (P a power of two >= capacity; node k has children 2k and 2k + 1; leaf i is node
    P + i) holding p^alpha: one for sums, one for minima (the largest weight uses the smallest
    priority). Slots that cannot be sampled (empty, or the newest row) hold 0 in the sum tree and
    +inf in the min tree.
    """

    _TENSORS = (*ReplayBuffer._TENSORS, "sum_tree", "min_tree", "max_priority")
    _COUNTERS = (*ReplayBuffer._COUNTERS, "sample_calls")
    LEVELS_PER_STEP = 5  # tree levels `sample` descends per tensor step (blocks of 32 nodes)

    def __init__(
        self,
        capacity: int,
        num_envs: int,
        state_dim: int,
        action_dim: int,
        if_discrete: bool,
        max_step: int,
        device: torch.device | str = "cpu",
        obs_shape: tuple[int, ...] | None = None,
        obs_dtype: torch.dtype = torch.float32,
        frame_stack: int = 1,
        n_step: int = 1,
        gamma: float = 0.99,
        alpha: float = 0.6,
        beta: float = 0.4,
        beta_steps: int = 100_000,
        eps: float = 1e-6,
    ) -> None:
        super().__init__(capacity, num_envs, state_dim, action_dim, if_discrete, max_step, device,
                         obs_shape, obs_dtype, frame_stack, n_step, gamma)  # fmt: skip
        if alpha < 0 or not 0 <= beta <= 1 or beta_steps < 1 or eps <= 0:
            raise ConfigError(
                "PrioritizedReplayBuffer: need alpha >= 0, 0 <= beta <= 1, beta_steps >= 1 and "
                f"eps > 0, got alpha={alpha}, beta={beta}, beta_steps={beta_steps}, eps={eps}."
            )
        self.alpha, self.beta, self.beta_steps, self.eps = alpha, beta, beta_steps, eps
        self.depth = (self.capacity - 1).bit_length()  # levels below the root
        self.tree_size = 1 << self.depth  # P
        # float64: a float32 draw cannot resolve a million leaves of equal priority.
        self.sum_tree = torch.zeros(2 * self.tree_size, dtype=torch.float64, device=self.device)
        self.min_tree = torch.full_like(self.sum_tree, float("inf"))
        self.max_priority = torch.ones((), dtype=torch.float64, device=self.device)
        self.sample_calls = 0  # drives the beta schedule

    @staticmethod
    def bytes_needed(
        capacity: int,
        num_envs: int,
        state_dim: int,
        action_dim: int,
        if_discrete: bool,
        max_step: int,
        obs_bytes: int = 4,
        frame_stack: int = 1,
    ) -> int:
        """Bytes the buffer's tensors take: the uniform buffer plus two float64 trees."""
        base = ReplayBuffer.bytes_needed(
            capacity,
            num_envs,
            state_dim,
            action_dim,
            if_discrete,
            max_step,
            obs_bytes,
            frame_stack,
        )
        stored = (capacity // num_envs) * num_envs
        return base + 2 * 2 * (1 << (stored - 1).bit_length()) * 8 + 8

    @property
    def current_beta(self) -> float:
        """The beta the next `sample` uses."""
        progress = min(1.0, self.sample_calls / self.beta_steps)
        return self.beta + (1.0 - self.beta) * progress

    def _set_rows(self, first_row: int, count: int, valid: bool) -> None:
        """Give every transition of `count` rows from `first_row` the max priority, or none."""
        value = self.max_priority**self.alpha if valid else 0.0
        low = value if valid else float("inf")
        for a, b in _ring_slices(first_row, count, self.rows):
            lo, hi = self.tree_size + a * self.num_envs, self.tree_size + b * self.num_envs
            self.sum_tree[lo:hi] = value
            self.min_tree[lo:hi] = low
            while lo > 1:  # parents of a contiguous range are a contiguous range
                lo, hi = lo // 2, (hi - 1) // 2 + 1
                self.sum_tree[lo:hi] = self.sum_tree[2 * lo : 2 * hi].view(-1, 2).sum(dim=1)
                self.min_tree[lo:hi] = self.min_tree[2 * lo : 2 * hi].view(-1, 2).amin(dim=1)

    @torch.no_grad()
    def add(self, transitions: Transitions) -> None:
        """Append like `ReplayBuffer.add`; the rows that became sampleable get the max priority."""
        had_rows = self.size > 0
        start = self.ptr
        super().add(transitions)
        keep = min(transitions.rewards.shape[0], self.rows)
        if keep == self.rows:  # every row was rewritten
            self._set_rows(0, self.rows, valid=True)
        elif had_rows:  # the previous newest row is sampleable now
            self._set_rows((start - 1) % self.rows, keep, valid=True)
        elif keep > 1:
            self._set_rows(start, keep - 1, valid=True)
        self._set_rows((self.ptr - 1) % self.rows, 1, valid=False)  # the newest row
        if self._skip_rows():  # stacked frames: the oldest rows' stacks cannot be rebuilt
            self._set_rows(self._oldest_row(), self._skip_rows(), valid=False)

    def sample(self, batch_size: int) -> Batch:
        """Draw `batch_size` transitions proportionally to priority^alpha, with their weights.

        Stratified as in the paper: draw i falls in the i-th of `batch_size` equal slices of the
        total priority, so each draw's marginal is exactly proportional. Uses the global RNG.
        """
        self._check_can_sample()
        beta = self.current_beta
        self.sample_calls += 1
        dev = self.device
        total = self.sum_tree[1]
        strata = torch.arange(batch_size, device=dev, dtype=torch.float64)
        u = (strata + torch.rand(batch_size, device=dev, dtype=torch.float64)) * (
            total / batch_size
        )  # (B,) prefix-sum targets in [0, total)
        leaf = self._find_leaves(u)  # (B,)
        # (N * P(i))^-beta / max_j (N * P(j))^-beta = (p_i / p_min)^-beta
        p = self.sum_tree.index_select(0, leaf + self.tree_size)
        weights = (p / self.min_tree[1]).pow(-beta).float()
        return self._gather(leaf, weights)

    def _find_leaves(self, u: torch.Tensor) -> torch.Tensor:
        """Leaves `(B,)` whose prefix-sum interval holds each target `u (B,)`.

        The textbook descent goes one level per step (left child if u < its sum, else right
        with u minus that sum). This one goes LEVELS_PER_STEP levels per step, for 4x fewer
        tensor ops: the descendants of node k that many levels down are consecutive nodes, whose
        prefix sums pick the branch. tests/test_buffer.py checks it against the textbook form.
        """
        node = torch.ones_like(u, dtype=torch.int64)  # (B,) the root
        levels_left = self.depth
        while levels_left > 0:
            d = min(self.LEVELS_PER_STEP, levels_left)
            block = self.sum_tree.view(-1, 1 << d).index_select(0, node)  # (B, 2^d)
            prefix = block.cumsum(dim=1)  # (B, 2^d)
            # Rounding can leave u at or past the node's sum: keep it inside, so the branch
            # picked always has a positive sum and an empty slot is never reached.
            u = torch.minimum(u, prefix[:, -1] * (1 - 2**-52)).unsqueeze(1)  # (B, 1)
            branch = torch.searchsorted(prefix, u, right=True)  # (B, 1): first prefix > u
            u = (u - (prefix - block).gather(1, branch)).squeeze(1)
            node = (node << d) + branch.squeeze(1)
            levels_left -= d
        return node - self.tree_size

    @torch.no_grad()
    def update_priorities(self, indices: torch.Tensor, td_errors: torch.Tensor) -> None:
        """Set priority |td| + eps for the transitions at flat positions `indices (B,)`.

        A non-finite TD error (NaN, inf: a diverging critic) gets the current max priority
        instead, so the tree stays finite and the transition keeps being replayed. With
        duplicate indices the last one wins. Positions that are no longer sampleable (an add
        since the sample made them the newest row) stay at priority 0 and leave the max alone.
        """
        indices = indices.to(self.device).reshape(-1)  # (B,)
        td = td_errors.detach().to(self.device, torch.float64).reshape(-1)  # (B,)
        if indices.shape != td.shape:
            raise ValueError(
                f"update_priorities: indices {tuple(indices.shape)} and td_errors "
                f"{tuple(td.shape)} must hold one value per transition."
            )
        if indices.numel() == 0:
            return
        # Positions an add made unsampleable since they were drawn are left out (priority 0).
        rel_row = (indices // self.num_envs - self._oldest_row()) % self.rows
        valid = (rel_row < self.size - 1) & (rel_row >= self._skip_rows())
        priority = torch.where(torch.isfinite(td), td.abs() + self.eps, self.max_priority)
        self.max_priority = torch.maximum(self.max_priority, (priority * valid).max())

        # Duplicates: every copy takes the value of the last one, so the scatter is deterministic.
        order = torch.sort(indices, stable=True).indices
        sorted_idx = indices[order]
        is_last = torch.ones_like(sorted_idx, dtype=torch.bool)
        is_last[:-1] = sorted_idx[1:] != sorted_idx[:-1]
        position = torch.arange(len(order), device=self.device)
        last_of_group = torch.where(is_last, position, len(order))
        last_of_group = order[last_of_group.flip(0).cummin(0).values.flip(0)]
        priority, valid = priority[last_of_group], valid[last_of_group]

        leaf = priority**self.alpha
        node = sorted_idx + self.tree_size
        self.sum_tree.index_copy_(0, node, torch.where(valid, leaf, 0.0))
        self.min_tree.index_copy_(0, node, torch.where(valid, leaf, float("inf")))
        sum_pairs, min_pairs = self.sum_tree.view(-1, 2), self.min_tree.view(-1, 2)
        for _ in range(self.depth):  # parents recomputed level by level; duplicates agree
            node = node >> 1
            self.sum_tree.index_copy_(0, node, sum_pairs.index_select(0, node).sum(dim=1))
            self.min_tree.index_copy_(0, node, min_pairs.index_select(0, node).amin(dim=1))
