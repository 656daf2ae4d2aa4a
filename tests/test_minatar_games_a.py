"""The torch MinAtar Breakout, Freeway and Asterix against the `minatar` package's own games.

1. Transitions: a batch of the package's game objects play random episodes, now and then
   jumping to random states (ramp levels, cleared walls, full lanes, the time limit near).
   Before every step their internals are copied into our env (`set_sim_state`); both take the
   same action, and observation, reward and termination must agree exactly. Where the
   package draws random numbers (Freeway's new car speeds, Asterix's spawns) a recorder
   catches them and our env's draw method is replaced to return uniforms giving the same
   outcomes, so these steps are compared exactly too.
2. Random-policy returns and episode lengths of ours and the package agree (Welch t-test).
3. The contract: shapes, auto-reset, state_dict round trip.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

minatar = pytest.importorskip("minatar")
stats = pytest.importorskip("scipy.stats")

from xiaoyarl.envs.minatar import asterix as ast  # noqa: E402
from xiaoyarl.envs.minatar import breakout as brk  # noqa: E402
from xiaoyarl.envs.minatar import freeway as fwy  # noqa: E402
from xiaoyarl.envs.minatar.base import ACTION_MAP, MinAtarEnv  # noqa: E402

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
CLASSES = {"breakout": brk.BreakoutEnv, "freeway": fwy.FreewayEnv, "asterix": ast.AsterixEnv}
# the package's direction codes as velocities (x, y)
BALL_VELOCITY = {0: (-1, -1), 1: (1, -1), 2: (1, 1), 3: (-1, 1)}


class _Recorder:
    """The package's `random` (a numpy RandomState), logging every draw."""

    def __init__(self, seed: int) -> None:
        self._rs = np.random.RandomState(seed)
        self.log: list[tuple[str, Any]] = []

    def rand(self, *size: int) -> Any:
        value = self._rs.rand(*size)
        self.log.append(("rand", value))
        return value

    def randint(self, *args: int) -> Any:
        value = self._rs.randint(*args)
        self.log.append(("randint", (args, value)))
        return value


# --- package game objects -> our game-state layout ---
def _breakout_state(g: Any) -> np.ndarray:
    assert not g.brick_map[[0, *range(4, 10)]].any()  # bricks live in rows 1..3 only
    s = np.zeros(brk.BreakoutEnv.game_dim)
    s[[brk.BALL_X, brk.BALL_Y, brk.PADDLE]] = g.ball_x, g.ball_y, g.pos
    s[[brk.VEL_X, brk.VEL_Y]] = BALL_VELOCITY[g.ball_dir]
    s[[brk.LAST_X, brk.LAST_Y, brk.STRIKE]] = g.last_x, g.last_y, float(g.strike)
    s[brk.BRICKS] = g.brick_map[1:4].ravel()
    return s


def _freeway_state(g: Any) -> np.ndarray:
    cars = np.array(g.cars, dtype=float)  # rows: x, y, timer, signed speed
    assert (cars[:, 1] == np.arange(1, 9)).all()
    s = np.zeros(fwy.FreewayEnv.game_dim)
    s[[fwy.POS, fwy.MOVE_TIMER, fwy.TIME_LEFT]] = g.pos, g.move_timer, g.terminate_timer
    s[fwy.CAR_X], s[fwy.CAR_TIMER], s[fwy.CAR_SPEED] = cars[:, 0], cars[:, 2], cars[:, 3]
    return s


def _asterix_state(g: Any) -> np.ndarray:
    s = np.zeros(ast.AsterixEnv.game_dim)
    s[[ast.PLAYER_X, ast.PLAYER_Y]] = g.player_x, g.player_y
    s[[ast.SPAWN_SPEED, ast.SPAWN_TIMER]] = g.spawn_speed, g.spawn_timer
    s[[ast.MOVE_SPEED, ast.MOVE_TIMER]] = g.move_speed, g.move_timer
    s[[ast.RAMP_TIMER, ast.RAMP_INDEX]] = g.ramp_timer, g.ramp_index
    for i, e in enumerate(g.entities):
        if e is not None:
            assert e[1] == i + 1
            s[[ast.PRESENT.start + i, ast.OBJ_X.start + i]] = 1, e[0]
            s[[ast.OBJ_RIGHT.start + i, ast.OBJ_GOLD.start + i]] = float(e[2]), float(e[3])
    return s


