"""Replay buffers against a slow reference: a Python list of transitions per env."""

from __future__ import annotations

import io

import pytest
import torch

from xiaoyarl.core.buffer import (
    Batch,
    Episodes,
    PrioritizedReplayBuffer,
    ReplayBuffer,
    Transitions,
)
from xiaoyarl.errors import CheckpointError, EnvError

S, A = 3, 2  # state_dim, action_dim
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


class Stream:
    """Synthetic episodes for N envs, chopped into `Transitions` of any length.

    A state is `[t, n, kind]`: kind 0 while an episode goes on, 2 right after a reset; the last
    state of an ended episode is `[t, n, 1]`, a state no step starts from. So every state names
    its (t, n), and a wrong next state cannot look right.
    """

    def __init__(self, num_envs: int, max_step: int, p_terminal: float, discrete: bool, seed=0):
        self.n, self.max_step, self.p_terminal, self.discrete = (
            num_envs,
            max_step,
            p_terminal,
            discrete,
        )
        self.gen = torch.Generator().manual_seed(seed)
        self.t = 0
        self.elapsed = [0] * num_envs
        self.state = [[0.0, float(n), 2.0] for n in range(num_envs)]
        self.reference: list[dict] = []  # every transition, in time order

    def chunk(self, length: int) -> Transitions:
        n = self.n
        states = torch.zeros(length, n, S)
        next_states = torch.zeros(length, n, S)
        if self.discrete:
            actions = torch.randint(0, A, (length, n), generator=self.gen)
        else:
            actions = torch.rand(length, n, A, generator=self.gen)
        rewards = torch.rand(length, n, generator=self.gen)
        terminals = torch.rand(length, n, generator=self.gen) < self.p_terminal
        truncates = torch.zeros(length, n, dtype=torch.bool)
        for i in range(length):
            t = self.t
            for e in range(n):
                self.elapsed[e] += 1
                truncates[i, e] = self.elapsed[e] >= self.max_step
                done = bool(terminals[i, e] or truncates[i, e])
                states[i, e] = torch.tensor(self.state[e])
                next_states[i, e] = torch.tensor([t + 1.0, e, 1.0 if done else 0.0])
                self.reference.append(
                    {
                        "t": t,
                        "n": e,
                        "state": states[i, e].clone(),
                        "action": actions[i, e].clone(),
                        "reward": float(rewards[i, e]),
                        "terminal": bool(terminals[i, e]),
                        "next_state": next_states[i, e].clone(),
                    }
                )
                if done:
                    self.elapsed[e] = 0
                    self.state[e] = [t + 1.0, float(e), 2.0]
                else:
                    self.state[e] = next_states[i, e].tolist()
            self.t += 1
        return Transitions(states, actions, rewards, terminals, truncates, next_states)


def check_batch(batch: Batch, stream: Stream, rows: int) -> set[tuple[int, int]]:
    """Every sampled transition is in the reference, with the right next state, and sampleable."""
    batch = Batch(*(x.cpu() for x in batch))
    lookup = {(r["t"], r["n"]): r for r in stream.reference}
    newest = stream.t - 1
    seen = set()
    for i in range(batch.states.shape[0]):
        key = (int(batch.states[i, 0]), int(batch.states[i, 1]))
        ref = lookup[key]
        assert newest - rows < key[0] < newest, f"{key} is evicted or in the newest row"
        assert torch.equal(batch.states[i], ref["state"])
        assert torch.equal(batch.actions[i], ref["action"])
        assert float(batch.rewards[i]) == pytest.approx(ref["reward"])
        assert bool(batch.terminals[i]) == ref["terminal"]
        if not ref["terminal"]:  # the next state after a terminal step is never used
            assert torch.equal(batch.next_states[i], ref["next_state"]), key
        assert torch.isfinite(batch.next_states[i]).all()
        seen.add(key)
    return seen


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("num_envs,discrete", [(1, False), (3, False), (4, True)])
def test_add_and_sample_match_reference(num_envs: int, discrete: bool, device: str) -> None:
    torch.manual_seed(0)
    rows, max_step = 16, 5
    buf = ReplayBuffer(rows * num_envs, num_envs, S, A, discrete, max_step, device)
    stream = Stream(num_envs, max_step, p_terminal=0.1, discrete=discrete)
    stored = 0
    # Fill partly, wrap, then more than the whole buffer in one add, then wrap again.
    for length in [5, 7, 3, 13, 40, 1, 9, 16, 2]:
        buf.add(stream.chunk(length))
        stored = min(stored + length, rows)
        assert len(buf) == stored * num_envs
        assert buf.num_sampleable == (stored - 1) * num_envs
        if stored < 2:
            continue
        batch = buf.sample(1024)
        assert batch.actions.dtype == (torch.int64 if discrete else torch.float32)
        assert batch.actions.shape == ((1024,) if discrete else (1024, A))
        assert batch.weights.shape == (1024,) and bool((batch.weights == 1).all())
        assert batch.states.device.type == torch.device(device).type  # "cuda" is "cuda:0"
        seen = check_batch(batch, stream, rows)
        newest = stream.t - 1
        expected = {(t, n) for t in range(newest - stored + 1, newest) for n in range(num_envs)}
        assert seen == expected  # uniform over exactly the valid transitions
    assert any(r["terminal"] for r in stream.reference)
    assert buf.trunc_live > 0  # truncated steps were stored and checked


