"""Tiny trained runs shared by the export and record tests, each trained once per session.

Trained in this process through `train_agent` (the same path as `xiaoyarl train`), which
saves a process start per run: the runs only need a saved best policy, not a good one.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from xiaoyarl import train_agent
from xiaoyarl.config_io import config_from_dict

_COMMON = {"threads": 1, "eval_episodes": 2, "seed": 0}

# name -> Config fields; the same tiny settings as TINY / OFF_POLICY in the CLI tests
RUNS = {
    "ppo-CartPole": {"algo": "ppo", "env_id": "CartPole-v1", "num_envs": 16, "horizon_len": 16,
                     "max_steps": 512, "eval_every": 256},
    "ppo-Pendulum": {"algo": "ppo", "env_id": "Pendulum-v1", "num_envs": 16, "horizon_len": 16,
                     "max_steps": 512, "eval_every": 256},
    "td3-Pendulum": {"algo": "td3", "env_id": "Pendulum-v1", "num_envs": 4, "max_steps": 256,
                     "eval_every": 256, "learning_starts": 128, "batch_size": 32,
                     "net_dims": [32]},
}  # fmt: skip


@functools.cache
def tiny_run(name: str, root: Path) -> Path:
    """The run folder of `RUNS[name]` under `root`, trained on first use."""
    run_dir = root / name
    config = config_from_dict({**_COMMON, **RUNS[name], "cwd": str(run_dir)})
    threads = torch.get_num_threads()
    train_agent(config, log=None)
    torch.set_num_threads(threads)
    assert (run_dir / "actor.pt").is_file()
    return run_dir
