"""The torch-native MinAtar SpaceInvaders and Seaquest against the `minatar` package.

1. Transition by transition: the package's game objects are converted into our layout, both
   take the same action, and the observation, reward, termination and the whole next state
   must agree exactly. Spawns draw random numbers: the test peeks at the uniforms our step
   is about to draw (five per sub-env, in the order the env documents: enemy direction, enemy
   is a sub, enemy row, diver direction, diver row) and feeds the same numbers to the package,
   so every step is compared, spawns included. Episodes start from the package's reset or from
   injected mid-game states (late ramp levels, divers aboard, thinned alien waves) so that the
   difficulty ramping, the six-diver bonus and crowded late-game seas are covered.
2. Random-policy returns and episode lengths (sticky actions 0.1) match the package's
   (Welch t-test).
3. The env contract: shapes, dtypes, auto-reset, `state_dict` round-trip.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch

minatar = pytest.importorskip("minatar")

from minatar.environments import seaquest as pkg_seaquest  # noqa: E402
from minatar.environments import space_invaders as pkg_space_invaders  # noqa: E402

from xiaoyarl.envs.minatar import seaquest as sq  # noqa: E402
from xiaoyarl.envs.minatar.seaquest import SeaquestEnv  # noqa: E402
from xiaoyarl.envs.minatar.space_invaders import SpaceInvadersEnv  # noqa: E402
from xiaoyarl.errors import EnvError  # noqa: E402

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


# --- converters: the package's game object -> our game state (without the sticky column) ---
def si_game(env: pkg_space_invaders.Env) -> list[float]:
    scalars = [env.pos, env.alien_dir, env.enemy_move_interval, env.alien_move_timer]
    scalars += [env.alien_shot_timer, env.shot_timer, env.ramp_index]
    maps = [env.alien_map, env.f_bullet_map, env.e_bullet_map]
    return [float(v) for v in scalars] + np.concatenate([m.flatten() for m in maps]).tolist()


def _slots(rows: list[list[int]], fields: int, cap: int) -> list[float]:
    """Rows of `fields` values into a field-major block of `cap` slots."""
    assert len(rows) <= cap, f"{len(rows)} objects overflow a capacity of {cap}"
    block = np.zeros((fields, cap))
    for k, row in enumerate(rows):
        block[:, k] = row
    return block.flatten().tolist()


def sq_game(env: pkg_seaquest.Env) -> list[float]:
    scalars = [env.oxygen, env.diver_count, env.sub_x, env.sub_y, int(env.sub_or)]
    scalars += [env.e_spawn_speed, env.e_spawn_timer, env.d_spawn_timer, env.move_speed]
    scalars += [env.ramp_index, env.shot_timer, int(env.surface)]
    f_rows = [[1, x, y, int(lr)] for x, y, lr in env.f_bullets]
    d_rows = [[1, x, y, int(lr), t] for x, y, lr, t in env.divers]
    e_rows = [[sq.FISH, x, y, int(lr), t, 0] for x, y, lr, t in env.e_fish]
    e_rows += [[sq.SUB, x, y, int(lr), t, s] for x, y, lr, t, s in env.e_subs]
    scalars += [len(e_rows), len(env.e_bullets)]
    b_codes = [[(x + 1) + 16 * (y - 1) - 128 * int(lr)] for x, y, lr in env.e_bullets]
    game = [float(v) for v in scalars] + _slots(f_rows, sq.F_FIELDS, sq.F_CAP)
    game += _slots(d_rows, sq.D_FIELDS, sq.D_CAP) + _slots(e_rows, sq.E_FIELDS, sq.E_CAP)
    return game + _slots(b_codes, 1, sq.B_CAP)


def sq_canonical(game: list[float]) -> tuple:
    """A Seaquest game state as lists of objects: unordered lists sorted, ordered ones kept."""
    g = [int(v) for v in game]
    scalars = tuple(g[: sq.N_SCALARS])

    def rows(start: int, fields: int, cap: int) -> list[tuple[int, ...]]:
        block = np.array(g[start : start + fields * cap]).reshape(fields, cap)
        return [tuple(block[:, k]) for k in range(cap) if block[0, k] != 0]

    f = sorted(rows(sq.F_START, sq.F_FIELDS, sq.F_CAP))
    d = rows(sq.D_START, sq.D_FIELDS, sq.D_CAP)
    e = rows(sq.E_START, sq.E_FIELDS, sq.E_CAP)
    free = np.array(g[sq.E_START : sq.B_START]).reshape(sq.E_FIELDS, sq.E_CAP)[:, len(e) :]
    assert not free.any()  # alive first, the free slots all 0
    fish = [r[1:5] for r in e if r[0] == sq.FISH]
    subs = [r[1:] for r in e if r[0] == sq.SUB]
    b = sorted(rows(sq.B_START, 1, sq.B_CAP))
    assert all(v == 0 for v in g[sq.B_START + len(b) :])  # alive first, the rest 0
    return scalars, f, d, fish, subs, b


class FedRandom:
    """Stands in for the package game's `self.random`, returning given numbers in turn."""

    def __init__(self) -> None:
        self.queue: list[float] = []

    def rand(self) -> float:
        return self.queue.pop(0)

    def randint(self, low: int, high: int) -> int:
        return int(self.queue.pop(0))


