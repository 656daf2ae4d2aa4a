"""The command line: every bad input gets one clear paragraph, exit 2, and no checkpoint."""

import json
import textwrap

import pytest
from helpers import TINY, cli

BAD_ENV_MODULE = textwrap.dedent(
    """
    import gymnasium as gym
    import numpy as np


    class Bad(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, mode="nan"):
            self.mode, self.t = mode, 0

        def _obs(self):
            if self.mode == "nan" and self.t >= 5:
                return np.full(3, np.nan, np.float32)
            if self.mode == "shape":
                return np.zeros(4, np.float32)
            return np.zeros(3, np.float32)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            return self._obs(), {}

        def step(self, action):
            self.t += 1
            return self._obs(), 1.0, False, False, {}


    gym.register("NanObs-v0", entry_point=Bad, kwargs={"mode": "nan"}, max_episode_steps=50)
    gym.register("WrongShape-v0", entry_point=Bad, kwargs={"mode": "shape"}, max_episode_steps=50)
    """
)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["train", "ppq", "CartPole-v1"], ["unknown algorithm 'ppq'", "did you mean 'ppo'", "a2c"]),
        (["train", "ppo", "CartPol-v1"], ["unknown environment", "CartPole-v1"]),
        (["train", "ppo", "nomodule_xyz:Env-v0"], ["nomodule_xyz"]),
        (["train", "ppo", "CartPole-v1", "--set", "gamma"], ["name=value"]),
        (["train", "ppo", "CartPole-v1", "--set", "gamm=0.9"], ["unknown config field", "gamma"]),
        (["train", "ppo", "CartPole-v1", "--set", "gamma=2"], ["gamma=2.0", "(0, 1]"]),
        (["train", "ppo", "CartPole-v1", "--set", "learning_rate=-1"], ["learning_rate", "(0, 1)"]),
        (["train", "ppo", "CartPole-v1", *TINY, "--set", "batch_size=100000"], ["batch_size"]),
        (["train", "ppo", "CartPole-v1", "--backend", "torch", "--num-envs", "0"], ["num_envs"]),
        (["train", "ppo", "LunarLanderX-v3", "--backend", "torch"], ["no torch-native env"]),
        (["train", "ppo", "CartPole-v1", "--device", "cuda:7"], ["cuda"]),
        (["train", "ppo", "CartPole-v1", "--config", "missing.yaml"], ["cannot read config"]),
        (["train", "ppo", "bad_env_mod:NanObs-v0", *TINY], ["NaN", "NanObs-v0"]),
        (["train", "ppo", "bad_env_mod:WrongShape-v0", *TINY], ["shape", "WrongShape-v0"]),
        (["eval", "no/such/run"], ["does not exist"]),
        (["train", "dqn", "Pendulum-v1"], ["'dqn' cannot act in Pendulum-v1", "sac", "td3"]),
        (["train", "sac", "CartPole-v1"], ["'sac' cannot act", "sac_discrete", "d3qn"]),
        (
            ["train", "sac", "Pendulum-v1", "--set", "buffer_size=1000000000000"],
            ["buffer_size=1,000,000,000,000", "GiB"],
        ),
    ],
)
def test_bad_input_gets_one_clear_error_and_nothing_to_resume(tmp_path, args, words):
    (tmp_path / "bad_env_mod.py").write_text(BAD_ENV_MODULE)
    result = cli(*args, "--cwd", "run", cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)}) \
        if args[0] == "train" else cli(*args, cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "xiaoyarl: error: " in result.stderr  # (gymnasium's own checker may warn before it)
    for word in words:
        assert word in result.stderr
    # nothing half-written for a later --resume (an env that fails in training keeps its folder)
    assert not (tmp_path / "run" / "checkpoint").exists()


def test_train_writes_run_folder_and_summary_json(tmp_path):
    summary_path = tmp_path / "summary.json"
    result = cli("train", "ppo", "CartPole-v1", *TINY, "--max-steps", "1024", "--eval-every",
                 "512", "--cwd", str(tmp_path / "run"),
                 "--summary-json", str(summary_path))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "sps | eval" in result.stdout  # progress lines
    summary = json.loads(summary_path.read_text())
    for key in ("algo", "env", "backend", "seed", "solved", "steps_to_target",
                "seconds_to_target", "total_steps", "train_seconds", "final_eval_mean",
                "final_eval_std", "steps_per_second"):  # fmt: skip
        assert key in summary
    assert summary["algo"] == "ppo" and summary["backend"] == "torch"
    assert summary["total_steps"] == 1024 and summary["steps_per_second"] > 0
    run = tmp_path / "run"
    for name in ("config.yaml", "actor.pt", "recorder.csv", "learning_curve.png"):
        assert (run / name).is_file(), name
    assert (run / "checkpoint" / "state.pt").is_file()
    rows = (run / "recorder.csv").read_text().splitlines()
    assert rows[0].startswith("step,time,eval_mean,eval_std") and len(rows) == 3

    (run / "learning_curve.png").unlink()
    plotted = cli("plot", str(run))
    assert plotted.returncode == 0 and (run / "learning_curve.png").is_file()


def test_quiet_and_target_return_from_the_command_line(tmp_path):
    result = cli("train", "a2c", "CartPole-v1", *TINY, "--max-steps", "2048", "--eval-every",
                 "256", "--target-return", "5", "--quiet", "--cwd", str(tmp_path / "r"),
                 "--summary-json", str(tmp_path / "s.json"))  # fmt: skip
    assert result.returncode == 0 and result.stdout == ""
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["solved"] and summary["steps_to_target"] == 256  # any policy scores >= 5
    assert summary["seconds_to_target"] > 0 and summary["stop_reason"] == "target"


def test_list_shows_algorithms_envs_and_fields():
    result = cli("list", "--fields")
    assert result.returncode == 0
    words = ("ppo", "a2c", "qmix", "mappo", "CartPole-v1", "Pendulum-v1", "Acrobot-v1",
             "SpreadDiscrete-v0", "TwoStepGame-v0", "gamma", "horizon_len")  # fmt: skip
    for word in words:
        assert word in result.stdout


def test_config_file_and_gymnasium_backend(tmp_path):
    (tmp_path / "c.yaml").write_text("num_envs: 2\nhorizon_len: 32\nnet_dims: [16]\n")
    result = cli("train", "ppo", "CartPole-v1", "--backend", "gymnasium", "--config",
                 str(tmp_path / "c.yaml"), "--max-steps", "128", "--eval-episodes", "2",
                 "--cwd", str(tmp_path / "run"), "--threads", "1")  # fmt: skip
    assert result.returncode == 0, result.stderr
    saved = (tmp_path / "run" / "config.yaml").read_text()
    assert "backend: gymnasium" in saved and "num_envs: 2" in saved and "- 16" in saved


def test_playground_backend_without_the_extra_or_task_gets_a_clear_error(tmp_path):
    """`--backend playground`: without the extra the error names what to install; with it, an
    unknown task is named. Either way nothing is written."""
    import importlib.util

    result = cli("train", "ppo", "NoSuchTask", "--backend", "playground", "--cwd", "run",
                 cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    if importlib.util.find_spec("mujoco_playground") is None:
        assert "pip install -e .[playground]" in result.stderr
    else:
        assert "no task 'NoSuchTask'" in result.stderr
    assert not (tmp_path / "run").exists()
