"""The support matrix (`xiaoyarl/agents/matrix.py` and `xiaoyarl/support.py`, the docs' matrix
page): every cell it says works trains a few hundred env steps through `train_agent` on a small
env of its kind (`matrix_envs.Probe-v0`) and its saved policy acts; every cell it refuses is
refused by a run too, before the run has a folder. The scale cells train through the CLI (in
the full tier: they start processes); every tool runs on every kind of run. So no cell changes
state unnoticed."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import torch

from xiaoyarl import Config, ConfigError, Policy, evaluate, load_policy
from xiaoyarl.agents.matrix import (
    MULTI_AGENT_COLUMNS,
    RUN_KINDS,
    Cell,
    cells,
    multi_agent_algorithms,
    multi_agent_refusal,
    refusal,
    single_agent_algorithms,
)
from xiaoyarl.agents.settings import agent_of_name, load_saved_config
from xiaoyarl.envs import make_env
from xiaoyarl.envs.multi.registry import make_multi_agent_env
from xiaoyarl.export import export_policy
from xiaoyarl.population.launch import train_population
from xiaoyarl.record import record_video
from xiaoyarl.run import train_agent
from xiaoyarl.support import TOOLS, scale_cells, scale_config, scale_refusal
from xiaoyarl.train.plots import plot_runs
from xiaoyarl.tune.study import TuneSettings, default_space, tune

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


def trained_or_refused(config: Config, why: str | None, run: Path) -> Policy | None:
    """Where `why` is None, train `config` and return its saved policy; else check that the run
    is refused before it has a folder (and return None)."""
    if why is not None:
        with pytest.raises(ConfigError):
            train_agent(config, log=None)
        assert not run.exists()
        return None
    summary = train_agent(config, log=None)
    assert summary["total_steps"] >= config.max_steps and np.isfinite(summary["final_eval_mean"])
    return load_policy(run)


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
    config = run_config(algo, cell, str(tmp_path / "run"))
    policy = trained_or_refused(config, refusal(algo, cell), tmp_path / "run")
    if policy is None:
        return
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


# --- scale: worker processes, torchrun learners, populations, vmapped members, CUDA graphs ---
SCALE_CELLS = list(scale_cells())
TRAINED = [(algo, column) for algo, column in SCALE_CELLS
           if column != "CUDA graphs" and scale_refusal(algo, column) is None]  # fmt: skip
REFUSED = [(algo, column) for algo, column in SCALE_CELLS
           if column != "CUDA graphs" and scale_refusal(algo, column) is not None]  # fmt: skip


def scale_command(algo: str, column: str, cwd: str) -> list[str]:
    """The CLI command of a scale cell: a few hundred env steps of small networks."""
    config, population = scale_config(algo, column)
    small = ["--max-steps", "512", "--eval-every", "256", "--eval-episodes", "1", "--threads",
             "1", "--target-return", "none", "--quiet", "--cwd", cwd, "--set",
             "net_dims=[16]"]  # fmt: skip
    if agent_of_name(algo).if_off_policy:
        small += ["--set", "learning_starts=64", "--set", "batch_size=32"]
    if config.recurrent:
        small += ["--set", f"recurrent={config.recurrent}", "--set", "recurrent_dim=8"]
    if population is None:
        scale = ["--learners", "2"] if column == "torchrun" else ["--runner", "parallel",
                                                                 "--num-workers", "2"]  # fmt: skip
        return ["train", algo, config.env_id, *small, *scale]
    scale = ["--members", "2", "--scheme", population.scheme]
    scale += ["--population-backend", population.backend, "--generation-steps", "256",
              "--pod-steps", "256"]  # fmt: skip
    return ["population", algo, config.env_id, *small, *scale]


@pytest.mark.parametrize(("algo", "column"), REFUSED, ids=[f"{a}-{c}" for a, c in REFUSED])
def test_each_refused_scale_cell_is_refused_before_a_run_folder(tmp_path, algo, column):
    config, population = scale_config(algo, column)
    if population is not None:
        with pytest.raises(ConfigError, match="need the process backend"):
            train_population(config, population, tmp_path / "run", log=None)
    else:
        with pytest.raises(ConfigError, match="recurrent"):
            train_agent(dataclasses.replace(config, cwd=str(tmp_path / "run")), log=None)
    assert not (tmp_path / "run").exists()


def test_every_algorithm_scales_and_graphs_where_said():
    """What the scale table shows, read from the runners: every algorithm, single- or
    multi-agent, with worker processes (a GRU policy too, but for the model-based agents:
    TD-MPC2 has no recurrent form, DreamerV3 is recurrent already), torchrun learners and both
    kinds of population, vmapped ones too (but for the model-based agents, which have no stacked
    form yet); CUDA graphs for all but ModSAC, whose actor's steps depend on the critic loss
    read back."""
    vmapped = {algo for algo, column in SCALE_CELLS
               if column == "vmapped" and (algo, column) in TRAINED}  # fmt: skip
    model_based = {"tdmpc2", "dreamerv3"}
    assert vmapped == {*single_agent_algorithms(), *multi_agent_algorithms()} - model_based
    assert REFUSED == [(algo, column) for algo in ("tdmpc2", "dreamerv3")
                       for column in ("workers, gru", "vmapped")]  # fmt: skip
    eager = [algo for algo in single_agent_algorithms() if scale_refusal(algo, "CUDA graphs")]
    assert eager == ["modsac"]


@pytest.mark.distributed
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("algo", "column"), TRAINED, ids=[f"{a}-{c}" for a, c in TRAINED])
def test_each_scale_cell_trains_through_the_cli(tmp_path, algo, column):
    """Every "yes" cell of the scale table trains a few hundred env steps through the CLI (in the
    full tier: each starts processes) and its best policy evaluates."""
    out = tmp_path / "out"
    command = scale_command(algo, column, str(out))
    done = subprocess.run([sys.executable, "-m", "xiaoyarl", *command], capture_output=True,
                          text=True, timeout=280)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    run = out if command[0] == "train" else next((out / "members").iterdir())
    policy = load_policy(run)
    shape = (policy.num_agents, policy.obs_dim) if algo in multi_agent_algorithms() else \
        policy.obs_shape  # fmt: skip
    assert np.isfinite(policy.predict(np.zeros(shape, np.float32))).all()


# --- tools on every kind of run ---------------------------------------------------------------
@pytest.fixture(scope="module")
def kind_runs(tmp_path_factory):
    """A short run of every kind of `RUN_KINDS`, by name."""
    folder = tmp_path_factory.mktemp("kinds")
    runs = {}
    for kind, (algo, env_id, fields) in RUN_KINDS.items():
        runs[kind] = folder / kind.replace(" ", "_").replace(",", "")
        config = Config(algo=algo, env_id=env_id, seed=0, threads=1, max_steps=512,
                        eval_every=256, eval_episodes=2, cwd=str(runs[kind]),
                        target_return=None, **TOOL_SMALL.get(algo, {}), **fields)  # fmt: skip
        train_agent(config, log=None)
    return runs


TOOL_SMALL = {"sac": {"learning_starts": 64, "batch_size": 32, "net_dims": [32]},
              "dqn": {"learning_starts": 64, "batch_size": 32, "num_envs": 2},
              "qmix": {"learning_starts": 64, "batch_size": 4, "num_envs": 2},
              "mappo": {"num_envs": 4, "horizon_len": 32, "batch_size": 64},
              "ppo": {"num_envs": 4, "horizon_len": 32}}  # fmt: skip


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("kind", list(RUN_KINDS))
def test_every_tool_works_on_every_kind_of_run(kind_runs, tmp_path, kind, tool):
    run = tmp_path / "run"
    shutil.copytree(kind_runs[kind], run)
    algo, env_id, fields = RUN_KINDS[kind]
    if tool == "eval":
        result = evaluate(run, episodes=2)
        assert np.isfinite(result["mean"])
    elif tool == "record":
        assert record_video(run, tmp_path / "video.gif").stat().st_size > 0
    elif tool == "plot":
        assert plot_runs([run], tmp_path / "curve.png").stat().st_size > 0
    elif tool.startswith("export"):
        fmt = "onnx" if tool.endswith("ONNX") else "torchscript"
        if fmt == "onnx":
            pytest.importorskip("onnxscript")
        assert export_policy(run, fmt=fmt).stat().st_size > 0
    elif tool == "load_policy":
        policy = load_policy(run)
        assert policy.recurrent == bool(fields.get("recurrent"))
    elif tool == "resume":
        config = dataclasses.replace(load_saved_config(run / "config.yaml"), max_steps=768,
                                     cwd=str(run))  # fmt: skip
        summary = train_agent(config, resume=True, log=None)
        assert summary["total_steps"] >= 768
    else:  # tune: two trials of a short study from the algorithm's default search space
        small = TOOL_SMALL.get(algo, {})
        config = Config(algo=algo, env_id=env_id, seed=0, threads=1, max_steps=256,
                        eval_every=256, eval_episodes=1, **small, **fields)  # fmt: skip
        settings = TuneSettings(trials=2, sampler="random", pruner="none",
                                search_space=default_space(algo))  # fmt: skip
        summary = tune(config, settings, tmp_path / "study", log=None)
        assert summary["trials"] == 2


# --- the multi-agent algorithms ---------------------------------------------------------------
MA_ENVS = {(True, False): "SpreadDiscrete-v0", (False, False): "SpreadContinuous-v0",
           (True, True): "test_pettingzoo_adapter:make_masked"}  # fmt: skip
MA_CELLS = [(algo, column) for algo in multi_agent_algorithms() for column in MULTI_AGENT_COLUMNS]


@pytest.mark.parametrize(("algo", "column"), MA_CELLS, ids=[f"{a}-{c}" for a, c in MA_CELLS])
def test_each_multi_agent_cell_trains_or_is_refused_before_a_run_folder(tmp_path, algo, column):
    cell = MULTI_AGENT_COLUMNS[column]
    discrete = cell.spec(algo).if_discrete
    env_id = MA_ENVS[(discrete, cell.masked)]
    if cell.masked:
        pytest.importorskip("pettingzoo")
    small = {"net_dims": [16], "num_envs": 2, "max_steps": 400, "eval_every": 400,
             "eval_episodes": 1, "threads": 1, "target_return": None, "cwd": str(tmp_path / "run"),
             "recurrent": cell.memory}  # fmt: skip
    if cell.memory:
        small["recurrent_dim"] = 8
    if agent_of_name(algo).if_off_policy:
        small.update(batch_size=4 if cell.memory else 16, learning_starts=64)
    elif algo == "mappo":
        small.update(horizon_len=32, batch_size=32)
    if cell.masked:  # its episodes end within 4 steps; recurrent agents replay whole ones
        small["env_kwargs"] = {"max_episode_steps": 8}
    config = Config(algo=algo, env_id=env_id, **small)
    torch.manual_seed(0)
    policy = trained_or_refused(config, multi_agent_refusal(algo, cell), tmp_path / "run")
    if policy is None:
        return
    env = make_multi_agent_env(env_id, 2, seed=1, env_kwargs=config.env_kwargs)
    obs, info = env.reset()
    for _ in range(12):  # the saved policy acts (masks honoured: the masked env raises)
        action = policy.predict(obs, avail=info.get("avail_actions"))
        obs, _, _, _, info = env.step(torch.as_tensor(action))