@pytest.mark.parametrize("num_envs", [1, 3])
def test_sample_episodes_match_reference(num_envs: int) -> None:
    """Whole episodes for recurrent agents: every sampled episode starts at a stored episode
    start (never the evicted beginning of one), runs in order through its own steps, and is
    masked from its end (or the newest sampleable row) on; all valid starts get drawn."""
    torch.manual_seed(0)
    rows, max_step, length = 24, 6, 8
    buf = ReplayBuffer(rows * num_envs, num_envs, S, A, False, max_step)
    stream = Stream(num_envs, max_step, p_terminal=0.15, discrete=False)
    checked = False
    for chunk in [5, 9, 14, 3, 20, 7]:  # fill, then wrap
        buf.add(stream.chunk(chunk))
        stored = min(stream.t, rows)
        if stored < 2:
            continue
        lookup = {(r["t"], r["n"]): r for r in stream.reference}
        newest, oldest = stream.t - 1, stream.t - stored
        episodes = Episodes(*(x.cpu() for x in buf.sample_episodes(2000, length)))
        assert episodes.mask.shape == (length, 2000) and episodes.mask[0].all()
        starts = set()
        for b in range(2000):
            t0, n = int(episodes.states[0, b, 0]), int(episodes.states[0, b, 1])
            assert episodes.states[0, b, 2] == 2  # the state right after a reset
            assert oldest < t0 or (t0 == 0 == oldest), (t0, oldest)
            starts.add((t0, n))
            ended = False
            for k in range(length):
                key = (t0 + k, n)
                valid = not ended and key[0] < newest
                assert bool(episodes.mask[k, b]) == valid, (b, k)
                if not valid:
                    continue
                ref = lookup[key]
                assert torch.equal(episodes.states[k, b], ref["state"])
                assert torch.equal(episodes.actions[k, b], ref["action"])
                assert bool(episodes.terminals[k, b]) == ref["terminal"]
                if not ref["terminal"]:
                    assert torch.equal(episodes.next_states[k, b], ref["next_state"])
                ended = ref["terminal"] or ref["next_state"][2] == 1
        expected = {
            (r["t"], r["n"]) for r in stream.reference
            if r["state"][2] == 2 and r["t"] < newest and (oldest < r["t"] or r["t"] == 0 == oldest)
        }  # fmt: skip
        assert starts == expected  # uniform over exactly the valid starts
        checked = True
    assert checked and stream.t > rows  # the buffer wrapped


def test_truncated_next_state_is_the_true_last_state() -> None:
    """An infinite-horizon env: only time-limit cut-offs; the reset state must never leak in."""
    num_envs, rows = 2, 12
    buf = ReplayBuffer(rows * num_envs, num_envs, S, A, False, max_step=3)
    stream = Stream(num_envs, 3, p_terminal=0.0, discrete=False)
    for length in [4, 4, 4, 4]:
        buf.add(stream.chunk(length))
    batch = buf.sample(2000)
    check_batch(batch, stream, rows)
    truncated = batch.next_states[:, 2] == 1.0  # kind 1: the last state of an episode
    assert bool(truncated.any()) and not bool(batch.terminals.any())
    assert bool((batch.next_states[truncated, 0] == batch.states[truncated, 0] + 1).all())