# --- the package's recorded draws -> uniforms with the same outcomes in ours ---
def _freeway_draws(log: list) -> list[float]:
    if not log:
        return [0.0] * 16
    # randint(1, 6, 8), then rand(8); the package signs the first array in place
    (_, (_, speeds)), (_, signs) = log
    return [(abs(s) - 0.5) / 5 for s in speeds] + [0.25 if r < 0.5 else 0.75 for r in signs]


def _asterix_draws(log: list) -> list[float]:
    if not log:
        return [0.0] * 3
    draws = [0.25 if log[0][1] < 0.5 else 0.75, 0.1 if log[1][1] < 1 / 3 else 0.9, 0.5]
    if len(log) == 3:  # a free lane was drawn: randint(k) gave idx
        (k,), idx = log[2][1]
        draws[2] = (idx + 0.5) / k
    return draws


# --- random package states ---
def _breakout_jump(g: Any, rng: np.random.Generator) -> None:
    g.ball_x, g.ball_y, g.ball_dir = (
        int(rng.integers(10)),
        int(rng.integers(9)),
        int(rng.integers(4)),
    )
    g.pos, g.last_x, g.last_y = int(rng.integers(10)), int(rng.integers(10)), int(rng.integers(9))
    g.strike = bool(rng.random() < 0.3)
    density = rng.choice([0.0, 0.05, 0.5, 1.0])  # 0: the wall is rebuilt at the paddle
    g.brick_map[1:4] = rng.random((3, 10)) < density


def _freeway_jump(g: Any, rng: np.random.Generator) -> None:
    # the chicken near the top half the time, so that many steps score and redraw the cars
    g.pos, g.move_timer = int(rng.integers(1, rng.choice([3, 10]))), int(rng.integers(4))
    if rng.random() < 0.3:
        g.terminate_timer = int(rng.integers(3))  # the time limit a step or two away
    for car in g.cars:
        car[0], car[2] = int(rng.integers(10)), int(rng.integers(abs(car[3]) + 1))


def _asterix_jump(g: Any, rng: np.random.Generator) -> None:
    g.player_x, g.player_y = int(rng.integers(10)), int(rng.integers(1, 9))
    fill = rng.choice([0.2, 0.5, 1.0])  # 1: no free lane for a spawn
    g.entities = [
        [int(rng.integers(10)), i + 1, bool(rng.random() < 0.5), bool(rng.random() < 1 / 3)]
        if rng.random() < fill
        else None
        for i in range(8)
    ]
    g.spawn_speed, g.move_speed = int(rng.integers(1, 11)), int(rng.integers(1, 6))
    g.spawn_timer, g.move_timer = int(rng.integers(g.spawn_speed + 1)), int(rng.integers(2))
    g.ramp_timer, g.ramp_index = int(rng.integers(-1, 3)), int(rng.integers(20))