# --- injected starts ---
def si_start(env: pkg_space_invaders.Env, rng: np.random.RandomState) -> None:
    env.reset()
    if rng.rand() < 0.5:
        return
    # a thinned, shifted wave, at a random ramp level and timers
    ramp = rng.randint(0, 7) if env.ramping else 0
    env.ramp_index, env.enemy_move_interval = ramp, 12 - ramp
    keep = rng.rand(4, 6) < rng.choice([0.05, 0.3, 0.8])
    keep[rng.randint(4), rng.randint(6)] = True
    aliens = np.zeros((10, 10))
    top, left = rng.randint(0, 6), rng.randint(0, 5)
    aliens[top : top + 4, left : left + 6] = keep
    env.alien_map = aliens
    env.alien_dir = rng.choice([-1, 1])
    env.alien_move_timer = rng.randint(0, env.enemy_move_interval + 1)
    env.alien_shot_timer = rng.randint(0, 11)
    env.pos = rng.randint(10)


def sq_start(env: pkg_seaquest.Env, rng: np.random.RandomState) -> None:
    env.reset()
    if rng.rand() < 0.3:
        return
    # a ramp level as reached by surfacing, with divers aboard and the sub under water
    level = rng.choice([rng.randint(0, 8), rng.randint(8, 25)]) if env.ramping else 0
    for _ in range(level):
        if env.e_spawn_speed > 1 or env.move_speed > 2:
            if env.move_speed > 2 and env.ramp_index % 2:
                env.move_speed -= 1
            if env.e_spawn_speed > 1:
                env.e_spawn_speed -= 1
            env.ramp_index += 1
    env.e_spawn_timer = rng.randint(0, env.e_spawn_speed + 1)
    env.d_spawn_timer = rng.randint(0, 31)
    env.diver_count = rng.randint(-2, 7)
    env.oxygen = rng.randint(1, 201)
    env.sub_x, env.sub_y = rng.randint(1, 9), rng.randint(0, 9)
    env.surface = env.sub_y == 0


def sq_action(env: pkg_seaquest.Env, rng: np.random.RandomState) -> int:
    """Random, but not surfacing with no diver aboard (episodes long enough to see a lot)."""
    a = rng.randint(6)
    if a == 2 and env.sub_y == 1 and env.diver_count == 0 and rng.rand() < 0.9:
        a = 0
    return a


GAMES = {
    "space_invaders": (SpaceInvadersEnv, pkg_space_invaders.Env, si_game, si_start),
    "seaquest": (SeaquestEnv, pkg_seaquest.Env, sq_game, sq_start),
}


