"""Checkpoints: bit-exact resume in a fresh process, kill -9, corruption, stop file, signals."""

import signal
import time

import pytest
import torch

from xiaoyarl import CheckpointError, load_policy
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.train.checkpoint import load_plain, policy_state, save_atomic


def assert_same(a, b, path="state"):
    """Recursively assert two checkpoint trees are identical (tensors bit for bit)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype, path
        assert torch.equal(a, b), f"{path} differs"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


# off-policy runs learn from step 128, so the second half trains from a partly filled buffer
OFF_POLICY = [
    "--num-envs",
    "4",
    "--threads",
    "1",
    "--eval-episodes",
    "2",
    "--set",
    "learning_starts=128",
    "--set",
    "batch_size=32",
    "--set",
    "net_dims=[32]",
]


@pytest.mark.parametrize(
    ("algo", "env_id", "extra"),
    [
        ("ppo", "CartPole-v1", None),  # None: the `tiny` PPO run
        ("sac", "Pendulum-v1", OFF_POLICY),
        ("dqn", "CartPole-v1", [*OFF_POLICY, "--set", "per=true"]),
    ],
)
def test_resume_in_fresh_process_is_bit_exact(tmp_path, algo, env_id, extra, cli, tiny):
    """Train 2N steps straight vs N, save, resume in a new process, N more: identical state
    (networks, optimizers, normalizers, counters, RNG, env and, off-policy, the replay buffer
    with its position and priorities)."""
    common = ["train", algo, env_id, *(tiny if extra is None else extra), "--eval-every", "256",
              "--set", "checkpoint_every=100000"]  # fmt: skip
    straight = cli(*common, "--max-steps", "1024", "--cwd", str(tmp_path / "a"))
    assert straight.returncode == 0, straight.stderr
    first = cli(*common, "--max-steps", "512", "--cwd", str(tmp_path / "b"))
    assert first.returncode == 0, first.stderr
    resumed = cli(*common, "--max-steps", "1024", "--cwd", str(tmp_path / "b"), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from step 512" in resumed.stdout

    a = load_plain(tmp_path / "a" / "checkpoint" / "state.pt")
    b = load_plain(tmp_path / "b" / "checkpoint" / "state.pt")
    assert a["counters"]["total_steps"] == b["counters"]["total_steps"] == 1024
    if algo != "ppo":
        assert a["agent"]["buffer"] is not None and a["agent"]["counters"]["updates"] > 0
    assert_same(a["agent"], b["agent"], "agent")  # networks, optimizers, normalizers, last state
    assert_same(a["env"], b["env"], "env")
    assert_same(a["rng"], b["rng"], "rng")


def test_kill_9_leaves_a_loadable_checkpoint_and_resume_continues(tmp_path, cli, popen, tiny):
    run = tmp_path / "run"
    args = ["train", "ppo", "CartPole-v1", *tiny, "--cwd", str(run), "--eval-every", "2048",
            "--set", "checkpoint_every=256", "--target-return", "1e9"]  # fmt: skip
    ckpt = run / "checkpoint" / "state.pt"
    for delay in (0.0, 0.37):  # kill right after the first checkpoint, and a little later
        proc = popen(*args, "--max-steps", "10000000", *(["--resume"] if ckpt.exists() else []))
        deadline = time.monotonic() + 60
        while not ckpt.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        state = load_plain(ckpt)  # never half-written
        assert state["counters"]["total_steps"] > 0

    step = state["counters"]["total_steps"]
    done = cli(*args, "--max-steps", str(step + 512), "--resume")
    assert done.returncode == 0, done.stderr
    assert f"resumed from step {step}" in done.stdout
    assert load_plain(ckpt)["counters"]["total_steps"] == step + 512


def test_corrupted_or_truncated_checkpoint_gives_clear_error(tmp_path, cli, tiny):
    run = tmp_path / "run"
    args = ["train", "ppo", "CartPole-v1", *tiny, "--cwd", str(run), "--max-steps", "256"]
    assert cli(*args).returncode == 0
    ckpt = run / "checkpoint" / "state.pt"
    data = ckpt.read_bytes()
    for broken in (data[: len(data) // 2], b"not a checkpoint at all"):
        ckpt.write_bytes(broken)
        result = cli(*args, "--resume")
        assert result.returncode == 2
        assert "corrupted" in result.stderr and "Traceback" not in result.stderr
        with pytest.raises(CheckpointError, match="cannot be read"):
            load_plain(ckpt)


def test_existing_run_needs_resume_and_resume_needs_a_checkpoint(tmp_path, cli, tiny):
    run = tmp_path / "run"
    args = ["train", "ppo", "CartPole-v1", *tiny, "--cwd", str(run), "--max-steps", "256"]
    missing = cli(*args, "--resume")
    assert missing.returncode == 2 and "no checkpoint" in missing.stderr
    assert not run.exists()
    assert cli(*args).returncode == 0
    again = cli(*args)
    assert again.returncode == 2 and "--resume" in again.stderr
    changed = cli(*args, "--resume", "--set", "gamma=0.9")
    assert changed.returncode == 2 and "gamma: checkpoint 0.99, now 0.9" in changed.stderr


@pytest.mark.slow
def test_stop_file_and_sigint_end_training_with_a_checkpoint(tmp_path, popen, tiny):
    for how in ("stop_file", "SIGINT", "SIGTERM"):
        run = tmp_path / how
        proc = popen("train", "ppo", "CartPole-v1", *tiny, "--cwd", str(run),
                     "--max-steps", "10000000", "--target-return", "1e9")  # fmt: skip
        deadline = time.monotonic() + 60
        while not (run / "config.yaml").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        if how == "stop_file":
            (run / "stop").touch()
        else:
            proc.send_signal(getattr(signal, how))
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == {"stop_file": 0, "SIGINT": 130, "SIGTERM": 143}[how], err
        assert f"stopped by {how}" in out
        state = load_plain(run / "checkpoint" / "state.pt")
        assert state["counters"]["total_steps"] > 0
        assert not (run / "stop").exists()


SLOW_ENV = """
import pathlib, time
import gymnasium, numpy as np
from gymnasium import spaces

