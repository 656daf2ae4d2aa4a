"""The support matrix beyond the agents' own tables (`agents/matrix.py`: observations, actions,
masks, memory): each algorithm at scale, and every tool on every kind of run.

- **Scale**: a cell's state is what the runner's own checks say before anything starts
  (`resolve_run` for worker processes and torchrun learners, `PopulationConfig.validate` for
  populations), on the algorithm's own kind of task (CartPole-v1 for algorithms of discrete
  actions, Pendulum-v1 otherwise; SpreadDiscrete-v0 and SpreadContinuous-v0 for the
  multi-agent ones); CUDA graphs are captured where the agent's update repeats
  its choices (`update_cycle`, `core/graphs.py`), else its updates run eagerly and the cell says
  why. `tests/test_matrix.py` trains every cell said to work through the CLI (the full tier:
  they start processes) and checks that every refused one is refused before a run folder.
- **Tools**: the kinds of run (`agents/matrix.py`'s `RUN_KINDS`) and the tools (`TOOLS`) that
  `tests/test_matrix.py` trains and runs every pair of, so that the docs' table and the test
  cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import torch

from xiaoyarl.agents.matrix import multi_agent_algorithms, own_action, single_agent_algorithms
from xiaoyarl.agents.registry import make_agent
from xiaoyarl.agents.settings import resolve_config, resolve_run
from xiaoyarl.config import Config
from xiaoyarl.core.graphs import MAX_GRAPHS
from xiaoyarl.envs.build import build_env
from xiaoyarl.errors import XiaoyaError
from xiaoyarl.population.schemes import PopulationConfig

# the task of each kind of action the scale cells are read (and trained) on, single- and
# multi-agent
SCALE_TASKS = {
    (False, "Discrete"): "CartPole-v1",
    (False, "Box"): "Pendulum-v1",
    (True, "Discrete"): "SpreadDiscrete-v0",
    (True, "Box"): "SpreadContinuous-v0",
}
SCALE = ("workers", "workers, gru", "torchrun", "generational", "tournament", "vmapped",
         "CUDA graphs")  # fmt: skip


def scale_config(algo: str, column: str) -> tuple[Config, PopulationConfig | None]:
    """The run (and, for a population, its settings) of the scale cell `column` of `algo`."""
    multi = algo in multi_agent_algorithms()
    config = Config(algo=algo, env_id=SCALE_TASKS[multi, own_action(algo)])
    if column.startswith("workers"):
        memory = "gru" if column.endswith("gru") else None
        config = dataclasses.replace(config, runner="parallel", recurrent=memory)
    if column in ("generational", "tournament"):
        return config, PopulationConfig(scheme=column, members=2)
    if column == "vmapped":
        return config, PopulationConfig(backend="vmap", members=2)
    return config, None


def scale_refusal(algo: str, column: str) -> str | None:
    """Why `algo` cannot train at the scale `column`, or None where it can (for CUDA graphs:
    why its updates run eagerly, or None where they are captured)."""
    config, population = scale_config(algo, column)
    try:
        if column == "CUDA graphs":
            return _graphs_note(config)
        if population is not None:
            population.validate(config)
            return None
        resolve_run(config, ranks=(0, 2, 0) if column == "torchrun" else None)
    except XiaoyaError as error:
        return str(error)
    return None


def _graphs_note(config: Config) -> str | None:
    """Why the agent's updates cannot be replayed as CUDA graphs (`core/graphs.py`), or None."""
    with build_env(config, 2, torch.device("cpu"), "torch", 0) as env:
        resolved = resolve_config(config, batched=True)
        agent = make_agent(config.algo, env.spec, resolved, torch.device("cpu"))
    period = agent.update_cycle()
    if period is None:
        return ("its updates run without CUDA graphs: which networks an update steps depends "
                "on values read back from the device")  # fmt: skip
    if period > MAX_GRAPHS:
        return (f"its updates run without CUDA graphs: their choices repeat every {period} "
                f"updates, more than the {MAX_GRAPHS} graphs kept")  # fmt: skip
    return None


def scale_cells() -> Iterator[tuple[str, str]]:
    """Every (algorithm, scale column)."""
    for algo in single_agent_algorithms() + multi_agent_algorithms():
        for column in SCALE:
            yield algo, column


# what every kind of run is checked with
TOOLS = ("eval", "record", "plot", "export ONNX", "export TorchScript", "load_policy",
         "resume", "tune")  # fmt: skip
