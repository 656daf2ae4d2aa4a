"""The EnvPool adapter keeps the VecEnv contract (skipped when envpool is not installed)."""

import pytest
import torch

from xiaoyarl.envs import make_env
from xiaoyarl.errors import EnvError

pytest.importorskip("envpool")


def test_auto_reset_starts_the_next_episode_at_once_and_keeps_the_final_state():
    env = make_env("CartPole-v1", 8, backend="envpool", seed=0)
    assert env.spec.state_dim == 4 and env.spec.if_discrete and env.spec.target_return == 475
    env.reset()
    ends = 0
    for _ in range(300):
        next_state, reward, terminated, truncated, info = env.step(torch.ones(8, dtype=torch.long))
        assert (reward == 1).all()  # no reward-0 "reset step" ever reaches the agent
        done = terminated | truncated
        ends += int(done.sum())
        # a continuing sub-env's next state is its final state; a finished one restarts near 0
        assert torch.equal(next_state[~done], info["final_state"][~done])
        assert (next_state[done].abs() <= 0.05).all()
        assert (info["final_state"][terminated].abs().amax(1) > 0.2).all()  # pole fell / cart out
    assert ends >= 8 * 10  # always pushing right ends an episode every ~10 steps
    env.close()


def test_continuous_actions_are_rescaled_and_time_limit_truncates():
    env = make_env("Pendulum-v1", 4, backend="envpool", seed=1)
    assert env.spec.action_low == (-2.0,) and env.spec.max_step == 200
    env.reset()
    for t in range(200):
        _, reward, terminated, truncated, _ = env.step(torch.zeros(4, 1))
        assert not terminated.any()
        assert truncated.all() == (t == 199)
        assert (reward <= 0).all()
    with pytest.raises(EnvError, match="continuous actions must have shape"):
        env.step(torch.zeros(4))
    env.close()


def test_unknown_task_names_what_envpool_has():
    with pytest.raises(EnvError, match="EnvPool has no task 'CartPol-v1'"):
        make_env("CartPol-v1", 2, backend="envpool")