class SlowEnv(gymnasium.Env):
    \"\"\"A long, slow episode: 2 ms a step, 20,000 steps. Past step 1,000 of an episode (only an
    evaluation gets there) it leaves a file saying so.\"\"\"
    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        time.sleep(0.002)
        if self.t == 1000:
            pathlib.Path("{marker}").touch()
        return np.zeros(2, np.float32), 0.0, False, False, {}

gymnasium.register("SlowEval-v0", entry_point=SlowEnv, max_episode_steps=20_000)
"""


@pytest.mark.slow
def test_sigint_during_an_evaluation_is_acknowledged_at_once_and_ends_with_what_is_kept(
    tmp_path, popen
):
    """The evaluation's two games would take 80 s: the signal is acknowledged at once, the
    evaluation given up, and the run ends in seconds with its checkpoint and the "Kept in"
    line; a second Ctrl-C still prints that line (it printed only "interrupted")."""
    marker = tmp_path / "evaluating"
    (tmp_path / "slow_eval_env.py").write_text(SLOW_ENV.replace("{marker}", str(marker)))
    for second in (False, True):
        marker.unlink(missing_ok=True)
        run = tmp_path / f"run{int(second)}"
        proc = popen("train", "ppo", "slow_eval_env:SlowEval-v0", "--seed", "0", "--quiet",
                     "--cwd", str(run), "--max-steps", "1024", "--set", "num_envs=4",
                     "--set", "horizon_len=16", "--set", "eval_every=128", "--set",
                     "eval_episodes=2", "--target-return", "none", "--set", "threads=1",
                     env={"PYTHONPATH": str(tmp_path)})  # fmt: skip
        deadline = time.monotonic() + 90
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), proc.communicate(timeout=30)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.stderr is not None
        line = proc.stderr.readline()
        while line and "received" not in line:
            line = proc.stderr.readline()
        assert "SIGINT received: stopping after this step" in line
        assert time.monotonic() - sent < 2.0  # acknowledged at once
        if second:
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)  # the run ends long before the games would
        if second:
            assert proc.returncode == 130 and "interrupted" in err
            assert f"Kept in {run}" in err, err
        else:
            assert proc.returncode == 130, err
            assert "stopped by SIGINT at step 128" in err  # --quiet: on stderr
            assert f"Kept in {run}:" in err and "checkpoint/ (step 128)" in err
            assert f"continue with --resume {run}" in err
            state = load_plain(run / "checkpoint" / "state.pt")
            assert state["counters"]["total_steps"] == 128
            assert (
                not (run / "recorder.csv").exists()
                or "128" not in (run / "recorder.csv").read_text()
            )  # the evaluation given up is not recorded


def test_save_atomic_keeps_old_file_when_write_fails(tmp_path):
    path = tmp_path / "x.pt"
    save_atomic({"v": torch.tensor([1.0])}, path)
    with pytest.raises(Exception):  # noqa: B017 - an unpicklable object fails mid-write
        save_atomic({"v": lambda: 0}, path)
    assert torch.equal(load_plain(path)["v"], torch.tensor([1.0]))


def test_load_policy_acts_on_numpy_and_torch_batches(tmp_path, cli, tiny):
    import numpy as np

    for env_id, discrete in (("CartPole-v1", True), ("Pendulum-v1", False)):
        run = tmp_path / env_id
        result = cli("train", "ppo", env_id, *tiny, "--cwd", str(run), "--max-steps", "512",
                     "--eval-every", "256")  # fmt: skip
        assert result.returncode == 0, result.stderr
        policy = load_policy(run)
        dim = 4 if discrete else 3
        batch = policy(np.zeros((5, dim), dtype=np.float32))
        single = policy(torch.zeros(dim))
        assert isinstance(batch, np.ndarray) and isinstance(single, torch.Tensor)
        if discrete:
            assert batch.shape == (5,) and batch.dtype == np.int64
        else:  # rescaled to Pendulum's torque bounds [-2, 2]
            assert batch.shape == (5, 1) and np.all(np.abs(batch) <= 2.0)
        with pytest.raises(ValueError, match="observations of shape"):
            policy(np.zeros((5, dim + 1)))
        evaluated = cli("eval", str(run), "--episodes", "3")
        assert evaluated.returncode == 0 and "eval over 3 episodes" in evaluated.stdout


def _train_in_process(cwd, algo, env_id, max_steps, resume=False, **fields):
    from xiaoyarl import Config, train_agent

    fields = {"eval_every": 256, "eval_episodes": 2, **fields}
    config = Config(algo=algo, env_id=env_id, cwd=str(cwd), max_steps=max_steps, threads=1,
                    checkpoint_every=10**6, **fields)  # fmt: skip
    return train_agent(config, resume=resume, log=None)


TINY_OFF = {"num_envs": 4, "learning_starts": 128, "batch_size": 32, "net_dims": [32]}
FAST_TD3_OPTIONS = {"explore_noise_std": 0.001, "explore_noise_std_max": 0.4, "critic_atoms": 11,
                    "critic_v_min": -1700, "critic_v_max": 0}  # fmt: skip
DREAMER_SMALL = {**TINY_OFF, "num_envs": 2, "batch_size": 32, "net_dims": [16],
                 "world_model": {"deter_dim": 16, "stoch": 4, "classes": 4, "batch_length": 8,
                                 "imagine_horizon": 3}}  # fmt: skip
# (learning starts at 128, so the resumed half trains from a partly filled buffer)


@pytest.mark.parametrize(
    ("algo", "env_id", "fields"),
    [
        ("ddpg", "Pendulum-v1", TINY_OFF),
        ("td3", "Pendulum-v1", TINY_OFF),
        ("modsac", "Pendulum-v1", TINY_OFF),
        ("redq", "Pendulum-v1", {**TINY_OFF, "num_critics": 4}),
        ("td3", "Pendulum-v1", {**TINY_OFF, "state_norm": True}),
        # each sub-env's noise std, and C51 critics
        ("fast_td3", "Pendulum-v1", {**TINY_OFF, "num_envs": 8, **FAST_TD3_OPTIONS}),
        ("sac", "Pendulum-v1", {**TINY_OFF, "crossq": True}),  # batch renorm statistics
        ("sac_discrete", "CartPole-v1", TINY_OFF),
        ("double_dqn", "CartPole-v1", TINY_OFF),
        ("d3qn", "CartPole-v1", {**TINY_OFF, "per": True}),
        ("a2c", "CartPole-v1", {"num_envs": 16, "horizon_len": 8}),
        # (an epsilon decay of its own: the automatic one follows each run's budget)
        (
            "pqn",
            "CartPole-v1",
            {"num_envs": 16, "horizon_len": 8, "state_norm": True, "explore_decay_steps": 300},
        ),
        ("a2c", "Pendulum-v1", {"num_envs": 16, "horizon_len": 8}),
        # the hidden states and episode starts of recurrent policies
        ("ppo", "CartPoleNoVelocity-v1", {"num_envs": 4, "horizon_len": 32, "recurrent": "lstm"}),
        ("a2c", "Pendulum-v1", {"num_envs": 16, "horizon_len": 8, "recurrent": "gru"}),
        # and the replay agents' stored hidden states (n-step windows)
        ("sac", "PendulumNoVelocity-v1", {**TINY_OFF, "recurrent": "gru", "n_step": 2}),
        ("d3qn", "CartPoleNoVelocity-v1", {**TINY_OFF, "recurrent": "lstm"}),
        # schedules: the values of the resumed half follow from the saved step count
        (
            "ppo",
            "Pendulum-v1",
            {
                "num_envs": 16,
                "horizon_len": 8,
                "schedule_steps": 512,
                "learning_rate_schedule": "linear",
                "ratio_clip_schedule": "cosine",
                "lambda_entropy_schedule": "linear",
                "lambda_entropy": 0.01,
            },
        ),  # fmt: skip
        (
            "sac",
            "Pendulum-v1",
            {
                **TINY_OFF,
                "learning_rate_schedule": "cosine",
                "schedule_steps": 512,
                "schedule_end": 0.1,
            },
        ),  # fmt: skip
        # TD-MPC2: the world model, its running scale and each sub-env's last plan
        (
            "tdmpc2",
            "Pendulum-v1",
            {
                **TINY_OFF,
                "num_envs": 2,
                "batch_size": 12,
                "world_model": {
                    "latent_dim": 16,
                    "enc_dim": 16,
                    "num_samples": 16,
                    "num_elites": 4,
                    "num_pi_trajs": 2,
                    "iterations": 2,
                },
            },
        ),  # fmt: skip
        # DreamerV3: the world model, actor, critic and its slow copy, the return scale and
        # each sub-env's recurrent state; discrete actions and continuous ones
        *[("dreamerv3", env_id, DREAMER_SMALL) for env_id in ("CartPole-v1", "Pendulum-v1")],
        # the H-term's trajectory buffer (an episode ends before the checkpoint, one after)
        ("sac", "Pendulum-v1", {**TINY_OFF, "num_envs": 1, "h_term": True, "h_term_start": 200}),
        (
            "ppo",
            "CartPole-v1",
            {"num_envs": 4, "horizon_len": 32, "h_term": True, "h_term_start": 64},
        ),  # fmt: skip
    ],
)
def test_resume_is_bit_exact_for_every_algorithm(tmp_path, algo, env_id, fields):
    """As above, for the other algorithms (in this process: the fresh-process path is the one
    tested above; this checks that each agent's whole state is in its checkpoint)."""
    _train_in_process(tmp_path / "a", algo, env_id, 512, **fields)
    _train_in_process(tmp_path / "b", algo, env_id, 256, **fields)
    _train_in_process(tmp_path / "b", algo, env_id, 512, resume=True, **fields)
    a = load_plain(tmp_path / "a" / "checkpoint" / "state.pt")
    b = load_plain(tmp_path / "b" / "checkpoint" / "state.pt")
    assert a["counters"]["total_steps"] == b["counters"]["total_steps"] == 512
    if algo not in ("a2c", "ppo", "pqn"):  # no counter of gradient steps
        assert a["agent"]["counters"]["updates"] > 0
    assert_same(a["agent"], b["agent"], "agent")
    assert_same(a["env"], b["env"], "env")
    assert_same(a["rng"], b["rng"], "rng")


def test_resume_on_the_gymnasium_backend_restores_the_agent_and_starts_new_episodes(tmp_path):
    """gymnasium envs cannot save their simulator state: a resumed run continues with the
    agent's exact state (networks, optimizers, normalizers, counters, RNG) and new episodes."""
    from xiaoyarl.envs import make_env

    fields = {"backend": "gymnasium", "num_envs": 4, "horizon_len": 32}
    _train_in_process(tmp_path / "r", "ppo", "CartPole-v1", 512, **fields)
    saved = load_plain(tmp_path / "r" / "checkpoint" / "state.pt")
    assert saved["env"] == {}  # nothing to restore: the promise is about the agent
    summary = _train_in_process(tmp_path / "r", "ppo", "CartPole-v1", 512, resume=True, **fields)
    assert summary["total_steps"] == 512 and summary["updates"] == 4
    again = load_plain(tmp_path / "r" / "checkpoint" / "state.pt")
    assert_same(
        {k: v for k, v in saved["agent"].items() if k != "last_state"},
        {k: v for k, v in again["agent"].items() if k != "last_state"},
        "agent",
    )
    assert_same(saved["rng"], again["rng"], "rng")
    with make_env("CartPole-v1", 4, backend="gymnasium") as env:  # new episodes, run's seed
        fresh, _ = env.reset(seed=0 + 512)
    assert torch.equal(again["agent"]["last_state"], fresh)


def test_a_resumed_run_keeps_its_automatic_epsilon_decay(tmp_path):
    """PQN's epsilon decays over a tenth of the budget where left automatic: resumed with a
    larger budget, the run keeps the decay it started with (and resumes at all)."""
    fields = {"num_envs": 16, "horizon_len": 8}
    _train_in_process(tmp_path / "r", "pqn", "CartPole-v1", 256, **fields)
    _train_in_process(tmp_path / "r", "pqn", "CartPole-v1", 512, resume=True, **fields)
    saved = load_plain(tmp_path / "r" / "checkpoint" / "state.pt")
    assert saved["counters"]["total_steps"] == 512
    assert saved["config"]["explore_decay_steps"] == 25  # a tenth of the first budget


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_an_atari_run_resumes_bit_exactly(tmp_path):
    """Atari games save their whole state (emulator with its random generators, the sticky
    actions' and no-op starts' included, lives, pooled frames, frame stacks): a DQN run on
    Breakout resumed mid-game trains on exactly as the run that never stopped."""
    pytest.importorskip("ale_py")
    fields = {"backend": "gymnasium", "num_envs": 4, "learning_starts": 256, "batch_size": 32,
              "buffer_size": 2_000, "replay_ratio": 0.25, "eval_every": 10**6,
              "eval_episodes": 1, "confirm_episodes": 0}  # fmt: skip
    _train_in_process(tmp_path / "a", "dqn", "ALE/Breakout-v5", 1024, **fields)
    _train_in_process(tmp_path / "b", "dqn", "ALE/Breakout-v5", 512, **fields)
    half = load_plain(tmp_path / "b" / "checkpoint" / "state.pt")
    assert len(half["env"]["atari"]) == 4  # the games' states, mid-game
    _train_in_process(tmp_path / "b", "dqn", "ALE/Breakout-v5", 1024, resume=True, **fields)
    a = load_plain(tmp_path / "a" / "checkpoint" / "state.pt")
    b = load_plain(tmp_path / "b" / "checkpoint" / "state.pt")
    assert a["counters"]["total_steps"] == b["counters"]["total_steps"] == 1024
    assert a["agent"]["counters"]["updates"] > 0
    assert_same(a["agent"], b["agent"], "agent")  # networks, optimizer, replay, last frames
    assert_same(a["env"], b["env"], "env")
    assert_same(a["episodes"], b["episodes"], "episodes")
    assert_same(a["rng"], b["rng"], "rng")


ASYMMETRIC = """
import gymnasium as gym
import numpy as np


class Asymmetric(gym.Env):
    observation_space = gym.spaces.Box(-50.0, 50.0, (3,), np.float32)
    action_space = gym.spaces.Box(np.array([-3.0, 0.5], np.float32),
                                  np.array([1.0, 2.5], np.float32))

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


gym.register("Asymmetric-v0", entry_point=Asymmetric, max_episode_steps=10)
"""


@pytest.mark.parametrize("algo", ["ppo", "td3", "sac"])
def test_load_policy_acts_exactly_as_the_agent_and_the_env_adapter(tmp_path, monkeypatch, algo):
    """The saved policy maps observations to the very actions the env received in training:
    the agent's deterministic action in [-1, 1], rescaled to the env's (asymmetric) bounds."""
    import sys

    import gymnasium
    import numpy as np

    from xiaoyarl import Config, make_env
    from xiaoyarl.agents import agent_class

    (tmp_path / "asym_mod.py").write_text(ASYMMETRIC)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("asym_mod", None)
    gymnasium.registry.pop("Asymmetric-v0", None)
    env = make_env("asym_mod:Asymmetric-v0", 64, backend="gymnasium", seed=0)
    config = Config(algo=algo, env_id="asym_mod:Asymmetric-v0", net_dims=[16], state_norm=True)
    config = resolve_config(config, batched=False)
    agent = agent_class(algo, env.spec)(env.spec, config, torch.device("cpu"))
    torch.manual_seed(1)
    states = torch.randn(64, 3) * 20
    agent.state_norm.update(states)  # a normaliser that is not the identity
    with torch.no_grad():
        for p in agent.actor.parameters():
            p.add_(torch.randn_like(p))  # actions spread over the whole range
    save_atomic(policy_state(agent), tmp_path / "actor.pt")
    policy = load_policy(tmp_path)
    sent = env._to_env_actions(agent.act(states))  # what GymVecEnv hands to the env
    got = policy(states.numpy())
    np.testing.assert_allclose(got, sent, rtol=1e-6, atol=1e-6)
    low, high = np.array([-3.0, 0.5]), np.array([1.0, 2.5])
    assert (got >= low - 1e-6).all() and (got <= high + 1e-6).all()
    assert got[:, 0].min() < -2.5 and got[:, 0].max() > 0.5  # the full range is used
    env.close()