GAMES: dict[str, tuple[Callable, Callable, Callable | None, str | None]] = {
    # game: (state converter, random jump, draws converter, our draw method)
    "breakout": (_breakout_state, _breakout_jump, None, None),
    "freeway": (_freeway_state, _freeway_jump, _freeway_draws, "_car_draws"),
    "asterix": (_asterix_state, _asterix_jump, _asterix_draws, "_spawn_draws"),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "game, ramping", [("breakout", True), ("freeway", True), ("asterix", True), ("asterix", False)]
)
def test_transitions_match_the_package(game: str, ramping: bool, device: str) -> None:
    batch, steps, jump = 64, 200, 0.05
    convert, jump_to, to_draws, draw_method = GAMES[game]
    module = importlib.import_module(f"minatar.environments.{game}")
    rng = np.random.default_rng(7)
    games = []
    for b in range(batch):
        g = module.Env(ramping=ramping)
        g.random = _Recorder(100 + b)
        g.reset()
        games.append(g)
    minimal = games[0].minimal_action_set()
    ours = CLASSES[game](
        batch, device=device, seed=0, sticky_action_prob=0.0, difficulty_ramping=ramping
    )
    assert [ACTION_MAP.index(a) for a in ours.minimal_actions] == minimal
    seen: Counter = Counter()
    for t in range(steps):
        for g in games:
            if rng.random() < jump:
                jump_to(g, rng)
        sim = torch.tensor(np.stack([np.concatenate([[0.0], convert(g)]) for g in games]))
        actions = rng.integers(len(minimal), size=batch)
        rewards, terms, obs, draws = [], [], [], []
        for g, a in zip(games, actions, strict=True):
            g.random.log.clear()
            ramp_index = getattr(g, "ramp_index", 0)
            r, term = g.act(minimal[a])
            seen["ramps"] += getattr(g, "ramp_index", 0) != ramp_index
            seen["drawn"] += bool(g.random.log)
            rewards.append(r)
            terms.append(term)
            obs.append(g.state().transpose(2, 0, 1))
            if to_draws is not None:
                draws.append(to_draws(g.random.log))
        if draw_method is not None:
            fed = torch.tensor(draws, dtype=torch.float32, device=device)
            setattr(ours, draw_method, lambda n, fed=fed: fed)
        ours.set_sim_state(sim)
        _, reward, terminated, _, info = ours.step(torch.tensor(actions, device=device))
        expected = np.stack(obs)
        got = info["final_state"].cpu().numpy()
        bad = np.flatnonzero((got != expected).any((1, 2, 3)))
        if bad.size:
            b = bad[0]
            diff = np.argwhere(got[b] != expected[b])
            raise AssertionError(f"{game} step {t} sub-env {b}: {sim[b]} {actions[b]} {diff}")
        assert reward.cpu().tolist() == [float(r) for r in rewards], f"{game} step {t}: reward"
        assert terminated.cpu().tolist() == terms, f"{game} step {t}: termination"
        seen["transitions"] += batch
        seen["reward"] += sum(rewards)
        seen["terminated"] += sum(terms)
        for g, term in zip(games, terms, strict=True):
            if term:
                g.reset()
    print(f"\n{game} ramping={ramping}: {dict(seen)}")
    assert seen["reward"] > 20 and seen["terminated"] > 5
    if draw_method is not None:
        assert seen["drawn"] > 50  # spawns and new car speeds compared exactly
    if game == "asterix" and ramping:
        assert seen["ramps"] > 20


def _package_episodes(game: str, episodes: int, probs: list[float], seed: int) -> np.ndarray:
    """(episodes, 2) returns and lengths of a random policy in the package (sticky 0.1)."""
    env = minatar.Environment(game, sticky_action_prob=0.1)
    env.seed(seed)
    minimal = env.minimal_action_set()
    rng = np.random.default_rng(seed)
    results = []
    for _ in range(episodes):
        env.reset()
        total, length, done = 0.0, 0, False
        while not done:
            if length % 4096 == 0:
                choices = rng.choice(len(minimal), size=4096, p=probs)
            r, done = env.act(minimal[choices[length % 4096]])
            total, length = total + r, length + 1
        results.append((total, length))
    return np.array(results)


def _our_episodes(game: str, episodes: int, probs: list[float], seed: int) -> np.ndarray:
    """(episodes, 2): the first episode of each of `episodes` sub-envs (no bias to short
    episodes), sticky 0.1."""
    env = CLASSES[game](episodes, seed=seed)
    env.reset()
    gen = torch.Generator().manual_seed(seed)
    weights = torch.tensor(probs)
    total = torch.zeros(episodes)
    length = torch.zeros(episodes)
    results = torch.zeros(episodes, 2)
    finished = torch.zeros(episodes, dtype=torch.bool)
    while not finished.all():
        action = torch.multinomial(weights, episodes, replacement=True, generator=gen)
        _, reward, terminated, truncated, _ = env.step(action)
        total += reward
        length += 1
        done = terminated | truncated
        first = done & ~finished
        results[first] = torch.stack([total, length], 1)[first]
        finished |= done
        total[done] = 0
        length[done] = 0
    return results.numpy()


@pytest.mark.parametrize(
    "game, episodes, probs",
    [
        ("breakout", 2000, [1 / 3] * 3),
        ("asterix", 1000, [0.2] * 5),
        ("freeway", 100, [1 / 3] * 3),
        ("freeway", 60, [0.15, 0.7, 0.15]),  # mostly up: many crossings and collisions
    ],
)
def test_random_policy_returns_match_the_package(
    game: str, episodes: int, probs: list[float]
) -> None:
    theirs = _package_episodes(game, episodes, probs, seed=1)
    ours = _our_episodes(game, episodes, probs, seed=1)
    for k, what in enumerate(("return", "length")):
        a, b = ours[:, k], theirs[:, k]
        if a.std() == 0 and b.std() == 0:  # Freeway's fixed length
            assert a.mean() == b.mean(), what
            continue
        p = stats.ttest_ind(a, b, equal_var=False).pvalue
        print(f"\n{game} {probs} {what}: ours {a.mean():.3f} package {b.mean():.3f} p={p:.3g}")
        assert p > 1e-3, f"{game} {what}: ours {a.mean():.3f}, package {b.mean():.3f}, p={p}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("game", list(CLASSES))