def test_sample_before_two_rows_raises() -> None:
    buf = ReplayBuffer(20, 2, S, A, False, 5)
    with pytest.raises(ValueError, match="next state"):
        buf.sample(4)
    buf.add(Stream(2, 5, 0.0, False).chunk(1))
    with pytest.raises(ValueError, match="next state"):
        buf.sample(4)


def test_add_rejects_bad_shapes() -> None:
    buf = ReplayBuffer(20, 2, S, A, False, 5)
    good = Stream(2, 5, 0.0, False).chunk(3)
    with pytest.raises(ValueError, match="next_states"):
        buf.add(good._replace(next_states=good.next_states[:, :1]))
    with pytest.raises(ValueError, match="actions"):
        buf.add(good._replace(actions=good.actions[..., 0]))


def test_add_that_does_not_continue_keeps_the_true_next_state() -> None:
    """Envs reset between two adds (resume without env state): the boundary stays correct."""
    num_envs, rows = 2, 10
    buf = ReplayBuffer(rows * num_envs, num_envs, S, A, False, max_step=50)
    first = Stream(num_envs, 50, 0.0, False, seed=1)
    buf.add(first.chunk(4))
    second = Stream(num_envs, 50, 0.0, False, seed=2)
    second.t = first.t + 100  # other states: (t, n) keys stay unique
    second.state = [[second.t, float(n), 2.0] for n in range(num_envs)]
    buf.add(second.chunk(3))
    batch = buf.sample(500)
    boundary = batch.states[:, 0] == first.t - 1
    assert bool(boundary.any())
    assert bool((batch.next_states[boundary, 0] == first.t).all())  # not the other stream's state
    first.reference += second.reference
    first.t = second.t
    check_batch(batch, first, rows=10**6)  # t jumps by 100 between the streams
    assert buf.trunc_live == num_envs  # the two broken steps, nothing else


def test_too_many_truncations_raise_a_clear_error() -> None:
    buf = ReplayBuffer(40, 2, S, A, False, max_step=100)  # room for 2 * (20 // 100 + 2) = 4
    stream = Stream(2, 1, 0.0, False)  # truncates every step, against max_step=100
    with pytest.raises(EnvError, match="max_step"):
        buf.add(stream.chunk(3))


def test_state_dict_round_trip() -> None:
    stream = Stream(3, 4, 0.1, False)
    buf = ReplayBuffer(30, 3, S, A, False, 4)
    for length in [6, 7]:
        buf.add(stream.chunk(length))
    saved = io.BytesIO()
    torch.save(buf.state_dict(), saved)
    saved.seek(0)
    other = ReplayBuffer(30, 3, S, A, False, 4)
    other.load_state_dict(torch.load(saved, weights_only=True))
    assert len(other) == len(buf)
    for _ in range(2):  # the same contents and position: later adds agree too
        torch.manual_seed(7)
        a = buf.sample(64)
        torch.manual_seed(7)
        b = other.sample(64)
        for x, y in zip(a, b, strict=True):
            assert torch.equal(x, y)
        chunk = stream.chunk(5)
        buf.add(chunk)
        other.add(chunk)
    with pytest.raises(CheckpointError, match="state_dim"):
        ReplayBuffer(30, 3, S + 1, A, False, 4).load_state_dict(buf.state_dict())


def test_a_checkpoint_of_a_partly_filled_buffer_holds_only_its_filled_part() -> None:
    """A 4,000-step DQN run on Atari wrote a 7.2 GB checkpoint: the filled rows were saved as
    views, and torch.save writes a view's whole storage (the 1M empty rows too)."""

    def saved_bytes(buf: ReplayBuffer) -> int:
        out = io.BytesIO()
        torch.save(buf.state_dict(), out)
        return out.tell()

    stream = Stream(4, 8, 0.1, False)
    large = ReplayBuffer(40_000, 4, S, A, False, 8)
    large.add(stream.chunk(10))  # 10 of 10,000 rows
    whole = ReplayBuffer.bytes_needed(40_000, 4, S, A, False, 8)
    assert saved_bytes(large) < whole / 10  # it saved all 1.4 MB
    frames = ReplayBuffer(40_000, 2, 4 * 6, A, True, 1000, obs_shape=(4, 6), frame_stack=4)
    whole = ReplayBuffer.bytes_needed(40_000, 2, 4 * 6, A, True, 1000, frame_stack=4)
    assert saved_bytes(frames) < whole / 10  # stacked frames, none filled yet


