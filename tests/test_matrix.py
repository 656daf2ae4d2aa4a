"""The support matrix (`xiaoyarl/agents/matrix.py`, the docs' matrix page): every cell it says
works trains a few hundred env steps through `train_agent` on a small env of its kind
(`matrix_envs.Probe-v0`) and its saved policy acts; every cell it refuses is refused by a run
too, before the run has a folder. So no cell changes state unnoticed."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

from xiaoyarl import Config, ConfigError, load_policy
from xiaoyarl.agents.matrix import Cell, cells, refusal
from xiaoyarl.agents.settings import agent_of_name
from xiaoyarl.envs import make_env
from xiaoyarl.run import train_agent

CELLS = list(cells())
IDS = [f"{algo}-{column}" for algo, _, column, _ in CELLS]


def run_config(algo: str, cell: Cell, cwd: str) -> Config:
    """A few hundred env steps of `algo` on the Probe env of `cell`, with small networks."""
    small = {"net_dims": [16], "num_envs": 2, "max_steps": 240, "eval_every": 240,
             "eval_episodes": 2, "threads": 1, "cwd": cwd, "target_return": None}  # fmt: skip
    if cell.memory:
        small.update(recurrent=cell.memory, recurrent_dim=8)
    if agent_of_name(algo).if_off_policy:
        small.update(batch_size=16, learning_starts=32, buffer_size=1_000, replay_ratio=0.25)
    else:
        small.update(horizon_len=16, batch_size=16)
    kind = {"observation": cell.observation, "action": cell.action, "masked": cell.masked}
    return Config(algo=algo, env_id="matrix_envs:Probe-v0", env_kwargs=kind, **small)


def test_the_probe_envs_are_what_the_matrix_describes():
    """The matrix reads the agents on env specs of each kind; the Probe envs give those specs."""
    fields = ("state_dim", "obs_shape", "obs_dtype", "obs_keys", "action_dim", "if_discrete",
              "action_nvec", "action_mask", "action_parts", "action_low",
              "action_high")  # fmt: skip
    for _, _, _, cell in CELLS:
        kind = {"observation": cell.observation, "action": cell.action, "masked": cell.masked}
        spec = make_env("matrix_envs:Probe-v0", num_envs=2, env_kwargs=kind).spec
        want = cell.spec()
        assert {f: getattr(spec, f) for f in fields} == {f: getattr(want, f) for f in fields}


@pytest.mark.parametrize(("algo", "table", "column", "cell"), CELLS, ids=IDS)
def test_each_cell_trains_or_is_refused_before_a_run_folder(tmp_path, algo, table, column, cell):
    torch.manual_seed(0)
    why = refusal(algo, cell)
    config = run_config(algo, cell, str(tmp_path / "run"))
    if why is not None:
        with pytest.raises(ConfigError):
            train_agent(config, log=None)
        assert not (tmp_path / "run").exists()
        return
    summary = train_agent(config, log=None)
    assert summary["total_steps"] >= 240 and np.isfinite(summary["final_eval_mean"])
    policy = load_policy(tmp_path / "run")
    env = make_env(config.env_id, num_envs=3, env_kwargs=config.env_kwargs, seed=1)
    obs, info = env.reset()
    policy.reset()
    for _ in range(12):  # the saved policy acts in the env (masks honoured: the env checks)
        mask = info.get("action_mask")
        action = policy.predict(obs, action_mask=mask) if mask is not None else policy(obs)
        if isinstance(action, dict):  # a Dict action space's parts: as agents see them
            action = policy.vec_policy()(obs)
        obs, _, _, _, info = env.step(torch.as_tensor(action))
    single = gymnasium.make(config.env_id, **config.env_kwargs)
    obs, info = single.reset(seed=2)
    policy.reset()
    for _ in range(12):  # and in one gymnasium env, in its own terms (the env checks them)
        mask = info.get("action_mask")
        action = policy.predict(obs, action_mask=mask) if mask is not None else policy(obs)
        obs, _, _, _, info = single.step(action)
