"""Stacked frames stored once each (`ReplayBuffer(frame_stack=K)`): every sampled stack equals,
bit for bit, the one the env gave, across episode starts of every kind, truncations, wrapping,
adds that do not continue, checkpoints and prioritized replay; and the frames take 1/K of the
memory."""

from __future__ import annotations

import io

import pytest
import torch

from xiaoyarl.core.buffer import PrioritizedReplayBuffer, ReplayBuffer, Transitions

K, F, A = 4, 3, 2  # frames per stack, values per frame, actions


class FrameStream:
    """N envs whose observations are stacks of K frames `(K, F)`, oldest first, like Atari's.

    A frame is `[id, env, 1]` with a fresh id each step, so every stack names its frames and a
    wrong one cannot look right. A new episode starts with one of: gymnasium's reset padding
    (its first frame K times), zero padding, or a stack of frames never seen before (an env
    that stacks its own way); a truncated episode's last state is a plain continuation.
    """

    def __init__(self, num_envs: int, max_step: int, p_end: float, seed: int = 0) -> None:
        self.n, self.max_step, self.p_end = num_envs, max_step, p_end
        self.gen = torch.Generator().manual_seed(seed)
        self.next_id = 1
        self.t = 0
        self.elapsed = [0] * num_envs
        self.starts = {"reset": 0, "zero": 0, "whole": 0}
        self.stacks = [self._start(e) for e in range(num_envs)]
        self.reference: dict[tuple[int, int], dict] = {}

    def _frame(self, env: int) -> torch.Tensor:
        self.next_id += 1
        return torch.tensor([float(self.next_id), float(env), 1.0])

    def _start(self, env: int) -> torch.Tensor:
        kind = int(torch.randint(3, (1,), generator=self.gen))
        first = self._frame(env)
        if kind == 0:
            stack = first.repeat(K, 1)
        elif kind == 1:
            stack = torch.cat([torch.zeros(K - 1, F), first.unsqueeze(0)])
        else:
            stack = torch.stack([self._frame(env) for _ in range(K - 1)] + [first])
        self.starts[("reset", "zero", "whole")[kind]] += 1
        return stack

    def reset_all(self) -> None:
        """Every env starts a new episode (as after a resume that could not restore the envs)."""
        self.stacks = [self._start(e) for e in range(self.n)]
        self.elapsed = [0] * self.n

    def chunk(self, length: int) -> Transitions:
        n = self.n
        states = torch.zeros(length, n, K, F)
        next_states = torch.zeros(length, n, K, F)
        actions = torch.randint(0, A, (length, n), generator=self.gen)
        rewards = torch.rand(length, n, generator=self.gen)
        terminals = torch.rand(length, n, generator=self.gen) < self.p_end
        truncates = torch.zeros(length, n, dtype=torch.bool)
        for i in range(length):
            for e in range(n):
                self.elapsed[e] += 1
                truncates[i, e] = self.elapsed[e] >= self.max_step
                states[i, e] = self.stacks[e]
                next_states[i, e] = torch.cat([self.stacks[e][1:], self._frame(e).unsqueeze(0)])
                self.reference[(self.t, e)] = {
                    "state": states[i, e].clone(),
                    "action": int(actions[i, e]),
                    "terminal": bool(terminals[i, e]),
                    "next_state": next_states[i, e].clone(),
                }
                if terminals[i, e] or truncates[i, e]:
                    self.elapsed[e] = 0
                    self.stacks[e] = self._start(e)
                else:
                    self.stacks[e] = next_states[i, e]
            self.t += 1
        return Transitions(states, actions, rewards, terminals, truncates, next_states)


def check(buf: ReplayBuffer, stream: FrameStream, batch_size: int = 2048) -> int:
    """Every sampled transition equals one of the reference's, next state included (where the
    step was not terminal); returns how many distinct ones were seen."""
    batch = buf.sample(batch_size)
    by_state: dict[bytes, list[dict]] = {}
    for ref in stream.reference.values():
        by_state.setdefault(ref["state"].numpy().tobytes(), []).append(ref)
    seen = set()
    for i in range(batch_size):
        state = batch.states[i]
        assert state.shape == (K, F)
        candidates = by_state.get(state.numpy().tobytes())
        assert candidates, f"sampled stack {state.tolist()} was never given by the env"
        ref = candidates[0]
        assert len(candidates) == 1  # frame ids are unique, so stacks are
        assert int(batch.actions[i]) == ref["action"]
        assert bool(batch.terminals[i]) == ref["terminal"]
        if not ref["terminal"]:
            assert torch.equal(batch.next_states[i], ref["next_state"])
        seen.add(state.numpy().tobytes())
    return len(seen)


@pytest.mark.parametrize("num_envs", [1, 3])
def test_frames_stored_once_rebuild_every_stack(num_envs: int) -> None:
    torch.manual_seed(0)
    rows = 24
    buf = ReplayBuffer(rows * num_envs, num_envs, K * F, A, True, 6, obs_shape=(K, F),
                       frame_stack=K)  # fmt: skip
    stream = FrameStream(num_envs, max_step=6, p_end=0.15)
    for length in [5, 7, 3, 13, 40, 1, 9, 24, 2, 30]:
        buf.add(stream.chunk(length))
        if buf.num_sampleable:
            distinct = check(buf, stream)
            # uniform over every sampleable row: a wrapped ring skips its oldest K - 1 rows
            assert distinct == buf.num_sampleable
    assert min(stream.starts.values()) > 0  # every kind of episode start was replayed
    assert buf.trunc_live > 0
    assert buf.stack_live > 0 and buf.stack_states.shape[0] >= buf.stack_live