def run_lockstep(
    game: str,
    device: str,
    ramping: bool,
    num_envs: int,
    steps: int,
    resync: bool,
    seed: int,
    start: Callable | None = None,
    policy: Callable | None = None,
) -> dict:
    """Step our env and `num_envs` package games side by side for `steps` steps, asserting that
    they agree. `resync`: copy the package's state into ours before every step (else only at
    the start of each episode, and ours runs on its own state). `start(pkg_env, rng)` begins an
    episode, `policy(pkg_env, rng)` gives an index into the minimal actions. Returns counts."""
    env_cls, pkg_cls, to_game, default_start = GAMES[game]
    start = start or default_start
    rng = np.random.RandomState(seed)
    env = env_cls(num_envs, device=device, seed=seed, sticky_action_prob=0.0,
                  difficulty_ramping=ramping)  # fmt: skip
    minimal = list(env.minimal_actions)
    if policy is None:
        policy = sq_action if game == "seaquest" else lambda p, rng: rng.randint(len(minimal))
    pkgs = [pkg_cls(ramping=ramping) for _ in range(num_envs)]
    fed = [FedRandom() for _ in range(num_envs)]
    for p, f in zip(pkgs, fed, strict=True):
        p.random = f
        start(p, rng)
    full_of = [pkgs[0].action_map.index(a) for a in minimal]

    def load(rows: list[int]) -> None:
        sim = env.sim_state.clone()
        for i in rows:
            sim[i, 1:] = torch.tensor(to_game(pkgs[i]))
        env.set_sim_state(sim)

    load(list(range(num_envs)))
    counts: dict = {"transitions": 0, "episodes": 0, "reward": 0.0, "max_ramp": 0, "max_len": {}}
    for step in range(steps):
        if resync:
            load(list(range(num_envs)))
        # the uniforms our step will draw (five per sub-env), fed to the package's spawns
        g = env.generator.get_state()
        u = torch.rand((num_envs, 5), generator=env.generator, device=env.device).cpu()
        env.generator.set_state(g)
        actions, expected = [], []
        for i, p in enumerate(pkgs):
            a = policy(p, rng)
            if game == "seaquest":
                if p.e_spawn_timer == 0:
                    fed[i].queue += [float(u[i, 0]), float(u[i, 1]), 1 + min(int(u[i, 2] * 8), 7)]
                if p.d_spawn_timer == 0:
                    fed[i].queue += [float(u[i, 3]), 1 + min(int(u[i, 4] * 8), 7)]
            actions.append(a)
            r, term = p.act(full_of[a])
            assert not fed[i].queue  # the package drew exactly the numbers fed
            expected.append((p.state().transpose(2, 0, 1), r, term))
        _, reward, terminated, _, info = env.step(torch.tensor(actions, device=device))
        final = info["final_state"].cpu().numpy()
        reward, terminated = reward.cpu().numpy(), terminated.cpu().numpy()
        sim = env.sim_state.cpu()
        restart = []
        for i, (obs, r, term) in enumerate(expected):
            where = f"{game} sub-env {i}, step {step}"
            np.testing.assert_array_equal(final[i], obs, err_msg=where)
            assert reward[i] == r, where
            assert terminated[i] == term, where
            if not term:  # the whole next state (ours has reset where the episode ended)
                if game == "seaquest":
                    ours = sq_canonical(sim[i, 1:].tolist())
                    assert ours == sq_canonical(to_game(pkgs[i])), where
                else:
                    assert sim[i, 1:].tolist() == to_game(pkgs[i]), where
            counts["reward"] += r
            counts["max_ramp"] = max(counts["max_ramp"], pkgs[i].ramp_index)
            if game == "seaquest":
                sizes = {name: len(getattr(pkgs[i], name)) for name in LISTS}
                sizes["enemies"] = len(pkgs[i].e_fish) + len(pkgs[i].e_subs)
                for name, size in sizes.items():
                    counts["max_len"][name] = max(counts["max_len"].get(name, 0), size)
            if term:
                counts["episodes"] += 1
                start(pkgs[i], rng)
                restart.append(i)
        counts["transitions"] += num_envs
        if restart:
            load(restart)
    return counts


LISTS = ("f_bullets", "divers", "e_bullets")
CAPS = {"f_bullets": sq.F_CAP, "divers": sq.D_CAP, "e_bullets": sq.B_CAP, "enemies": sq.E_CAP}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("resync", [True, False])
def test_space_invaders_transitions(device: str, resync: bool) -> None:
    counts = run_lockstep("space_invaders", device, True, 16, 150, resync, seed=1)
    print(counts)
    assert counts["transitions"] == 2400 and counts["episodes"] > 20
    assert counts["max_ramp"] >= 1  # some waves were cleared and came back faster


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("resync", [True, False])
def test_seaquest_transitions(device: str, resync: bool) -> None:
    counts = run_lockstep("seaquest", device, True, 16, 150, resync, seed=2)
    print(counts)
    assert counts["transitions"] == 2400 and counts["episodes"] > 20
    assert counts["reward"] > 20
    for name, cap in CAPS.items():
        assert counts["max_len"][name] <= cap


@pytest.mark.parametrize("game", ["space_invaders", "seaquest"])
def test_transitions_without_ramping(game: str) -> None:
    counts = run_lockstep(game, "cpu", False, 8, 100, False, seed=3)
    print(counts)
    assert counts["transitions"] == 800 and counts["max_ramp"] == 0


