"""The parallel runner: it trains, is reproducible when synchronous, and fails fast and cleanly.

Every test tags the processes it starts with a unique environment variable and checks at the
end that none of them is left running.
"""

import json
import os
import signal
import textwrap
import time
import uuid
from pathlib import Path

import pytest
import torch

from xiaoyarl.train.checkpoint import load_plain

FAULTY_ENVS = textwrap.dedent(
    """
    import time

    import gymnasium as gym
    import numpy as np


    class Faulty(gym.Env):
        '''CartPole-like stand-in that raises or hangs at its `at`-th step.'''

        observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, mode="ok", at=10**9):
            self.mode, self.at, self.t = mode, at, 0

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            return np.zeros(4, np.float32), {}

        def step(self, action):
            self.t += 1
            if self.t >= self.at and self.mode == "crash":
                raise RuntimeError(f"simulator exploded at step {self.t}")
            if self.t >= self.at and self.mode == "hang":
                time.sleep(3600)
            return np.zeros(4, np.float32), 1.0, False, False, {}


    gym.register("Crash-v0", entry_point=Faulty, kwargs={"mode": "crash", "at": 40},
                 max_episode_steps=20)
    gym.register("Hang-v0", entry_point=Faulty, kwargs={"mode": "hang", "at": 40},
                 max_episode_steps=20)
    gym.register("Slow-v0", entry_point=Faulty, max_episode_steps=20)
    """
)

TESTS = Path(__file__).resolve().parent  # the tests' small envs (`module:Id`)
TINY_PPO = ["--num-envs", "4", "--set", "horizon_len=16", "--threads", "1",
            "--eval-episodes", "2", "--runner", "parallel", "--num-workers", "2"]  # fmt: skip