def test_bytes_needed_is_linear_and_exact() -> None:
    args = dict(num_envs=4, state_dim=17, action_dim=6, if_discrete=False, max_step=10)
    sizes = [ReplayBuffer.bytes_needed(c, **args) for c in (400, 800, 1200)]
    assert sizes[1] - sizes[0] == sizes[2] - sizes[1] > 0
    for cls in (ReplayBuffer, PrioritizedReplayBuffer):
        for discrete in (False, True):
            kw = {**args, "if_discrete": discrete}
            buf = cls(400, **kw)
            actual = sum(  # every tensor it holds (a checkpoint saves only the filled rows)
                v.numel() * v.element_size()
                for v in (getattr(buf, name) for name in buf._tensor_names())
            )
            assert cls.bytes_needed(400, **kw) == actual


# --- prioritized replay ----------------------------------------------------------------------


def per_buffer(num_envs: int = 2, rows: int = 5, **kw) -> tuple[PrioritizedReplayBuffer, Stream]:
    """A full PER buffer: rows - 1 sampleable rows."""
    buf = PrioritizedReplayBuffer(rows * num_envs, num_envs, S, A, False, 4, **kw)
    stream = Stream(num_envs, 4, 0.1, False)
    buf.add(stream.chunk(rows + 2))
    return buf, stream


def leaves(buf: PrioritizedReplayBuffer) -> torch.Tensor:
    return buf.sum_tree[buf.tree_size : buf.tree_size + buf.capacity].cpu()


def check_trees(buf: PrioritizedReplayBuffer) -> None:
    """Every inner node is the sum (and min) of its children."""
    p, sums, mins = buf.tree_size, buf.sum_tree.cpu(), buf.min_tree.cpu()
    assert torch.allclose(sums[1:p], sums[2:].view(-1, 2).sum(1), rtol=1e-12)
    assert torch.equal(mins[1:p], mins[2:].view(-1, 2).amin(1))
    assert torch.isfinite(sums).all()


def valid_positions(buf: ReplayBuffer) -> torch.Tensor:
    """(R * N,) bool: the sampleable flat positions (stored rows but the newest)."""
    rel_row = (torch.arange(buf.rows) - (buf.ptr - buf.size)) % buf.rows
    return (rel_row < buf.size - 1).repeat_interleave(buf.num_envs)


def test_per_new_transitions_get_max_priority_and_newest_row_zero() -> None:
    buf, stream = per_buffer()
    valid = valid_positions(buf)
    assert bool((leaves(buf)[valid] == 1.0).all()) and bool((leaves(buf)[~valid] == 0).all())
    newest = torch.nonzero(~valid).squeeze(1)
    buf.update_priorities(torch.tensor([0, 3]), torch.tensor([3.0, 0.5]))
    buf.update_priorities(newest, torch.tensor([9.0, 9.0]))  # stale: stays unsampleable
    assert bool((leaves(buf)[newest] == 0).all())
    buf.add(stream.chunk(2))
    valid = valid_positions(buf)
    assert bool((leaves(buf)[~valid] == 0).all())
    new_rows = torch.zeros(buf.rows, dtype=torch.bool)
    new_rows[[(buf.ptr - 3) % buf.rows, (buf.ptr - 2) % buf.rows]] = True
    fresh = new_rows.repeat_interleave(buf.num_envs)
    expected = torch.tensor(3.0 + 1e-6, dtype=torch.float64) ** 0.6
    assert torch.allclose(leaves(buf)[fresh], expected)
    check_trees(buf)