def test_seaquest_crowded_sea() -> None:
    """Late-game Seaquest (an enemy spawn every step): the sub waits at the surface, out of
    reach, while the rows fill with enemies (some sharing cells) and their bullets; the lists
    stay within the capacities."""

    def crowded(env: pkg_seaquest.Env, rng: np.random.RandomState) -> None:
        env.reset()
        env.e_spawn_speed, env.move_speed, env.ramp_index = 1, 2, 19
        env.e_spawn_timer, env.diver_count = 0, rng.randint(-2, 7)
        env.sub_x = rng.randint(10)
        # a few subs already under way in every row, at random phases of their timers
        for y in range(1, 9):
            lr = bool(rng.rand() < 0.5)
            for x in sorted(rng.choice(10, rng.randint(0, 3), replace=False), reverse=lr):
                env.e_subs.append([int(x), y, lr, rng.randint(0, 3), rng.randint(0, 11)])

    def stay_up(env: pkg_seaquest.Env, rng: np.random.RandomState) -> int:
        return int(rng.choice([0, 1, 3, 5]))  # no-op, left, right, fire: never "down"

    counts = run_lockstep("seaquest", "cpu", True, 4, 120, False, 4, crowded, stay_up)
    print(counts)
    assert counts["max_len"]["enemies"] >= 15 and counts["max_len"]["e_bullets"] >= 5
    for name, cap in CAPS.items():
        assert counts["max_len"][name] <= cap


def dense_sea(env: pkg_seaquest.Env, rng: np.random.RandomState) -> None:
    """A random crowded mid-game state: enemies (some sharing cells) next to the sub, player
    bullets about to meet them, a diver and enemy bullets, random timers. It keeps what every
    reachable state has: one direction per enemy row, no two objects of a list alike in all
    their values, and the sub's bullets ahead of it (left of it going left, right going right)."""
    env.reset()
    env.e_spawn_speed, env.move_speed, env.ramp_index = rng.randint(1, 4), 2, 19
    env.e_spawn_timer, env.d_spawn_timer = rng.randint(0, 3), rng.randint(0, 31)
    env.diver_count, env.oxygen = rng.randint(0, 7), rng.randint(1, 201)
    env.sub_x, env.sub_y, env.surface = rng.randint(1, 9), rng.randint(1, 9), False
    env.sub_or, env.shot_timer = bool(rng.rand() < 0.5), rng.randint(0, 3)
    for y in range(1, 9):
        lr = bool(rng.rand() < 0.5)
        for _ in range(rng.randint(0, 4)):
            x, timer = rng.randint(10), rng.randint(0, 3)
            if rng.rand() < 0.5:
                fish = [x, y, lr, timer]
                if fish not in env.e_fish:
                    env.e_fish.append(fish)
            else:
                sub = [x, y, lr, timer, rng.randint(0, 11)]
                if sub not in env.e_subs:
                    env.e_subs.append(sub)
    for _ in range(rng.randint(0, 3)):
        x, y = rng.randint(10), rng.randint(1, 9)
        bullet = [x, y, x > env.sub_x]
        if x != env.sub_x and all(b[:2] != [x, y] for b in env.f_bullets):
            env.f_bullets.append(bullet)
    if rng.rand() < 0.7:  # one diver: with the next spawns, still at most two at once
        env.divers.append([rng.randint(10), rng.randint(1, 9), bool(rng.rand() < 0.5), 0])
    for _ in range(rng.randint(0, 5)):
        env.e_bullets.append([rng.randint(10), rng.randint(1, 9), bool(rng.rand() < 0.5)])


def test_seaquest_dense_random_states() -> None:
    """Many objects meeting at once: bullets hitting the first fish of a shared cell, subs
    running into bullets (and still firing), pick-ups up to the sixth diver."""
    counts = run_lockstep("seaquest", "cpu", True, 16, 60, True, 5, dense_sea)
    print(counts)
    assert counts["episodes"] > 50 and counts["reward"] > 50