@pytest.fixture
def tagged(tmp_path):
    """Env for the CLI: the faulty-env module importable, and a tag inherited by every child."""
    (tmp_path / "faulty_envs.py").write_text(FAULTY_ENVS)
    tag = uuid.uuid4().hex
    env = {"PYTHONPATH": str(tmp_path), "XIAOYARL_TEST_TAG": tag}
    yield env
    deadline = time.monotonic() + 10  # children get a moment to notice the learner is gone
    while tagged_pids(tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = tagged_pids(tag)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left running: {left}"


def tagged_pids(tag: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if f"XIAOYARL_TEST_TAG={tag}".encode() in (proc / "environ").read_bytes():
                if (proc / "stat").read_text().split(") ", 1)[1][0] != "Z":
                    pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def children_named(tag: str, prefix: str) -> list[int]:
    return [pid for pid in tagged_pids(tag)
            if Path(f"/proc/{pid}/comm").read_text().startswith(prefix)]  # fmt: skip


@pytest.mark.distributed
def test_parallel_ppo_trains_and_is_reproducible(tmp_path, tagged, cli):
    runs = []
    for name in ("a", "b"):
        done = cli("train", "ppo", "CartPole-v1", *TINY_PPO, "--max-steps", "1024",
                   "--eval-every", "512", "--cwd", str(tmp_path / name),
                   "--summary-json", str(tmp_path / f"{name}.json"), env=tagged)  # fmt: skip
        assert done.returncode == 0, done.stderr
        runs.append(load_plain(tmp_path / name / "checkpoint" / "state.pt"))
    summary = json.loads((tmp_path / "a.json").read_text())
    assert summary["total_steps"] == 1024  # 2 workers x 4 envs x 16 steps per learner step
    assert (tmp_path / "a" / "recorder.csv").read_text().count("\n") >= 2
    for name, value in runs[0]["agent"]["nets"]["actor"].items():
        assert torch.equal(value, runs[1]["agent"]["nets"]["actor"][name]), name


@pytest.mark.distributed
def test_parallel_off_policy_trains_on_the_workers_transitions(tmp_path, tagged, cli):
    """Every transition in the learner's replay buffer is one the workers' envs produced: on
    Pendulum the reward is a known function of the state and action, so a stored reward that
    does not belong to its stored state and action (or zeros) would show."""
    from xiaoyarl.core.buffer import ReplayBuffer

    done = cli("train", "ddpg", "Pendulum-v1", "--runner", "parallel", "--num-workers", "2",
               "--num-envs", "2", "--threads", "1", "--max-steps", "800", "--eval-every", "400",
               "--eval-episodes", "2", "--set", "learning_starts=200", "--set", "net_dims=[32]",
               "--set", "batch_size=32", "--cwd", str(tmp_path / "run"), env=tagged)  # fmt: skip
    assert done.returncode == 0, done.stderr
    state = load_plain(tmp_path / "run" / "checkpoint" / "state.pt")
    assert state["agent"]["counters"]["updates"] > 0
    assert state["counters"]["total_steps"] == 800
    saved = state["agent"]["buffer"]
    buffer = ReplayBuffer(saved["capacity"], saved["num_envs"], 3, 1, False, 200)
    buffer.load_state_dict(saved)
    assert saved["num_envs"] == 4 and len(buffer) == 800  # 2 workers x 2 envs, every step
    batch = buffer.sample(4096)
    cos, sin, thdot = batch.states.unbind(-1)
    torque = 2.0 * batch.actions[:, 0]
    cost = torch.atan2(sin, cos).square() + 0.1 * thdot.square() + 0.001 * torque.square()
    torch.testing.assert_close(batch.rewards, -cost, rtol=1e-4, atol=1e-4)
    assert batch.states.abs().sum(-1).min() > 0.5  # real states (cos^2 + sin^2 = 1), not zeros


@pytest.mark.distributed
@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_workers_honour_action_masks_from_the_first_step(tmp_path, tagged, cli, algo):
    """A worker reads the masks of its env's first reset as the learner does (`observe`): the
    env raises on a masked action, so the run finishing is the check."""
    env = {**tagged, "PYTHONPATH": os.pathsep.join([tagged["PYTHONPATH"], str(TESTS)])}
    done = cli("train", algo, "action_envs:PickAllowed-v0", "--runner", "parallel",
               "--num-workers", "2", "--num-envs", "2", "--threads", "1", "--max-steps", "1024",
               "--eval-every", "512", "--eval-episodes", "2", "--target-return", "none",
               "--cwd", str(tmp_path / "run"), env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


def test_workers_get_every_network_exploring_runs():
    """A recurrent replay agent explores stepping its critics' memories too (their hidden
    states are stored for the replayed windows), so its workers are sent the critics' weights;
    a feed-forward agent's only the actor's."""
    from xiaoyarl.agents.registry import make_agent
    from xiaoyarl.agents.settings import resolve_config
    from xiaoyarl.config import Config
    from xiaoyarl.envs import make_env
    from xiaoyarl.scale.parallel import acting_weights

    with make_env("Pendulum-v1", 2) as env:
        for recurrent, nets in ((None, {"actor"}), ("gru", {"actor", "critic"})):
            config = resolve_config(Config(algo="sac", env_id="Pendulum-v1",
                                           recurrent=recurrent), batched=True)  # fmt: skip
            agent = make_agent("sac", env.spec, config, torch.device("cpu"))
            weights = acting_weights(agent)
            assert {key.split("/")[0] for key in weights} == nets
            for name in nets:
                for key, value in agent.nets[name].state_dict().items():
                    assert torch.equal(weights[f"{name}/{key}"], value)


def run_until_error(cli, tagged, tmp_path, env_id, *extra):
    started = time.monotonic()
    done = cli("train", "ppo", f"faulty_envs:{env_id}", *TINY_PPO, "--backend", "gymnasium",
               "--cwd", str(tmp_path / "run"), "--max-steps", "100000", *extra,
               env=tagged, timeout=60)  # fmt: skip
    return done, time.monotonic() - started


@pytest.mark.distributed
def test_worker_exception_reaches_the_user_naming_worker_and_message(tmp_path, tagged, cli):
    done, seconds = run_until_error(cli, tagged, tmp_path, "Crash-v0")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "worker 0" in done.stderr or "worker 1" in done.stderr
    assert "simulator exploded at step 40" in done.stderr
    assert seconds < 30  # including start-up of three processes
    run = tmp_path / "run"  # kept, with a checkpoint of the learner's state before the crash
    assert f"Kept in {run}: config.yaml" in done.stderr and "checkpoint/ (step" in done.stderr
    step = load_plain(run / "checkpoint" / "state.pt")["counters"]["total_steps"]
    assert step > 0 and f"continue with --resume {run}" in done.stderr


@pytest.mark.distributed
def test_crashed_worker_is_restarted_up_to_the_limit_then_fails(tmp_path, tagged, cli):
    done, _ = run_until_error(cli, tagged, tmp_path, "Crash-v0", "--restart-workers", "1")
    assert done.returncode == 2
    assert "restarting it (1 of 1 restarts allowed)" in done.stdout
    assert "after 1 restart(s)" in done.stderr and "simulator exploded" in done.stderr


@pytest.mark.distributed
def test_hung_env_step_trips_the_worker_timeout(tmp_path, tagged, cli):
    done, seconds = run_until_error(cli, tagged, tmp_path, "Hang-v0", "--set", "worker_timeout=3")
    assert done.returncode == 2
    assert "delivered no rollout for 3 s" in done.stderr
    assert seconds < 30


@pytest.mark.distributed
def test_killed_worker_is_detected_and_the_checkpoint_stays_loadable(tmp_path, tagged, popen):
    run = tmp_path / "run"
    proc = popen("train", "ppo", "faulty_envs:Slow-v0", *TINY_PPO, "--backend", "gymnasium",
                 "--cwd", str(run), "--max-steps", "10000000", "--eval-every", "100000000",
                 "--set", "checkpoint_every=128", env=tagged)  # fmt: skip
    ckpt = run / "checkpoint" / "state.pt"
    deadline = time.monotonic() + 60
    while not ckpt.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    workers = children_named(tagged["XIAOYARL_TEST_TAG"], "xyrl-worker")
    assert workers, "no worker process found"
    os.kill(workers[0], signal.SIGKILL)
    killed = time.monotonic()
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - killed < 10
    assert proc.returncode == 2
    assert "died with exit code -9" in err
    assert load_plain(ckpt)["counters"]["total_steps"] > 0


@pytest.mark.distributed
@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "stop_file"])
def test_signals_and_stop_file_shut_everything_down_with_a_checkpoint(tmp_path, tagged, how, popen):
    run = tmp_path / "run"
    proc = popen("train", "ppo", "CartPole-v1", *TINY_PPO, "--cwd", str(run),
                 "--max-steps", "100000000", "--target-return", "1e9",
                 "--eval-every", "2048", env=tagged)  # fmt: skip
    deadline = time.monotonic() + 60
    while not (run / "recorder.csv").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    if how == "stop_file":
        (run / "stop").touch()
    else:
        proc.send_signal(getattr(signal, how))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == {"SIGTERM": 143, "SIGINT": 130, "stop_file": 0}[how], err
    assert f"stopped by {how}" in out
    assert load_plain(run / "checkpoint" / "state.pt")["counters"]["total_steps"] > 0
