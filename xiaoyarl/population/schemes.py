"""Populations of agents: generational evolution and tournament-based ensemble training.

A population is a folder (`POP/`, which may sit on a shared filesystem) and any number of
*slots*: the processes of a torchrun job, on one machine or several. A slot claims a piece of
work from the folder, runs it as a member process (an ordinary `train_agent` run in the
member's own run folder, resumed from its checkpoint), and writes back the score. Slots never
talk to each other and never wait for each other's members; everything they share is in the
folder, read and changed under its lock (`leaderboard.py`). So a slot can join at any time
(torchrun's elastic rendezvous adds it to the job), leave (its member stops with a checkpoint
and is claimed again by another slot), or be killed (its claim goes stale: a dead process on
this host, or no heartbeat for `lease_seconds`); the population goes on.

Schemes:
- **generational**: M members train for a generation (env steps, or seconds), are evaluated
  and ranked; the bottom `select_fraction` are replaced by copies of the top (weights,
  optimizer state, normalisers, replay buffer unless `exploit_buffer` is off) with perturbed
  hyper-parameters (explore); optionally the top `fuse_top` are fused (`fusion.py`) and every
  replaced member starts from the fusion. Slots claim the best-ranked members first, so with
  fewer slots than members the lowest-ranked wait.
- **tournament**: no generations and no barrier. A slot's generator starts a pod: fresh (the
  first M pods) or from a leaderboard entry picked by a binary tournament,
  with mutated hyper-parameters; the pod trains `pod_steps` env steps, is evaluated, and the
  updater inserts its checkpoint in the leaderboard of the best `leaderboard_size` where its
  score earns a place. A pod whose process fails is replaced by a new one from the leaderboard.

Folder: `population.yaml` (settings), `state.json` (members or pods, claims), `population.csv`
(one row per trained segment and per exploit), `leaderboard/`, `members/NAME/` (run folders),
`population.png`.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml

from xiaoyarl.agents import ALGORITHMS
from xiaoyarl.agents.settings import agent_of, agent_of_name, check_config, config_from_saved
from xiaoyarl.config import Config
from xiaoyarl.config_io import config_from_dict, save_config
from xiaoyarl.errors import CheckpointError, ConfigError
from xiaoyarl.population.leaderboard import Leaderboard, locked, read_json, write_json
from xiaoyarl.population.search_space import SearchSpace
from xiaoyarl.train.checkpoint import load_plain, save_atomic
from xiaoyarl.train.schedules import scheduled

SCHEMES = ("generational", "tournament")
BACKENDS = ("process", "vmap")
CSV_FIELDS = ["time", "event", "member", "generation", "step", "score", "parent", "hparams"]


def vmap_algorithms() -> list[str]:
    """The algorithms a vmapped population (`vmap.py`) trains: those whose agent declares the
    settings its members may vary (`AgentBase.member_fields`)."""
    return sorted(name for name in ALGORITHMS if agent_of_name(name).member_fields)


def check_vmap_population(config: Config, search_space: dict) -> None:
    """Refuse, with what to do instead, what a vmapped population cannot train."""
    agent = agent_of(config)
    per_member = sorted(agent.member_fields)
    if not per_member:
        raise ConfigError(
            f"--population-backend vmap trains {', '.join(vmap_algorithms())} members; "
            f"{config.algo} members need the process backend (the default): its agent "
            f"declares no settings a member may vary (`member_fields`), so it has no stacked "
            f"form."
        )
    varied = sorted(set(search_space) - set(per_member))
    if varied:
        raise ConfigError(
            f"--population-backend vmap stacks members of one shape: it can vary "
            f"{', '.join(per_member)} of {config.algo} per member, not {', '.join(varied)}. "
            f"Search those with "
            f"the process backend (the default)."
        )
    if config.h_term or config.runner != "single" or config.recurrent:
        raise ConfigError(f"--population-backend vmap trains plain single-process "
                          f"{config.algo} members (no h_term, runner single, no recurrent "
                          f"policy).")  # fmt: skip
    if agent.if_off_policy:
        _check_vmap_replay(config)
    if scheduled(config) or any(f.endswith("_schedule") for f in search_space):
        names = [
            f.name
            for f in dataclasses.fields(config)
            if f.name.endswith("_schedule") and getattr(config, f.name) != "constant"
        ]
        fix = f", or --set {names[0]}=constant" if names else ""
        raise ConfigError(f"--population-backend vmap keeps each member's values constant: "
                          f"schedules ({', '.join(names) or 'searched'}) need the process "
                          f"backend (the default){fix}; a task preset may set one (--no-preset "
                          f"starts from the library's defaults).")  # fmt: skip


def _check_vmap_replay(config: Config) -> None:
    """Refuse what vmapped replay members cannot take: prioritized replay (each member's
    priorities follow its own TD errors, read back per member) and gSDE (its exploration
    matrices are drawn as the agent's own rollout starts)."""
    if config.per:
        raise ConfigError("--population-backend vmap draws each member's batches uniformly: "
                          "prioritized replay (per) needs the process backend (the default); "
                          "remove per=true.")  # fmt: skip
    if config.explore_noise == "gsde":
        raise ConfigError("--population-backend vmap explores with each member's policy "
                          "samples: gSDE's exploration matrices need the process backend (the "
                          "default); remove explore_noise=gsde.")  # fmt: skip


@dataclass
class PopulationConfig:
    """How a population evolves (the agents' own settings are the `Config`). `Config.max_steps`
    is each member's budget; a tournament's budget is `members * max_steps` env steps in all."""

    members: int = 8  # generational: members; tournament: pods training at once
    scheme: str = "generational"  # generational | tournament
    search_space: dict = dataclasses.field(default_factory=dict)  # see search_space.py
    generation_steps: int | None = None  # env steps per generation (None: max_steps / 10)
    generation_seconds: float | None = None  # or: seconds of training per generation
    select_fraction: float = 0.25  # bottom fraction replaced by copies of the top (0: static)
    perturb_factors: tuple[float, ...] = (0.8, 1.2)  # explore: a value times one of these
    resample_probability: float = 0.25  # explore: draw a value afresh instead
    fuse_top: int = 0  # >= 2: replaced members start from the fusion of the top K
    exploit_buffer: bool = True  # a replaced member takes the donor's replay buffer too
    leaderboard_size: int = 4  # checkpoints kept on the leaderboard (both schemes)
    pod_steps: int | None = None  # tournament: env steps a pod trains (None: max_steps / 4)
    mutate: bool = True  # tournament: perturb hyper-parameters of pods from the leaderboard
    workers: int | None = None  # one machine: slots (processes); None: min(members, CPUs)
    lease_seconds: float = 120.0  # a claim without a heartbeat for this long is free again
    max_failures: int = 3  # generational: a member failing this often is replaced
    backend: str = "process"  # process (a process per member) | vmap (members of one shape
    # trained together as one stacked model, population/vmap.py)

    def validate(self, config: Config) -> PopulationConfig:
        def bad(name: str, allowed: str) -> None:
            raise ConfigError(f"invalid population setting: {name}={getattr(self, name)!r}; "
                              f"expected {allowed}.")  # fmt: skip

        if self.scheme not in SCHEMES:
            bad("scheme", " or ".join(SCHEMES))
        if not isinstance(self.members, int) or self.members < 1:
            bad("members", "a positive integer")
        if self.workers is not None and self.workers < 1:
            bad("workers", "a positive integer")
        if not 0 <= self.select_fraction <= 0.5:
            bad("select_fraction", "a number in [0, 0.5]")
        for name in ("generation_steps", "pod_steps"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                bad(name, "a positive number of env steps")
        if self.generation_seconds is not None and not self.generation_seconds > 0:
            bad("generation_seconds", "a positive number of seconds")
        if self.generation_steps is not None and self.generation_seconds is not None:
            raise ConfigError("give a generation length in env steps or in seconds, not both.")
        if not self.perturb_factors or any(f <= 0 for f in self.perturb_factors):
            bad("perturb_factors", "positive factors, e.g. [0.8, 1.2]")
        if not 0 <= self.resample_probability <= 1:
            bad("resample_probability", "a probability in [0, 1]")
        if self.fuse_top == 1 or self.fuse_top < 0:
            bad("fuse_top", "0 (no fusion) or at least 2")
        if self.leaderboard_size < 1:
            bad("leaderboard_size", "a positive integer")
        if self.backend not in BACKENDS:
            bad("backend", " or ".join(BACKENDS))
        if self.backend == "vmap":
            check_vmap_population(config, self.search_space)
        space = SearchSpace(self.search_space)
        if self.fuse_top and space.structural():
            raise ConfigError(f"fuse_top={self.fuse_top} fuses members' networks, so their "
                              f"architecture cannot be searched ({', '.join(space.structural())}"
                              f" in the search space).")  # fmt: skip
        check_config(config)
        return self

    def to_dict(self) -> dict:
        values = dataclasses.asdict(self)
        values["perturb_factors"] = list(self.perturb_factors)
        return values

    @classmethod
    def from_dict(cls, values: dict) -> PopulationConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - names
        if unknown:
            raise ConfigError(f"unknown population setting(s): {', '.join(sorted(unknown))}.")
        pop = cls(**values)
        pop.perturb_factors = tuple(pop.perturb_factors)
        return pop


# --- the population folder -------------------------------------------------------------------
class Population:
    """A population folder: its settings, its state (under the lock) and its files."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        settings = yaml.safe_load((self.folder / "population.yaml").read_text())
        self.config = config_from_saved(settings["config"], source=str(self.folder))
        self.pop = PopulationConfig.from_dict(settings["population"])
        self.space = SearchSpace(self.pop.search_space)
        self.board = Leaderboard(self.folder / "leaderboard", self.pop.leaderboard_size)
        self.state_path = self.folder / "state.json"
        self.csv_path = self.folder / "population.csv"
        self.scheme = (Generational if self.pop.scheme == "generational" else Tournament)(self)

    @staticmethod
    def create_or_join(folder: Path, config: Config, pop: PopulationConfig,
                       resume: bool, joining: bool) -> Population:  # fmt: skip
        """Create the population in `folder`, or open it: with `resume`, or as a slot of a job
        (`joining`), where every launcher gives the same settings and the first one creates it."""
        folder = Path(folder)
        settings = {"config": config.to_dict(), "population": pop.to_dict()}
        with locked(folder):
            path = folder / "population.yaml"
            if path.exists():
                if not (resume or joining):
                    raise CheckpointError(
                        f"{folder} already holds a population. Pass --resume to continue it, "
                        f"or choose another --cwd."
                    )
                saved = yaml.safe_load(path.read_text())
                if not resume and _plain(saved) != _plain(settings):
                    raise ConfigError(
                        f"{folder} holds a population with other settings than this launcher's;"
                        f" every launcher of a population must give the same command."
                    )
            elif resume:
                raise CheckpointError(f"cannot resume: {folder} holds no population.")
            else:
                path.write_text(yaml.safe_dump(_plain(settings), sort_keys=False))
                population = Population(folder)
                write_json(population.scheme.initial_state(), population.state_path)
                return population
        return Population(folder)

    def read_state(self) -> dict:
        return read_json(self.state_path, "population state")

    def write_state(self, state: dict) -> None:
        write_json(state, self.state_path)

    def member_dir(self, name: str) -> Path:
        return self.folder / "members" / name

    def member_config(self, name: str, seed: int, hparams: dict, max_steps: int) -> Config:
        config = config_from_dict({**self.config.to_dict(), **hparams}, source=name)
        config.seed = seed
        config.cwd = str(self.member_dir(name))
        config.max_steps = max_steps
        if scheduled(config):  # decays once over a member's whole budget, not per generation
            config.schedule_steps = config.schedule_steps or self.config.max_steps
        config.stop_at_target = False  # members train for their budget; the population stops
        if config.threads is None:
            config.threads = 1  # members run side by side
        return config

    def log_row(
        self,
        event: str,
        member: str,
        generation: int | str,
        step: int,
        score: float | None,
        parent: str = "",
        hparams: dict | None = None,
    ) -> None:
        """Append a row to population.csv (under the lock)."""
        new = not self.csv_path.exists()
        with open(self.csv_path, "a", newline="") as f:
            writer = csv.writer(f)
            if new:
                writer.writerow(CSV_FIELDS)
            writer.writerow(
                [
                    f"{time.time():.3f}",
                    event,
                    member,
                    generation,
                    step,
                    "" if score is None else f"{score:.4f}",
                    parent,
                    yaml.safe_dump(hparams or {}, default_flow_style=True).strip(),
                ]
            )

    def adopt(self, checkpoint: dict, config: Config, evaluator: dict | None) -> dict:
        """`checkpoint` (another member's, or a fusion) made this member's: its config, its own
        evaluation history, learning rate as its config says, and a random state of its own."""
        adopted = dict(checkpoint)
        # the checkpoint holds its run's resolved config: keep it, with what this member sets
        adopted["config"] = {
            **checkpoint["config"],
            **{k: v for k, v in config.to_dict().items() if v is not None},
        }
        adopted["evaluator"] = evaluator
        if config.learning_rate is not None:
            agent = dict(adopted["agent"])
            agent["optimizers"] = {
                name: {**opt, "param_groups": [{**g, "lr": config.learning_rate}
                                               for g in opt["param_groups"]]}
                for name, opt in agent["optimizers"].items()
            }  # fmt: skip
            adopted["agent"] = agent
        generator = torch.Generator().manual_seed(config.seed * 7919 + checkpoint_step(checkpoint))
        adopted["rng"] = {"torch": generator.get_state()}
        return adopted

    def explore(self, hparams: dict, key: str) -> dict:
        rng = random.Random(f"{self.config.seed}:{key}")
        return self.space.perturb(hparams, rng, self.pop.perturb_factors,
                                  self.pop.resample_probability)  # fmt: skip


def checkpoint_step(checkpoint: dict) -> int:
    """The env steps a checkpoint was written at."""
    return int(checkpoint["counters"]["total_steps"])


def _plain(obj: object) -> object:
    """YAML-safe plain data (tuples as lists)."""
    return yaml.safe_load(yaml.safe_dump(obj))


# --- schemes ---------------------------------------------------------------------------------
class Generational:
    """Generational evolution (see the module's docstring)."""

    def __init__(self, population: Population) -> None:
        self.p = population
        pop, config = population.pop, population.config
        self.generation_steps = pop.generation_steps or max(1, config.max_steps // 10)

    def initial_state(self) -> dict:
        rng = random.Random(f"{self.p.config.seed}:sample")
        members = [{"name": f"member-{i:02d}", "seed": self.p.config.seed * 1000 + i,
                    "hparams": self.p.space.sample(rng), "generation": 0, "steps": 0,
                    "score": None, "failures": 0, "claim": None}
                   for i in range(self.p.pop.members)]  # fmt: skip
        return {"scheme": "generational", "generation": 0, "members": members, "done": False}

    def finished(self, state: dict) -> bool:
        return state["done"]

    def next_task(self, state: dict) -> dict | None:
        """The best-ranked free member still in the current generation."""
        free = [m for m in state["members"]
                if m["claim"] is None and m["generation"] == state["generation"]]  # fmt: skip
        if not free:
            return None
        member = max(free, key=lambda m: (-math.inf if m["score"] is None else m["score"],
                                          -int(m["name"].split("-")[1])))  # fmt: skip
        if self.p.pop.generation_seconds is not None:
            max_steps, seconds = self.p.config.max_steps, self.p.pop.generation_seconds
        else:
            max_steps = min((state["generation"] + 1) * self.generation_steps,
                            self.p.config.max_steps)  # fmt: skip
            seconds = None
        return {"member": member["name"], "max_steps": max_steps, "seconds": seconds,
                "seed": member["seed"], "hparams": member["hparams"],
                "generation": state["generation"]}  # fmt: skip

    def member(self, state: dict, name: str) -> dict:
        return next(m for m in state["members"] if m["name"] == name)

    def finish(self, state: dict, task: dict, result: dict | None) -> None:
        """Record a member's generation (result None: its process failed)."""
        member = self.member(state, task["member"])
        if result is None:
            member["failures"] += 1
            self.p.log_row("failed", member["name"], task["generation"], member["steps"], None,
                           hparams=member["hparams"])  # fmt: skip
            if member["failures"] >= self.p.pop.max_failures:
                self._replace_failed(state, member)
            return
        member.update(generation=member["generation"] + 1, steps=result["total_steps"],
                      score=result["final_eval_mean"], failures=0, replaced=False)  # fmt: skip
        self.p.log_row("trained", member["name"], task["generation"], member["steps"],
                       member["score"], hparams=member["hparams"])  # fmt: skip
        self._insert(member)
        if all(m["generation"] > state["generation"] for m in state["members"]):
            self._next_generation(state)

    def _insert(self, member: dict) -> None:
        path = self.p.member_dir(member["name"]) / "checkpoint" / "state.pt"
        if self.p.board.qualifies(member["score"]) and path.exists():
            self.p.board.insert(load_plain(path), member["score"],
                                {"member": member["name"], "step": member["steps"],
                                 "hparams": member["hparams"]})  # fmt: skip

    def _next_generation(self, state: dict) -> None:
        members = state["members"]
        g = state["generation"]
        done = min(m["steps"] for m in members) >= self.p.config.max_steps
        if not done:
            self._select(state, g)
        state["generation"] = g + 1
        state["done"] = done

    def _select(self, state: dict, g: int) -> None:
        """Truncation selection: the bottom fraction become copies of the top, then explore."""
        members = state["members"]
        ranked = sorted(members, key=lambda m: -m["score"] if math.isfinite(m["score"])
                        else math.inf)  # fmt: skip
        k = int(len(members) * self.p.pop.select_fraction)
        if k == 0:
            return
        top, bottom = ranked[:k], ranked[-k:]
        fused = None
        if self.p.pop.fuse_top >= 2:
            from xiaoyarl.scale.fusion import fuse_agent_states

            parents = [self._checkpoint(m) for m in ranked[: self.p.pop.fuse_top]]
            fused = dict(parents[0])
            fused["agent"] = fuse_agent_states([c["agent"] for c in parents])
        for i, (donor, member) in enumerate(zip(top, bottom, strict=True)):
            self._exploit(member, donor, fused, f"{g}:{i}")

    def _checkpoint(self, member: dict) -> dict:
        return load_plain(self.p.member_dir(member["name"]) / "checkpoint" / "state.pt")

    def _exploit(self, member: dict, donor: dict, fused: dict | None, key: str) -> None:
        source = fused if fused is not None else self._checkpoint(donor)
        own_path = self.p.member_dir(member["name"]) / "checkpoint" / "state.pt"
        own = load_plain(own_path) if own_path.exists() else None
        hparams = self.p.explore(donor["hparams"], key)
        config = self.p.member_config(member["name"], member["seed"], hparams,
                                      checkpoint_step(source))  # fmt: skip
        adopted = self.p.adopt(source, config, own["evaluator"] if own else None)
        if own is not None and not self.p.pop.exploit_buffer:
            adopted["agent"] = {**adopted["agent"], "buffer": own["agent"].get("buffer")}
        save_atomic(adopted, own_path)
        save_config(config, self.p.member_dir(member["name"]) / "config.yaml")
        parent = "fusion" if fused is not None else donor["name"]
        member.update(hparams=hparams, steps=checkpoint_step(source), score=donor["score"])
        self.p.log_row("exploit", member["name"], "", member["steps"], None, parent, hparams)

    def _replace_failed(self, state: dict, member: dict) -> None:
        alive = [
            m
            for m in state["members"]
            if m is not member
            and m["score"] is not None
            and (self.p.member_dir(m["name"]) / "checkpoint" / "state.pt").exists()
        ]
        if not alive or member.get("replaced"):
            raise RuntimeError(f"{member['name']} failed {member['failures']} times (its log: "
                               f"{self.p.member_dir(member['name'])}/log.txt) and cannot be "
                               f"replaced by a copy of a working member.")  # fmt: skip
        donor = max(alive, key=lambda m: m["score"])
        self._exploit(member, donor, None, f"failed:{member['name']}:{member['steps']}")
        member.update(failures=0, replaced=True)
        member["generation"] = state["generation"]  # trains this generation from the copy

    def summary(self, state: dict) -> dict:
        scores = [m["score"] for m in state["members"] if m["score"] is not None]
        best = max(state["members"], key=lambda m: -math.inf if m["score"] is None
                   else m["score"])  # fmt: skip
        return {
            "scheme": "generational",
            "generations": state["generation"],
            "median_score": statistics.median(scores) if scores else None,
            "best_member": best["name"],
            "best_score": best["score"],
            "best_hparams": best["hparams"],
            "members": {
                m["name"]: {"score": m["score"], "steps": m["steps"], "hparams": m["hparams"]}
                for m in state["members"]
            },
        }


class Tournament:
    """Tournament-based ensemble training (see the module's docstring)."""

    def __init__(self, population: Population) -> None:
        self.p = population
        config = population.config
        self.pod_steps = population.pop.pod_steps or max(1, config.max_steps // 4)
        self.budget = population.pop.members * config.max_steps
        self.target = config.target_return

    def initial_state(self) -> dict:
        return {"scheme": "tournament", "pods": [], "steps": 0, "done": False}

    def finished(self, state: dict) -> bool:
        return state["done"]

    def _target_reached(self) -> bool:
        entries = self.p.board.entries()
        return (self.target is not None and self.p.config.stop_at_target and bool(entries)
                and entries[0]["score"] >= self.target)  # fmt: skip

    def next_task(self, state: dict) -> dict | None:
        """Resume a pod left by a stopped slot, or start a new one."""
        for pod in state["pods"]:
            if pod["status"] == "ready" and pod["claim"] is None:
                return self._task(pod)
        started = state["steps"] + self.pod_steps * sum(
            p["status"] in ("ready", "running") for p in state["pods"])  # fmt: skip
        if started >= self.budget or self._target_reached():
            if not any(p["status"] in ("ready", "running") for p in state["pods"]):
                state["done"] = True
            return None
        pod = self._new_pod(state)
        state["pods"].append(pod)
        return self._task(pod)

    def _task(self, pod: dict) -> dict:
        return {"member": pod["name"], "max_steps": pod["start_step"] + self.pod_steps,
                "seconds": None, "seed": pod["seed"], "hparams": pod["hparams"],
                "generation": pod["id"]}  # fmt: skip

    def _new_pod(self, state: dict) -> dict:
        """The generator: the first `members` pods are fresh, later ones start from a
        leaderboard entry picked by a binary tournament (mutated unless `mutate` is off)."""
        i = len(state["pods"])
        name = f"pod-{i:04d}"
        seed = self.p.config.seed * 1000 + i
        rng = random.Random(f"{self.p.config.seed}:pod:{i}")
        pod: dict = {"id": i, "name": name, "seed": seed, "status": "ready", "claim": None,
               "parent": None, "start_step": 0, "score": None, "steps": 0}  # fmt: skip
        entries = self.p.board.entries()
        if i < self.p.pop.members or not entries:
            pod["hparams"] = self.p.space.sample(rng)
            return pod
        a, b = rng.choice(entries), rng.choice(entries)
        entry = a if a["score"] >= b["score"] else b
        hparams = entry["hparams"]
        if self.p.pop.mutate:
            hparams = self.p.explore(hparams, f"pod:{i}")
        checkpoint = self.p.board.load(entry)
        config = self.p.member_config(name, seed, hparams, checkpoint_step(checkpoint))
        save_atomic(self.p.adopt(checkpoint, config, None),
                    self.p.member_dir(name) / "checkpoint" / "state.pt")  # fmt: skip
        save_config(config, self.p.member_dir(name) / "config.yaml")
        pod.update(hparams=hparams, parent=f"entry-{entry['id']}", start_step=entry["step"],
                   steps=entry["step"])  # fmt: skip
        self.p.log_row("from_leaderboard", name, i, entry["step"], entry["score"],
                       pod["parent"], hparams)  # fmt: skip
        return pod

    def finish(self, state: dict, task: dict, result: dict | None) -> None:
        pod = next(p for p in state["pods"] if p["name"] == task["member"])
        if result is None:  # its process failed: a new pod takes its place
            pod["status"] = "failed"  # its steps do not count: a new pod replaces it
            self.p.log_row("failed", pod["name"], pod["id"], pod["steps"], None, pod["parent"],
                           pod["hparams"])  # fmt: skip
            return
        pod.update(status="finished", score=result["final_eval_mean"],
                   steps=result["total_steps"])  # fmt: skip
        state["steps"] += self.pod_steps
        self.p.log_row("trained", pod["name"], pod["id"], pod["steps"], pod["score"],
                       pod["parent"] or "", pod["hparams"])  # fmt: skip
        path = self.p.member_dir(pod["name"]) / "checkpoint" / "state.pt"
        if self.p.board.qualifies(pod["score"]):
            self.p.board.insert(
                load_plain(path),
                pod["score"],
                {"member": pod["name"], "step": pod["steps"], "hparams": pod["hparams"]},
            )

    def summary(self, state: dict) -> dict:
        entries = self.p.board.entries()
        best = entries[0] if entries else None
        return {
            "scheme": "tournament",
            "pods": len(state["pods"]),
            "failed_pods": sum(p["status"] == "failed" for p in state["pods"]),
            "steps": state["steps"],
            "best_member": best["member"] if best else None,
            "best_score": best["score"] if best else None,
            "best_hparams": best["hparams"] if best else None,
            "leaderboard": [{k: e[k] for k in ("member", "score", "step")} for e in entries],
        }
