"""How a population runs: as slots of a torchrun job on this machine (`train_population`, which
launches them), or a process joining one (`join`, `run_slot`); a slot runs members as processes
(`slots.py`) or, for `--population-backend vmap`, as one stacked model (`vmap.py`)."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from xiaoyarl.config import Config
from xiaoyarl.errors import ConfigError
from xiaoyarl.population.leaderboard import locked
from xiaoyarl.population.plots import plot_population
from xiaoyarl.population.schemes import Population, PopulationConfig
from xiaoyarl.population.slots import Slot, under_torchrun
from xiaoyarl.population.vmap import VmapSlot


# --- entry points ----------------------------------------------------------------------------
def run_slot(folder: Path, log: Callable[[str], None] | None = print) -> None:
    """Run this process as a slot of the population in `folder` until it is done."""
    rank = os.environ.get("RANK", "0")
    population = Population(folder)
    slot_class = VmapSlot if population.pop.backend == "vmap" else Slot
    slot_class(population, f"slot-{socket.gethostname()}-{rank}-{os.getpid()}", log).run()


def launch_local(folder: Path, workers: int, log: Callable[[str], None] | None = print) -> None:
    """Run `workers` slots on this machine as a torchrun job (torch's elastic launcher, c10d
    rendezvous on localhost), as `torchrun --standalone --nproc-per-node WORKERS -m xiaoyarl
    population --join FOLDER` would."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    launch = LaunchConfig(
        min_nodes=1, max_nodes=1, nproc_per_node=workers, run_id=os.urandom(8).hex(),
        rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=0, monitor_interval=0.2,
    )  # fmt: skip
    argv = ["-m", "xiaoyarl", "population", "--join", str(folder)]
    if log is None:
        argv.append("--quiet")
    try:
        elastic_launch(launch, entrypoint=sys.executable)(*argv)
    except ChildFailedError as e:
        rank, failure = e.get_first_failure()
        raise RuntimeError(
            f"population slot {rank} (pid {failure.pid}) failed with exit code "
            f"{failure.exitcode}; the population folder {folder} keeps every member's "
            f"checkpoint: continue with --resume."
        ) from None


def train_population(
    config: Config,
    population: PopulationConfig,
    out: str | Path,
    resume: bool = False,
    log: Callable[[str], None] | None = print,
) -> dict:
    """Train a population of `config`'s agent (see `population.py`) in the folder `out`; return
    its summary (best member, score, hyper-parameters; the median member's score). On one
    machine the slots are launched here; as a process of a torchrun job, this process is a slot."""
    population.validate(config)
    out = Path(out)
    joining = under_torchrun()
    pop = Population.create_or_join(out, config, population, resume, joining)
    if joining:
        run_slot(out, log)
    else:
        workers = population.workers or min(population.members, os.cpu_count() or 1)
        slots = "1 vmapped slot" if population.backend == "vmap" else f"{workers} slots"
        if log is not None:
            log(f"population of {population.members} {config.algo} members on {config.env_id} "
                f"| {population.scheme} | {slots} | folder {out}")  # fmt: skip
        if population.backend == "vmap":
            run_slot(out, log)  # one process trains the members together
        else:
            launch_local(out, workers, log)
    with locked(out, shared=True):
        state = pop.read_state()
    summary = pop.scheme.summary(state) | {"folder": str(out), "done": pop.scheme.finished(state)}
    if not joining or os.environ.get("RANK") == "0":
        plot_population(out)
    return summary


def join(folder: str | Path, quiet: bool = False) -> int:
    """`xiaoyarl population --join FOLDER`: a slot of an existing population folder."""
    folder = Path(folder)
    if not (folder / "population.yaml").is_file():
        raise ConfigError(f"--join {folder}: no population there (population.yaml is missing).")
    run_slot(folder, None if quiet else print)
    return 0