def test_seaquest_directed_cases() -> None:
    """Exact cases of the package's order of updates, one step each."""

    def first_fish_of_a_cell(env: pkg_seaquest.Env, rng: np.random.RandomState) -> None:
        # two fish share a cell (the older one first in the list); the bullet entering it
        # kills the older one only
        env.reset()
        env.sub_x, env.sub_y, env.surface = 6, 4, False
        env.e_fish = [[2, 4, True, 2], [2, 4, True, 1]]
        env.f_bullets = [[3, 4, False]]

    def hit_sub_still_fires(env: pkg_seaquest.Env, rng: np.random.RandomState) -> None:
        # a sub moves into a bullet: both go, +1, and the sub's shot (timer up) still flies
        env.reset()
        env.sub_x, env.sub_y, env.surface = 7, 4, False
        env.e_subs = [[3, 4, True, 0, 0]]
        env.f_bullets = [[5, 4, False]]

    def sixth_diver(env: pkg_seaquest.Env, rng: np.random.RandomState) -> None:
        # two divers reach the sub in one step with room for one: the newer one boards
        env.reset()
        env.sub_x, env.sub_y, env.surface, env.diver_count = 4, 3, False, 5
        env.divers = [[4, 3, True, 3], [5, 3, False, 0]]

    def full_surface(env: pkg_seaquest.Env, rng: np.random.RandomState) -> None:
        # surfacing with six divers: +oxygen * 10 // 200, the count ends at -1
        env.reset()
        env.sub_x, env.sub_y, env.surface, env.diver_count, env.oxygen = 4, 1, False, 6, 157

    cases = [(first_fish_of_a_cell, 0), (hit_sub_still_fires, 0), (sixth_diver, 0)]
    cases += [(full_surface, 2)]  # "up"
    for start, action in cases:
        policy = lambda env, rng, action=action: action  # noqa: E731
        counts = run_lockstep("seaquest", "cpu", True, 1, 1, False, 6, start, policy)
        assert counts["transitions"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("seed", [7, 8, 9])
def test_seaquest_longer_runs(seed: int) -> None:
    """More seeds and longer runs of the three kinds of start (full tier): rare meetings of
    bullets, enemies and divers."""
    counts = run_lockstep("seaquest", "cpu", True, 16, 400, False, seed)
    assert counts["transitions"] == 6400 and counts["episodes"] > 50

    def dense(env: pkg_seaquest.Env, rng: np.random.RandomState) -> None:
        dense_sea(env, rng)
        # the next diver spawns in 31 steps: the one put in has left before the one after
        # (with a sooner spawn, three divers could meet, a state the package never reaches)
        env.d_spawn_timer = 30

    counts = run_lockstep("seaquest", "cpu", True, 16, 120, True, seed, dense)
    assert counts["episodes"] > 100

    def crowded(env: pkg_seaquest.Env, rng: np.random.RandomState) -> None:
        env.reset()
        env.e_spawn_speed, env.move_speed, env.ramp_index = 1, 2, 19
        env.sub_x, env.diver_count = rng.randint(10), rng.randint(0, 7)

    def stay_up(env: pkg_seaquest.Env, rng: np.random.RandomState) -> int:
        return int(rng.choice([0, 1, 3, 5]))  # never "down": the sea fills up

    counts = run_lockstep("seaquest", "cpu", True, 4, 400, False, seed, crowded, stay_up)
    assert counts["max_len"]["enemies"] >= 15
    for name, cap in CAPS.items():
        assert counts["max_len"][name] <= cap


def test_seaquest_slots_in_use_match_all_slots() -> None:
    """On a CPU a step works on the enemy and enemy-bullet slots in use only; on an accelerator
    on all of them. Both give the same steps (the accelerator's way checked here on a CPU)."""

    class AllSlots(SeaquestEnv):
        def _in_use(self, count: torch.Tensor, cap: int) -> int:
            return cap

    envs = [cls(64, seed=3) for cls in (SeaquestEnv, AllSlots)]
    crowded = envs[0].sim_state.clone()
    crowded[:32, 1 + sq.SPAWN_SPEED], crowded[:32, 1 + sq.MOVE_SPEED] = 1, 2
    for env in envs:
        env.set_sim_state(crowded)
    gen = torch.Generator().manual_seed(4)
    most = 0
    for _ in range(300):
        action = torch.randint(6, (64,), generator=gen)
        action[:32] = torch.where(action[:32] == 4, 0, action[:32])  # half stay up: full seas
        ours, all_slots = (env.step(action) for env in envs)
        for a, b in zip(ours[:4], all_slots[:4], strict=True):
            assert torch.equal(a, b)
        assert torch.equal(ours[4]["final_state"], all_slots[4]["final_state"])
        assert torch.equal(envs[0].sim_state, envs[1].sim_state)
        kinds = envs[0].sim_state[:, 1 + sq.E_START : 1 + sq.E_START + sq.E_CAP]
        most = max(most, int((kinds > 0).sum(1).max()))
    assert most >= 15  # crowded seas: most of the enemy slots in use


def test_seaquest_refuses_the_states_of_another_layout() -> None:
    """A checkpoint's game states saved by another version of the game (another layout: the
    float32 one of 319 columns before 2026-11-30) are refused with a clear error."""
    env = SeaquestEnv(4, seed=0)
    saved = env.state_dict()
    env.load_state_dict(saved)  # its own are taken
    old = {**saved, "sim_state": torch.zeros((4, 319))}
    with pytest.raises(EnvError, match="another version of the game"):
        env.load_state_dict(old)


# --- 2. random-policy returns ---
@pytest.mark.parametrize("game", ["space_invaders", "seaquest"])
def test_random_policy_returns_match_the_package(game: str) -> None:
    episodes = 400
    pkg = minatar.Environment(game, sticky_action_prob=0.1)
    pkg.seed(0)
    minimal = pkg.minimal_action_set()
    rng = np.random.RandomState(0)
    pkg_returns, pkg_lengths = [], []
    for _ in range(episodes):
        pkg.reset()
        total, length, done = 0.0, 0, False
        while not done:
            r, done = pkg.act(minimal[rng.randint(len(minimal))])
            total, length = total + r, length + 1
        pkg_returns.append(total)
        pkg_lengths.append(length)

    # ours: the first episode of each of `episodes` sub-envs
    env = GAMES[game][0](episodes, seed=0)
    env.reset()
    gen = torch.Generator().manual_seed(1)
    returns = torch.zeros(episodes)
    lengths = torch.zeros(episodes)
    running = torch.ones(episodes, dtype=torch.bool)
    while running.any():
        action = torch.randint(env.spec.action_dim, (episodes,), generator=gen)
        _, reward, terminated, truncated, _ = env.step(action)
        returns += reward * running
        lengths += running.float()
        running &= ~(terminated | truncated)

    for ours, theirs in ((returns.numpy(), pkg_returns), (lengths.numpy(), pkg_lengths)):
        p = welch_p_value(ours, np.array(theirs))
        print(f"{game}: ours {ours.mean():.3f} package {np.mean(theirs):.3f} p={p:.3f}")
        assert p > 0.001


def welch_p_value(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of Welch's test of equal means (normal approximation: with hundreds of
    samples a side, Student's t with Welch's degrees of freedom is within 1e-2 of it)."""
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    return math.erfc(abs(a.mean() - b.mean()) / se / math.sqrt(2))


# --- 3. the contract ---
@pytest.mark.parametrize("game", ["space_invaders", "seaquest"])
@pytest.mark.parametrize("num_envs", [1, 3, 17])
def test_contract(game: str, num_envs: int) -> None:
    env_cls = GAMES[game][0]
    env = env_cls(num_envs, seed=5)
    channels = env_cls.channels
    state, _ = env.reset(seed=6)
    assert state.shape == (num_envs, channels, 10, 10) and state.dtype == torch.bool
    assert env.spec.state_dim == channels * 100 and env.spec.obs_shape == (channels, 10, 10)
    initial = env._game_observe(env._game_initial(1))[0]
    assert torch.equal(state, initial.expand_as(state))  # every episode starts the same
    gen = torch.Generator().manual_seed(7)
    ended = 0
    for _ in range(200):
        action = torch.randint(env.spec.action_dim, (num_envs,), generator=gen)
        state, reward, terminated, truncated, info = env.step(action)
        assert state.shape == (num_envs, channels, 10, 10) and state.dtype == torch.bool
        assert info["final_state"].shape == state.shape
        assert reward.shape == (num_envs,) and reward.dtype == torch.float32
        assert terminated.dtype == torch.bool and not truncated.any()
        # auto-reset: a finished sub-env starts over from the initial state
        for i in terminated.nonzero().flatten().tolist():
            assert torch.equal(state[i], initial) and env.elapsed[i] == 0
            ended += 1
    assert ended > 0

    # state_dict round-trip: the same actions give the same steps
    saved = env.state_dict()
    actions = torch.randint(env.spec.action_dim, (30, num_envs), generator=gen)
    first = [env.step(a) for a in actions]
    env.load_state_dict(saved)
    second = [env.step(a) for a in actions]
    for a, b in zip(first, second, strict=True):
        for x, y in zip(a[:4], b[:4], strict=True):
            assert torch.equal(x, y)
        assert torch.equal(a[4]["final_state"], b[4]["final_state"])