def test_contract(game: str, device: str) -> None:
    cls = CLASSES[game]
    for n in (1, 5):
        env = cls(n, device=device, seed=3)
        state, _ = env.reset()
        assert state.shape == (n, cls.channels, 10, 10) and state.dtype == torch.bool
        assert state.device.type == device and env.spec.action_dim == len(cls.minimal_actions)
        for _ in range(40):
            action = torch.randint(env.spec.action_dim, (n,), device=device)
            state, reward, terminated, truncated, info = env.step(action)
            assert state.shape == info["final_state"].shape == (n, cls.channels, 10, 10)
            assert reward.shape == terminated.shape == truncated.shape == (n,)
            assert reward.dtype == torch.float32 and terminated.dtype == torch.bool

    # auto-reset: a state that ends on the next step restarts, its final state kept
    env = cls(2, device=device, seed=0, sticky_action_prob=0.0)
    fresh = env._observe(env._sample_initial(64))  # both of Breakout's starts, surely
    sim = env.sim_state.clone()
    if game == "breakout":  # the ball falls past the paddle
        sim[0, 1:9] = torch.tensor([0.0, 8, 1, 1, 9, 0, 8, 0])
    elif game == "freeway":  # the time limit
        sim[0, 1 + fwy.TIME_LEFT] = 0
    else:  # an enemy in the player's row, one cell to its right, moving left, moves now
        sim[0, 1 + ast.MOVE_TIMER] = 0
        for col, value in ((ast.PRESENT, 1), (ast.OBJ_X, 6), (ast.OBJ_RIGHT, 0), (ast.OBJ_GOLD, 0)):
            sim[0, 1 + col.start + 4] = value  # lane 4 is row 5, the player's
    env.set_sim_state(sim)
    state, _, terminated, _, info = env.step(torch.zeros(2, dtype=torch.int64, device=device))
    assert terminated.tolist() == [True, False]
    assert not torch.equal(info["final_state"][0], state[0]) and env.elapsed[0] == 0
    if game != "freeway":  # Freeway's initial cars differ by their random speeds
        assert (fresh == state[0]).flatten(1).all(1).any()

    # state_dict round trip: the same steps afterwards, sticky draws included
    env = cls(4, device=device, seed=5)
    gen = torch.Generator().manual_seed(0)
    actions = torch.randint(env.spec.action_dim, (60, 4), generator=gen).to(device)
    for a in actions[:20]:
        env.step(a)
    saved = env.state_dict()

    def rollout(e: MinAtarEnv) -> list[torch.Tensor]:
        return [torch.cat([x.flatten().float() for x in e.step(a)[:4]]) for a in actions[20:]]

    first = rollout(env)
    env.load_state_dict(saved)
    assert all(torch.equal(x, y) for x, y in zip(first, rollout(env), strict=True))


def test_initial_states() -> None:
    breakout = brk.BreakoutEnv(4000, seed=0)
    left = breakout.sim_state[:, 1 + brk.BALL_X] == 0
    assert 0.45 < left.float().mean() < 0.55
    freeway = fwy.FreewayEnv(4000, seed=0)
    speed = freeway.sim_state[:, 1 + fwy.CAR_SPEED.start : 1 + fwy.CAR_SPEED.stop]
    counts = torch.bincount((speed + 5).long().flatten(), minlength=11).float() / speed.numel()
    # speeds -5..-1 and 1..5 (indices 0..4, 6..10) a tenth each, never 0
    assert counts[5] == 0 and (counts[[0, 1, 2, 3, 4, 6, 7, 8, 9, 10]] - 0.1).abs().max() < 0.01
    asterix = ast.AsterixEnv(3, seed=0)
    assert (asterix.sim_state == asterix.sim_state[0]).all()  # deterministic start