def test_per_sampling_frequencies_match_priorities() -> None:
    torch.manual_seed(0)
    buf, stream = per_buffer(num_envs=2, rows=5, alpha=0.7)
    valid = torch.nonzero(valid_positions(buf)).squeeze(1)  # 8 positions
    td = torch.tensor([0.1, 0.5, 1.0, 2.0, 0.0, 4.0, 0.3, 1.5])
    buf.update_priorities(valid, td)
    draws, batch_size = 100_000, 250
    counts = torch.zeros(buf.capacity)
    for i in range(draws // batch_size):
        batch = buf.sample(batch_size)
        counts += torch.bincount(batch.indices, minlength=buf.capacity)
        if i < 4:
            check_batch(batch, stream, buf.rows)
    p = (td.double().abs() + 1e-6) ** 0.7
    expected = draws * p / p.sum()
    assert counts.sum() == draws and counts[valid].sum() == draws  # never an invalid slot
    chi2 = float(((counts[valid].double() - expected) ** 2 / expected).sum())
    assert chi2 < 24.3  # chi-square, 7 degrees of freedom, p = 0.001


def test_per_importance_weights_match_the_formula() -> None:
    torch.manual_seed(1)
    buf, _ = per_buffer(alpha=0.6, beta=0.4)
    valid = torch.nonzero(valid_positions(buf)).squeeze(1)
    td = torch.linspace(0.05, 3.0, len(valid))
    buf.update_priorities(valid, td)
    batch = buf.sample(64)
    prio = torch.zeros(buf.capacity, dtype=torch.float64)
    prio[valid] = (td.double() + 1e-6) ** 0.6
    prob = prio / prio.sum()
    n = len(valid)
    w = (n * prob[valid]) ** -0.4
    expected = (n * prob[batch.indices]) ** -0.4 / w.max()
    assert batch.weights.dtype == torch.float32
    assert torch.allclose(batch.weights.double(), expected, rtol=1e-6)


def test_per_duplicate_indices_last_wins() -> None:
    buf, _ = per_buffer()
    idx = torch.tensor([4, 1, 4, 6, 1, 4])
    buf.update_priorities(idx, torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 7.0]))
    expected = {4: 7.0, 1: 5.0, 6: 4.0}
    for i, td in expected.items():
        assert float(leaves(buf)[i]) == pytest.approx((td + 1e-6) ** 0.6)
    check_trees(buf)
    assert float(buf.max_priority) == pytest.approx(7.0 + 1e-6)


def test_per_non_finite_td_errors_do_not_poison_the_tree() -> None:
    buf, stream = per_buffer()
    buf.update_priorities(torch.tensor([0, 1]), torch.tensor([5.0, 1.0]))
    buf.update_priorities(
        torch.tensor([2, 3, 5]), torch.tensor([float("nan"), float("inf"), -float("inf")])
    )
    max_leaf = (5.0 + 1e-6) ** 0.6
    assert float(buf.max_priority) == pytest.approx(5.0 + 1e-6)
    for i in (2, 3, 5):
        assert float(leaves(buf)[i]) == pytest.approx(max_leaf)
    check_trees(buf)
    assert torch.isfinite(buf.sum_tree[1])
    batch = buf.sample(256)
    assert torch.isfinite(batch.weights).all()
    check_batch(batch, stream, buf.rows)


def test_per_beta_anneals_linearly_to_one() -> None:
    buf, _ = per_buffer(beta=0.4, beta_steps=10)
    valid = torch.nonzero(valid_positions(buf)).squeeze(1)
    buf.update_priorities(valid, torch.arange(len(valid), dtype=torch.float32))
    p_min = float(buf.min_tree[1])
    for calls in range(13):
        beta = 0.4 + 0.6 * min(1.0, calls / 10)
        assert buf.current_beta == pytest.approx(beta)
        batch = buf.sample(32)
        leaf = leaves(buf)[batch.indices]
        assert torch.allclose(batch.weights.double(), (leaf / p_min) ** -beta, rtol=1e-6)
    assert buf.current_beta == 1.0


@pytest.mark.parametrize("device", DEVICES)
def test_per_tree_stays_consistent_through_adds_and_updates(device: str) -> None:
    torch.manual_seed(3)
    buf = PrioritizedReplayBuffer(3 * 7, 3, S, A, False, 4, device)  # 21 leaves, 32-leaf tree
    stream = Stream(3, 4, 0.1, False)
    for length in [2, 5, 9, 30, 4]:
        buf.add(stream.chunk(length))
        batch = buf.sample(64)
        check_batch(batch, stream, buf.rows)
        buf.update_priorities(batch.indices, torch.randn(64, device=device))
        check_trees(buf)
        valid = valid_positions(buf)
        assert bool((leaves(buf)[valid] > 0).all()) and bool((leaves(buf)[~valid] == 0).all())
        assert float(buf.sum_tree[1]) == pytest.approx(float(leaves(buf).sum()))