def test_side_store_grows_and_keeps_its_stacks() -> None:
    """Episodes of one step, most starting with an unseen stack: the side store must grow."""
    buf = ReplayBuffer(64 * 4, 4, K * F, A, True, 50, obs_shape=(K, F), frame_stack=K)
    first = buf.stack_states.shape[0]
    stream = FrameStream(4, max_step=50, p_end=0.9, seed=1)
    for _ in range(10):
        buf.add(stream.chunk(16))
        check(buf, stream)
    assert buf.stack_states.shape[0] > first


def test_add_that_does_not_continue_and_checkpoint_round_trip() -> None:
    buf = ReplayBuffer(20 * 2, 2, K * F, A, True, 8, obs_shape=(K, F), frame_stack=K)
    stream = FrameStream(2, max_step=8, p_end=0.1, seed=2)
    buf.add(stream.chunk(12))
    stream.reset_all()  # the next add does not continue the streams
    buf.add(stream.chunk(5))
    check(buf, stream)

    saved = io.BytesIO()
    torch.save(buf.state_dict(), saved)
    other = ReplayBuffer(20 * 2, 2, K * F, A, True, 8, obs_shape=(K, F), frame_stack=K)
    saved.seek(0)
    other.load_state_dict(torch.load(saved))
    assert_same_samples(buf, other, seed=3)
    chunk = stream.chunk(30)  # both go on the same way after the restore
    buf.add(chunk)
    other.add(chunk)
    assert_same_samples(buf, other, seed=4)
    check(other, stream)


def assert_same_samples(a: ReplayBuffer, b: ReplayBuffer, seed: int) -> None:
    """Both buffers draw the same batch from the same random state."""
    batches = []
    for buf in (a, b):
        torch.manual_seed(seed)
        batches.append(buf.sample(64))
    for x, y in zip(*batches, strict=True):
        assert torch.equal(x, y)


def test_prioritized_replay_with_frames_never_draws_unrebuildable_rows() -> None:
    rows, n = 12, 2
    buf = PrioritizedReplayBuffer(rows * n, n, K * F, A, True, 6, obs_shape=(K, F),
                                  frame_stack=K)  # fmt: skip
    stream = FrameStream(n, max_step=6, p_end=0.2, seed=5)
    for length in [7, 9, 4, 11]:
        buf.add(stream.chunk(length))
        check(buf, stream)
        batch = buf.sample(256)
        buf.update_priorities(batch.indices, torch.rand(256) * 3)  # uneven priorities
        check(buf, stream)
    rel_row = (torch.arange(rows) - (buf.ptr - buf.size)) % rows
    leaves = buf.sum_tree[buf.tree_size : buf.tree_size + buf.capacity].view(rows, n)
    assert bool((leaves[rel_row < K - 1] == 0).all())  # the wrapped ring's oldest K - 1 rows
    assert bool((leaves[rel_row == rows - 1] == 0).all())  # the newest row


def test_frames_take_a_quarter_of_the_memory() -> None:
    """A million Atari transitions (4 x 84 x 84 uint8) fit in ~7 GB, not ~28 GB."""
    args = dict(capacity=1_000_000, num_envs=8, state_dim=4 * 84 * 84, action_dim=6,
                if_discrete=True, max_step=27_000, obs_bytes=1)  # fmt: skip
    whole = ReplayBuffer.bytes_needed(**args)
    frames = ReplayBuffer.bytes_needed(**args, frame_stack=4)
    assert whole > 28e9 and frames < 7.3e9
    small = dict(args, capacity=4096, state_dim=K * F, obs_bytes=4)
    buf = ReplayBuffer(4096, 8, K * F, 6, True, 27_000, obs_shape=(K, F), frame_stack=K)
    assert ReplayBuffer.bytes_needed(**small, frame_stack=K) == allocated_bytes(buf)


def test_frame_stack_needs_frames_on_the_first_axis() -> None:
    with pytest.raises(Exception, match=r"frame_stack=4 needs observations of shape \(4"):
        ReplayBuffer(400, 4, 12, 2, True, 10, obs_shape=(12,), frame_stack=4)


def test_a_partly_filled_buffer_saves_its_filled_rows_only_and_resumes_the_same() -> None:
    """A buffer filled to a tenth of its rows (Atari's 1M-step buffer a few thousand steps in)
    saves a fraction of the bytes it holds; restored into a new buffer it holds the same
    tensors, draws the same batches and goes on alike, through its first wrap."""
    buf = ReplayBuffer(400 * 2, 2, K * F, A, True, 8, obs_shape=(K, F), frame_stack=K)
    stream = FrameStream(2, max_step=8, p_end=0.1, seed=4)
    buf.add(stream.chunk(40))  # 40 of 400 rows
    state = buf.state_dict()
    kept = sum(t.numel() * t.element_size() for t in state.values() if torch.is_tensor(t))
    assert kept < 0.25 * allocated_bytes(buf)
    saved = io.BytesIO()
    torch.save(state, saved)
    saved.seek(0)
    other = ReplayBuffer(400 * 2, 2, K * F, A, True, 8, obs_shape=(K, F), frame_stack=K)
    other.load_state_dict(torch.load(saved, weights_only=True))
    for name in buf._tensor_names():
        assert torch.equal(getattr(other, name), getattr(buf, name)), name
    for seed in range(3):  # the last add wraps the ring
        assert_same_samples(buf, other, seed=seed)
        chunk = stream.chunk(190)
        buf.add(chunk)
        other.add(chunk)
        check(other, stream)


def allocated_bytes(buf: ReplayBuffer) -> int:
    """Bytes of every tensor the buffer holds, filled or not."""
    tensors = [getattr(buf, name) for name in buf._tensor_names()] + [buf.stack_states]
    return sum(t.numel() * t.element_size() for t in tensors)
