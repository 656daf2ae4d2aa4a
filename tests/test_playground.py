"""The MuJoCo Playground (MJX, JAX) adapter keeps the VecEnv contract on the CPU, shares its
observation memory with torch, and PPO learns through it (skipped without the extra:
`pip install -e '.[playground]'`). The first step of each env size compiles for tens of seconds,
so the contract tests share one env."""

import pytest
import torch

pytest.importorskip("mujoco_playground")

from xiaoyarl.envs import make_env  # noqa: E402
from xiaoyarl.errors import EnvError  # noqa: E402

TASK = "CartpoleBalance"
LIMIT = 30  # a short episode_length, so that truncation comes quickly
KWARGS = {"impl": "jax", "episode_length": LIMIT}
N = 8


@pytest.fixture(scope="module")
def env():
    return make_env(TASK, N, "cpu", "playground", seed=0, env_kwargs=KWARGS)


def test_spec_shapes_dtypes_and_device(env):
    assert env.spec.num_envs == N and env.spec.state_dim == 5 and env.spec.action_dim == 1
    assert not env.spec.if_discrete and env.spec.max_step == LIMIT
    obs, _ = env.reset(seed=3)
    assert obs.shape == (N, 5) and obs.dtype == torch.float32 and obs.device.type == "cpu"
    state, reward, terminated, truncated, info = env.step(torch.zeros(N, 1))
    assert state.shape == (N, 5) and reward.shape == (N,) and reward.dtype == torch.float32
    assert terminated.dtype == torch.bool and truncated.dtype == torch.bool
    assert terminated.shape == truncated.shape == (N,)
    assert info["final_state"].shape == (N, 5)
    assert torch.isfinite(state).all() and (reward > 0).all()  # balance rewards lie in (0, 1]


def test_observation_is_the_simulator_memory_not_a_host_copy(env):
    obs, _ = env.reset(seed=0)
    assert obs.data_ptr() == env.last_obs_array.unsafe_buffer_pointer()
    obs, *_ = env.step(torch.zeros(N, 1))
    assert obs.data_ptr() == env.last_obs_array.unsafe_buffer_pointer()


def test_truncation_final_observation_and_auto_reset(env):
    obs, _ = env.reset(seed=1)
    starts = [obs.clone()]
    generator = torch.Generator().manual_seed(0)
    for t in range(1, 2 * LIMIT + 1):
        action = torch.rand(N, 1, generator=generator) * 2 - 1
        previous = obs.clone()
        obs, reward, terminated, truncated, info = env.step(action)
        assert not terminated.any()  # balancing never terminates; only the time limit ends it
        if t % LIMIT:
            assert not truncated.any()
            assert torch.equal(info["final_state"], obs)
            continue
        assert truncated.all()  # every sub-env reaches the limit at the same step
        final = info["final_state"]
        assert not torch.equal(final, obs)  # the returned state starts the next episode
        # the last observation follows from the one before (the cart moves a little) ...
        assert (final - previous).abs().max() < 1.0
        # ... and the new episode starts near rest, from a fresh random state per sub-env
        assert obs[:, 4].abs().max() < 0.1  # the pole's angular velocity
        assert not torch.equal(obs, starts[-1]) and obs.unique(dim=0).shape[0] == N
        starts.append(obs.clone())
    assert len(starts) == 3


def test_state_dict_resumes_exactly(env):
    env.reset(seed=2)
    for _ in range(LIMIT - 3):  # the resumed steps cross a truncation and its auto-reset
        env.step(torch.full((N, 1), 0.3))
    state = env.state_dict()
    assert all(isinstance(t, torch.Tensor) for t in state["arrays"])
    actions = [torch.full((N, 1), a) for a in (-1.0, 0.5, 1.0, 0.0, -0.2, 0.7)]
    first = [env.step(a) for a in actions]
    env.load_state_dict(state)
    second = [env.step(a) for a in actions]
    for a, b in zip(first, second, strict=True):
        for x, y in zip(a[:4], b[:4], strict=True):
            assert torch.equal(x, y)
        assert torch.equal(a[4]["final_state"], b[4]["final_state"])


def test_actions_reach_the_simulator_aligned(env, monkeypatch):
    """XLA on a GPU refuses buffers that do not start at a 16-byte boundary; an action that is
    a slice of a larger tensor (here 4 bytes in) is copied first, and steps as its copy."""
    offsets = []
    to_jax = env._jax_array
    monkeypatch.setattr(env, "_jax_array", lambda t: offsets.append(t.data_ptr() % 16) or to_jax(t))
    pool = torch.linspace(-1, 1, N + 1)
    sliced = pool[1:].view(N, 1)
    assert sliced.data_ptr() % 16 == 4
    env.reset(seed=4)
    state = env.state_dict()
    a = env.step(sliced)
    env.load_state_dict(state)
    b = env.step(sliced.clone())
    assert offsets == [0, 0]
    assert all(torch.equal(x, y) for x, y in zip(a[:4], b[:4], strict=True))


def test_clear_errors(env):
    with pytest.raises(EnvError, match=r"must have shape \(8, 1\)"):
        env.step(torch.zeros(N))
    with pytest.raises(EnvError, match="no task 'CartpoleBalanc'"):
        make_env("CartpoleBalanc", 2, "cpu", "playground")
    with pytest.raises(EnvError, match="episode_lenght are not in the task's config"):
        make_env(TASK, 2, "cpu", "playground", env_kwargs={"episode_lenght": 10})
    fresh = make_env(TASK, N, "cpu", "playground", env_kwargs=KWARGS)  # compiled once: shared
    with pytest.raises(EnvError, match=r"call reset\(\) before"):
        fresh.step(torch.zeros(N, 1))


@pytest.mark.learning
@pytest.mark.timeout(1800)
def test_ppo_learns_cartpole_swingup(tmp_path):
    """PPO with its defaults (16 sub-envs on a CPU), 40k env steps: the final evaluation is far
    above a random policy's return (measured here: random ~40, PPO ~200 after 20k steps)."""
    from xiaoyarl import Config, train_agent

    task, kwargs = "CartpoleSwingup", {"impl": "jax"}
    env = make_env(task, 10, "cpu", "playground", seed=5, env_kwargs=kwargs)
    env.reset()
    returns = torch.zeros(10)
    generator = torch.Generator().manual_seed(0)
    for _ in range(env.spec.max_step):  # one whole episode of uniformly random actions
        returns += env.step(torch.rand(10, 1, generator=generator) * 2 - 1)[1]
    config = Config(
        algo="ppo", env_id=task, backend="playground", env_kwargs=kwargs, max_steps=40_000,
        stop_at_target=False, eval_every=20_000, cwd=str(tmp_path / "run"),
    )  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["final_eval_mean"] > returns.mean().item() + 80