def test_per_state_dict_round_trip() -> None:
    buf, stream = per_buffer(beta_steps=50)
    batch = buf.sample(16)
    buf.update_priorities(batch.indices, torch.rand(16) * 3)
    saved = io.BytesIO()
    torch.save(buf.state_dict(), saved)
    saved.seek(0)
    other = PrioritizedReplayBuffer(10, 2, S, A, False, 4, beta_steps=50)
    other.load_state_dict(torch.load(saved, weights_only=True))
    assert other.sample_calls == 1 and other.current_beta == buf.current_beta
    torch.manual_seed(11)
    a = buf.sample(64)
    torch.manual_seed(11)
    b = other.sample(64)
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)


def textbook_leaf(tree: torch.Tensor, u: float) -> int:
    """One level per step: left if u is below the left sum (or right is empty), else right."""
    p = tree.shape[0] // 2
    node = 1
    while node < p:
        left = float(tree[2 * node])
        if u < left or float(tree[2 * node + 1]) == 0:
            node = 2 * node
        else:
            u -= left
            node = 2 * node + 1
    return node - p


def test_per_multi_level_descent_equals_the_textbook_descent() -> None:
    torch.manual_seed(5)
    # 300 leaves in a 512-leaf tree: depth 9, descended in steps of 5 and 4 levels.
    buf = PrioritizedReplayBuffer(300, 3, S, A, False, 4, alpha=1.0, eps=2**-20)
    buf.add(Stream(3, 4, 0.1, False).chunk(100))
    valid = torch.nonzero(valid_positions(buf)).squeeze(1)
    buf.update_priorities(valid, torch.randint(0, 5, (len(valid),)).float())  # exact sums
    prefix = torch.cumsum(leaves(buf), 0)
    total = float(buf.sum_tree[1])
    assert total == float(prefix[-1])
    u = torch.cat(
        [
            torch.rand(200, dtype=torch.float64) * total,
            prefix[:-1],  # exactly on every boundary
            torch.tensor([0.0, total, total * (1 + 1e-12)], dtype=torch.float64),
        ]
    )
    got = buf._find_leaves(u)
    expected = torch.tensor([textbook_leaf(buf.sum_tree, float(x)) for x in u])
    assert torch.equal(got, expected)
    assert bool((leaves(buf)[got] > 0).all())  # never an empty or newest-row slot


# --- n-step returns ----------------------------------------------------------------------------


@pytest.mark.parametrize("n_step", [2, 3, 6])
@pytest.mark.parametrize("prioritized", [False, True])
def test_n_step_batches_match_a_slow_reference(n_step: int, prioritized: bool) -> None:
    """Each sampled transition spans n steps, or fewer where its episode ends (terminal or
    truncated: the true last state) or the newest row is reached; its reward is the discounted
    sum, its next state and terminal flag those of its last step, its discount gamma^m."""
    gamma, rows, num_envs = 0.9, 20, 3
    cls = PrioritizedReplayBuffer if prioritized else ReplayBuffer
    buf = cls(rows * num_envs, num_envs, S, A, True, 8, n_step=n_step, gamma=gamma)
    stream = Stream(num_envs, max_step=8, p_terminal=0.08, discrete=True)
    lookup = {}
    spans = set()
    for length in [6, 9, 30, 4, 13]:
        buf.add(stream.chunk(length))
        lookup.update({(r["t"], r["n"]): r for r in stream.reference})
        newest = stream.t - 1  # its row's next states are not stored yet
        batch = Batch(*(x.cpu() for x in buf.sample(512)))
        for i in range(512):
            t, n = int(batch.states[i, 0]), int(batch.states[i, 1])
            reward, m = 0.0, 0
            while True:
                ref = lookup[(t + m, n)]
                reward += gamma**m * ref["reward"]
                m += 1
                ended = ref["next_state"][2] == 1.0  # terminal or truncated
                if ended or m == n_step or t + m >= newest:
                    break
            spans.add(m)
            assert float(batch.rewards[i]) == pytest.approx(reward, rel=1e-5, abs=1e-6)
            assert float(batch.discounts[i]) == pytest.approx(gamma**m, rel=1e-6)
            assert bool(batch.terminals[i]) == ref["terminal"]
            if not ref["terminal"]:
                assert torch.equal(batch.next_states[i], ref["next_state"])
    assert spans == set(range(1, n_step + 1))  # every length, cut short and whole, was checked


def test_one_step_batches_discount_by_gamma() -> None:
    buf = ReplayBuffer(40, 2, S, A, True, 5, gamma=0.97)
    buf.add(Stream(2, 5, 0.1, True).chunk(10))
    assert bool((buf.sample(64).discounts == torch.tensor(0.97)).all())
