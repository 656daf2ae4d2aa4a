"""Chase-v0: the vectorized step against a per-sub-env reference loop (the tutorial's way),
vectorized termination and auto-reset, truncation, and the heuristic's return."""

import math

import pytest
import torch

from xiaoyarl.envs import make_env
from xiaoyarl.envs.chase import ChaseEnv
from xiaoyarl.errors import EnvError


def reference_step(state: list[float], action: list[float], push: list[float], dim: int):
    """One sub-env's transition written as a plain loop over coordinates."""
    p0, v0, p1, v1 = (list(state[i * dim : (i + 1) * dim]) for i in range(4))
    before = math.dist(p0, p1)
    push_scale = max(math.hypot(*push), 1.0)
    length = math.hypot(*action)
    for k in range(dim):
        v0[k] = 0.5 * v0[k] + push[k] / push_scale
        p0[k] += 0.01 * v0[k]
        v1[k] = 0.75 * v1[k] + action[k] / max(length, 1.0)
        p1[k] += 0.01 * v1[k]
    after = math.dist(p0, p1)
    caught = after < 1.0
    reward = before - after - 0.02 * length + (8.0 if caught else 0.0)
    return p0 + v0 + p1 + v1, reward, caught


@pytest.mark.parametrize("dim", [2, 3])
def test_step_matches_a_loop_over_sub_envs(dim):
    n = 64
    env = ChaseEnv(n, seed=3, dim=dim)
    env.reset(seed=3)
    # bring half the chasers within reach so that some sub-envs are caught this step
    state = env.sim_state.clone()
    state[::2, 2 * dim : 3 * dim] = state[::2, :dim] + 0.2
    env.set_sim_state(state)
    actions = torch.rand((n, dim), generator=torch.Generator().manual_seed(0)) * 2 - 1
    pushes = torch.rand((n, dim), generator=env.generator.clone_state())

    obs, reward, terminated, truncated, info = env.step(actions)

    for i in range(n):
        expected, r, caught = reference_step(state[i].tolist(), actions[i].tolist(),
                                             pushes[i].tolist(), dim)  # fmt: skip
        assert info["final_state"][i].tolist() == pytest.approx(expected, abs=1e-5)
        assert reward[i].item() == pytest.approx(r, abs=1e-5)
        assert terminated[i].item() == caught
    assert terminated[::2].all() and not terminated[1::2].any()
    assert not truncated.any()
    # caught sub-envs restart (chaser ~8 per coordinate away, at rest); the others go on
    assert torch.equal(obs[1::2], info["final_state"][1::2])
    restarted = obs[::2]
    gap = restarted[:, :dim] - restarted[:, 2 * dim : 3 * dim]
    assert (gap.norm(dim=1) > 3).all()
    assert (restarted[:, dim : 2 * dim] == 0).all() and (restarted[:, 3 * dim :] == 0).all()
    assert env.elapsed[::2].eq(0).all() and env.elapsed[1::2].eq(1).all()


def test_truncates_after_1024_steps_without_a_catch():
    env = make_env("Chase-v0", 4, seed=0)
    env.reset(seed=0)
    still = torch.zeros((4, 2))
    for t in range(1, 1025):
        _, _, terminated, truncated, _ = env.step(still)
        assert not terminated.any()
        assert truncated.all() == (t == 1024)
    assert env.elapsed.eq(0).all()


def test_straight_chase_beats_the_target_and_standing_still_does_not():
    def mean_return(policy, n=256):
        env = make_env("Chase-v0", n, seed=1)
        obs, _ = env.reset(seed=1)
        total, finished = torch.zeros(n), torch.zeros(n, dtype=torch.bool)
        returns = torch.zeros(n)
        for _ in range(1024):
            obs, reward, terminated, truncated, _ = env.step(policy(obs))
            total += reward * ~finished
            newly = (terminated | truncated) & ~finished
            returns[newly] = total[newly]
            finished |= newly
        assert finished.all()
        return returns.mean().item()

    assert mean_return(ChaseEnv.heuristic_action) > ChaseEnv.target_return + 3
    assert mean_return(lambda obs: torch.zeros(obs.shape[0], 2)) < -10


def test_bad_dim_is_refused():
    with pytest.raises(EnvError, match="dim must be a positive integer"):
        make_env("Chase-v0", 2, env_kwargs={"dim": 0})
