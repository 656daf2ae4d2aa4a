"""Task presets: settings known to learn an (algorithm, task) pair, like the RL Zoo's files.

The library's defaults are general (`Config`); some tasks need other settings, e.g. the
multi-agent navigation task, whose 25-step episodes want a shorter horizon (gamma) and the
papers' batch sizes. Each preset is a plain config file in `xiaoyarl/configs/` (it explains its
values in its comments, and `--config` takes it like any other file); the index
`configs/presets.yaml` says which (algorithm, task) pairs it was measured on, on at least one of
the task's ids (BENCHMARKS.md).

A preset follows the task, not the id: `TASKS` names the task behind each env id, so the
built-in navigation env and mpe2's original through the PettingZoo adapter get the same preset.
The task also names the kind of actions where an id offers both (mpe2's `simple_spread_v3`
is discrete unless `env_kwargs` sets `continuous_actions`), since a preset is measured on one.
Where an id needs settings of its own for its task, `ID_PRESETS` names them (QMIX on mpe2's id,
whose global state differs from the built-in env's; its file says why).

An algorithm whose paper gives settings for every task (FastTD3's) has a preset of its own,
`ALGO_PRESETS`, for the tasks without one.

`xiaoyarl train` starts from the preset of its pair when there is one and no `--config` is
given, says so, and writes the resolved values into the run's `config.yaml`; `--no-preset`
keeps the library's defaults. From Python, `config_from_preset(algo, env_id, env_kwargs)`
(`xiaoyarl/config_io.py`) does the same; `Config()` never applies one.
"""

from __future__ import annotations

from pathlib import Path

import yaml

CONFIG_DIR = Path(__file__).resolve().parent / "configs"

SPREAD_DISCRETE = "cooperative navigation (discrete actions)"
SPREAD_CONTINUOUS = "cooperative navigation (continuous actions)"
MINATAR_BREAKOUT = "MinAtar Breakout"
MINATAR_SPACE_INVADERS = "MinAtar SpaceInvaders"
PENDULUM = "Pendulum"
CARTPOLE = "CartPole"
MOUNTAIN_CAR = "MountainCar"
LUNAR_LANDER = "LunarLander"
MOUNTAIN_CAR_CONTINUOUS = "MountainCarContinuous"

# env id -> its task: (the task with discrete actions, the task with continuous actions),
# the second chosen by env_kwargs["continuous_actions"] (ids of one kind name it twice)
TASKS: dict[str, tuple[str, str]] = {
    "SpreadDiscrete-v0": (SPREAD_DISCRETE, SPREAD_DISCRETE),
    "SpreadContinuous-v0": (SPREAD_CONTINUOUS, SPREAD_CONTINUOUS),
    "mpe2:simple_spread_v3": (SPREAD_DISCRETE, SPREAD_CONTINUOUS),
    "mpe2.simple_spread_v3:parallel_env": (SPREAD_DISCRETE, SPREAD_CONTINUOUS),
    "MinAtar/Breakout-v1": (MINATAR_BREAKOUT, MINATAR_BREAKOUT),
    "MinAtar/SpaceInvaders-v1": (MINATAR_SPACE_INVADERS, MINATAR_SPACE_INVADERS),
    "Pendulum-v1": (PENDULUM, PENDULUM),
    "CartPole-v1": (CARTPOLE, CARTPOLE),
    "MountainCar-v0": (MOUNTAIN_CAR, MOUNTAIN_CAR),
    "LunarLander-v3": (LUNAR_LANDER, LUNAR_LANDER),
    "MountainCarContinuous-v0": (MOUNTAIN_CAR_CONTINUOUS, MOUNTAIN_CAR_CONTINUOUS),
}

# the preset files' index (`configs/presets.yaml`): which file each (algorithm, task) pair,
# (algorithm, env id, task) triple and algorithm starts from
_INDEX = yaml.safe_load((CONFIG_DIR / "presets.yaml").read_text())
# (algorithm, task) -> config file under CONFIG_DIR
PRESETS: dict[tuple[str, str], str] = {
    (algo, task): name for algo, files in _INDEX["tasks"].items() for task, name in files.items()
}
# algorithm -> config file for every task without a preset of its own
ALGO_PRESETS: dict[str, str] = dict(_INDEX["algorithms"])
# (algorithm, env id, task) -> config file, where an id needs settings of its own for the task
ID_PRESETS: dict[tuple[str, str, str], str] = {
    (algo, env_id, task): name
    for algo, ids in _INDEX["ids"].items()
    for env_id, files in ids.items()
    for task, name in files.items()
}


# env kwargs that leave the task as it is (any other, e.g. the number of agents or the episode
# length, makes it another task, which no preset was measured on)
SAME_TASK_KWARGS = frozenset({"continuous_actions", "check_actions", "render_mode"})


def task_of(env_id: str, env_kwargs: dict | None = None) -> str | None:
    """The task behind `env_id` with these env kwargs, or None for an env no preset knows
    (also when a kwarg outside `SAME_TASK_KWARGS` changes the task)."""
    kinds = TASKS.get(env_id)
    kwargs = env_kwargs or {}
    if kinds is None or not set(kwargs) <= SAME_TASK_KWARGS:
        return None
    return kinds[bool(kwargs.get("continuous_actions", False))]


def preset_path(algo: str, env_id: str, env_kwargs: dict | None = None) -> Path | None:
    """The preset config file of `algo` on `env_id` (with `env_kwargs`): the task's, else the
    algorithm's (`ALGO_PRESETS`), else None."""
    algo, task = algo.lower(), task_of(env_id, env_kwargs)
    name = task and (ID_PRESETS.get((algo, env_id, task)) or PRESETS.get((algo, task)))
    name = name or ALGO_PRESETS.get(algo)
    return CONFIG_DIR / name if name else None


def preset_ids(task: str) -> list[str]:
    """The env ids (with the env kwargs they need) whose task is `task`, for `xiaoyarl list`."""
    ids = []
    for env_id, (discrete, continuous) in TASKS.items():
        if discrete == task:
            ids.append(env_id)
        if continuous == task and continuous != discrete:
            ids.append(f"{env_id} (env_kwargs {{continuous_actions: true}})")
    return ids
