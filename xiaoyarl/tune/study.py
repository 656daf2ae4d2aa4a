"""Hyper-parameter search: `xiaoyarl tune ALGO ENV`, with Optuna (or, `--engine pbt`, the same
search space as a generational population).

A study lives in one folder:

    tune.yaml                  the search: base config, search space, settings, the command
    study.db                   Optuna's storage (SQLite), unless `--storage` names a database
    trials/NNNN/               each trial's run folder (config.yaml, recorder.csv, ...)
    trials.csv                 a row per trial: number, state, value, seconds, where a pruned
                               trial stopped and its mean evaluation there, its values
    optimization_history.png   Optuna's plots
    param_importances.png
    best.yaml                  the best trial's settings as a config file, with its provenance

Each trial trains ALGO on ENV for `max_steps` env steps (one process, one thread) with the
values the sampler suggests for the search space's fields (TPE by default; the space is the
populations' YAML, `population/search_space.py`). Its value is the mean of its evaluations over
the budget (`objective: mean`, which rewards learning early and staying there), the last one
(`final`), or, for the time a user waits, minus the seconds to the target (`time`: training and
evaluation, the target confirmed as in any run, the trial stopping there; a seed that misses it
counts ten times its seconds of training and evaluation, and a seed that diverged minus
infinity, below every miss); with `trial_seeds` N, the mean over N
seeds
trained one after another (a search on one seed picks settings that suit that seed:
BENCHMARKS.md, "Tuning"). The pruner reads every evaluation: the median pruner (as RL Zoo's)
stops a trial whose evaluation falls below the median of earlier trials at the same step, from
the sixth trial on and never in a trial's first third; successive halving is the other choice.

Trials run in parallel as worker processes that share the study through its storage (`--jobs N`
on this machine; `--join FOLDER` adds a worker, on another machine too when `--storage` is a
server database such as PostgreSQL, which Optuna's RDB storage speaks). A running trial beats
a heartbeat; a trial whose worker died (SIGKILL, a lost machine) is failed once it has been
silent for twice the heartbeat and retried with the same values, so a study resumes after any
stop (`--resume`). Trials whose config is refused (e.g. a batch larger than the rollout) fail
with the reason in trials.csv and the search goes on.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import io
import math
import os
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from xiaoyarl.agents import ALGORITHMS
from xiaoyarl.agents.settings import agent_of, agent_of_name, config_from_saved
from xiaoyarl.config import Config
from xiaoyarl.config_io import config_from_dict
from xiaoyarl.errors import CheckpointError, ConfigError, XiaoyaError
from xiaoyarl.machine import machine
from xiaoyarl.population.search_space import SearchSpace, field_is_int
from xiaoyarl.presets import CONFIG_DIR
from xiaoyarl.run import Callback, train_agent
from xiaoyarl.train.evaluator import save_figure

if TYPE_CHECKING:
    import optuna

    from xiaoyarl.train.evaluator import EvalResult
    from xiaoyarl.train.loop import TrainLoop

ENGINES = ("optuna", "pbt")
SAMPLERS = ("tpe", "random")
PRUNERS = ("median", "halving", "none")
OBJECTIVES = ("mean", "final", "time")
# objective time: a seed that misses the target counts this many times its seconds (training and
# evaluation; a diverged seed counts minus infinity)
MISSED_TARGET_FACTOR = 10
STUDY_NAME = "xiaoyarl"
# fields that describe how a trial runs, not how it learns: never searched, never in best.yaml
RUN_FIELDS = {
    "algo", "env_id", "seed", "cwd", "max_steps", "stop_at_target", "target_return", "threads",
    "device", "eval_every", "eval_episodes", "confirm_episodes", "checkpoint_every",
    "tensorboard", "wandb", "wandb_project", "on_divergence", "eval_deterministic",
}  # fmt: skip


@dataclass
class TuneSettings:
    """How a search runs (the agents' own settings are the base `Config`)."""

    trials: int = 20  # trials that complete or are pruned, all workers together
    timeout: float | None = None  # seconds a worker starts new trials for
    sampler: str = "tpe"  # tpe | random
    pruner: str = "median"  # median | halving | none
    objective: str = "mean"  # mean (of the evaluations over the budget) | final | time
    jobs: int = 1  # worker processes on this machine
    storage: str | None = None  # a database URL; None: SQLite in the study folder
    heartbeat: int = 30  # seconds between a running trial's heartbeats
    engine: str = "optuna"  # optuna | pbt (a generational population over the same space)
    members: int = 8  # pbt: members of the population
    trial_seeds: int = 1  # seeds each trial trains, one after another (value: their mean)
    sampler_seed: int = 0
    search_space: dict = dataclasses.field(default_factory=dict)
    command: str = ""  # the command that started the study (best.yaml's provenance)

    def validate(self) -> TuneSettings:
        for name, allowed in (("engine", ENGINES), ("sampler", SAMPLERS), ("pruner", PRUNERS),
                              ("objective", OBJECTIVES)):  # fmt: skip
            if getattr(self, name) not in allowed:
                raise ConfigError(f"tune: {name} {getattr(self, name)!r} is not one of "
                                  f"{', '.join(allowed)}.")  # fmt: skip
        for name in ("trials", "jobs", "heartbeat", "members", "trial_seeds"):
            if getattr(self, name) < 1:
                raise ConfigError(f"tune: {name} must be at least 1, got {getattr(self, name)}.")
        if self.timeout is not None and not self.timeout > 0:
            raise ConfigError(f"tune: timeout must be a number of seconds > 0, got {self.timeout}.")
        if not self.search_space:
            raise ConfigError("tune: the search space is empty; give --space FILE.yaml.")
        if self.engine == "pbt" and self.objective == "time":
            raise ConfigError(
                "tune: objective time is the optuna engine's; a population ranks "
                "its members by their evaluations (objective mean)."
            )
        return self


def tuned_algorithms() -> list[str]:
    """The algorithms with a default search space: those whose agent names one under
    `configs/tune/` (`AgentBase.tune_space`, after RL Zoo's samplers)."""
    return sorted(name for name in ALGORITHMS if agent_of_name(name).tune_space is not None)


def default_space(algo: str) -> dict:
    """The default search space of `algo`'s family (`configs/tune/`), or a ConfigError that says
    how to give one."""
    name = agent_of(Config(algo=algo)).tune_space
    if name is None:
        raise ConfigError(
            f"tune: {algo} has no default search space (those of "
            f"{', '.join(tuned_algorithms())} are in {CONFIG_DIR / 'tune'}); write one as "
            f"YAML (config field: {{log_uniform: [lo, hi]}} | {{uniform: [lo, hi]}} | {{choice: "
            f"[...]}} | value) and pass --space FILE.yaml."
        )
    return yaml.safe_load((CONFIG_DIR / "tune" / name).read_text())


def check_space(space: SearchSpace) -> None:
    """Refuse fields that say how a trial runs rather than how it learns."""
    run = sorted(set(space.params) & RUN_FIELDS)
    if run:
        raise ConfigError(f"{space.source}: {', '.join(run)} say(s) how a trial runs, not how "
                          f"it learns; set them on the command line, not in the search "
                          f"space.")  # fmt: skip


# --- the study folder ----------------------------------------------------------------------------
def write_text(path: Path, text: str) -> None:
    """Write `path` atomically: a reader (another worker) never sees half a file. The temporary
    file is this process's own, since workers write the study's files side by side."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def write_settings(folder: Path, config: Config, settings: TuneSettings) -> None:
    """tune.yaml."""
    write_text(
        folder / "tune.yaml",
        yaml.safe_dump(
            {"config": config.to_dict(), "tune": dataclasses.asdict(settings)}, sort_keys=False
        ),
    )


class Study:
    """A study folder (see the module's docstring): its settings, Optuna's study, its reports."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        path = self.folder / "tune.yaml"
        if not path.is_file():
            raise ConfigError(f"{self.folder} holds no study (tune.yaml is missing).")
        saved = yaml.safe_load(path.read_text())
        self.config = config_from_saved(saved["config"], source=str(path))
        self.settings = TuneSettings(**saved["tune"])
        self.space = SearchSpace(self.settings.search_space, source=f"{path}: search_space")

    @staticmethod
    def create(folder: str | Path, config: Config, settings: TuneSettings,
               resume: bool) -> Study:  # fmt: skip
        """The study in `folder`: created, or with `resume` opened (its saved search, with this
        command's trials, timeout and jobs)."""
        folder = Path(folder)
        path = folder / "tune.yaml"
        if resume:
            if not path.is_file():
                raise CheckpointError(f"cannot resume: {folder} holds no study (tune.yaml).")
            study = Study(folder)
            for name in ("trials", "timeout", "jobs"):
                setattr(study.settings, name, getattr(settings, name))
            write_settings(folder, study.config, study.settings.validate())
            return study
        if path.exists():
            raise CheckpointError(f"{folder} already holds a study. Pass --resume to continue "
                                  f"it, or choose another --cwd.")  # fmt: skip
        settings.validate()
        check_space(SearchSpace(settings.search_space, source="search space"))
        if settings.objective == "time":
            check_target(config)
        folder.mkdir(parents=True, exist_ok=True)
        write_settings(folder, config, settings)
        return Study(folder)

    # --- Optuna ---
    def storage_url(self) -> str:
        return self.settings.storage or f"sqlite:///{(self.folder / 'study.db').resolve()}"

    def optuna_study(self, worker: int | None = 0) -> optuna.Study:
        """Optuna's study of this folder (created by the first worker that asks), sampled with
        `sampler_seed + worker` (workers of one study must not draw the same values; None: a
        seed of this process's own)."""
        import optuna
        from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        url = self.storage_url()
        with warnings.catch_warnings():  # Optuna calls heartbeats experimental
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            storage = RDBStorage(
                url, engine_kwargs={"connect_args": {"timeout": 60}} if url.startswith("sqlite")
                else None, heartbeat_interval=self.settings.heartbeat,
                grace_period=2 * self.settings.heartbeat,
                heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=3),
            )  # fmt: skip
        s = self.settings
        seed = s.sampler_seed + (os.getpid() if worker is None else worker)
        if s.sampler == "tpe":
            sampler: optuna.samplers.BaseSampler = optuna.samplers.TPESampler(
                n_startup_trials=5, seed=seed, multivariate=True
            )
        else:
            sampler = optuna.samplers.RandomSampler(seed=seed)
        pruner: optuna.pruners.BasePruner = optuna.pruners.NopPruner()
        if s.pruner == "median":
            warmup = self.config.max_steps // 3  # no trial is pruned in its first third
            pruner = optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=warmup)
        elif s.pruner == "halving":
            pruner = optuna.pruners.SuccessiveHalvingPruner()
        return optuna.create_study(storage=storage, sampler=sampler, pruner=pruner,
                                   study_name=STUDY_NAME, direction="maximize",
                                   load_if_exists=True)  # fmt: skip

    def trial_config(self, values: dict, number: int, k: int = 0) -> Config:
        """The config of trial `number`'s `k`-th seed: the base config with the suggested
        `values`, seed `seed + k`."""
        config = config_from_dict({**self.config.to_dict(), **values}, source=f"trial {number}")
        config.cwd = str(self.folder / "trials" / f"{number:04d}")
        if self.settings.trial_seeds > 1:
            config.seed += k
            config.cwd = str(Path(config.cwd) / f"seed_{config.seed}")
        if self.settings.objective == "time":  # a trial ends at its (confirmed) target
            config.stop_at_target = True
        else:  # a trial trains its whole budget: the objective reads it
            config.stop_at_target = False
            config.confirm_episodes = 0
        config.threads = config.threads or 1  # trials run side by side
        return config

    def objective(self, trial: optuna.Trial) -> float:
        """Train one trial; its value (see the module's docstring)."""
        import optuna

        values = suggest(trial, self.space)
        trial.set_user_attr("run_dir", str(self.folder / "trials" / f"{trial.number:04d}"))
        trial.set_user_attr("worker", os.getpid())
        per_seed, seconds = [], 0.0
        for k in range(self.settings.trial_seeds):  # one seed after another
            config = self.trial_config(values, trial.number, k)
            # the pruner sees the seeds' evaluations one after another on one step axis
            report = Report(trial, offset=k * config.max_steps)
            try:
                summary = train_agent(config, log=None, callbacks=[report])
            except XiaoyaError as e:
                trial.set_user_attr("error", str(e))
                raise
            if summary["stop_reason"] in ("SIGINT", "SIGTERM"):
                raise KeyboardInterrupt  # the worker was asked to stop: the trial is unfinished
            if report.pruned_at is not None:  # where (on the seeds' one step axis), and why
                trial.set_user_attr("pruned_at", k * config.max_steps + report.pruned_at)
                trial.set_user_attr("mean_eval", report.value())
                raise optuna.TrialPruned(f"pruned at step {report.pruned_at}")
            seconds += summary["train_seconds"]
            if not report.means:
                return math.nan  # no evaluation: Optuna counts the trial failed
            per_seed.append(seed_value(self.settings.objective, report, summary))
        trial.set_user_attr("seconds", seconds)
        return sum(per_seed) / len(per_seed)

    def work(self, log: Callable[[str], None] | None = print, worker: int | None = 0) -> None:
        """Run trials in this process until the study has its trials (all workers together) or
        this worker's timeout passes; `worker`: see `optuna_study`."""
        from optuna.study import MaxTrialsCallback
        from optuna.trial import TrialState

        study = self.optuna_study(worker)
        done = (TrialState.COMPLETE, TrialState.PRUNED)

        def say(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
            self._write_csv(study.get_trials(deepcopy=False))  # the table as the study grows
            if log is not None:
                log(trial_line(trial, study, self.settings.objective))

        if sum(t.state in done for t in study.get_trials(deepcopy=False)) >= self.settings.trials:
            return
        enough = MaxTrialsCallback(self.settings.trials, states=done)
        study.optimize(self.objective, n_trials=self.settings.trials,
                       timeout=self.settings.timeout, catch=(XiaoyaError,), gc_after_trial=True,
                       callbacks=[enough, say])  # fmt: skip

    # --- reports ---
    def write_reports(self) -> dict:
        """trials.csv, the plots and best.yaml from the study as it stands; its summary."""
        from optuna.trial import TrialState

        study = self.optuna_study()
        trials = study.get_trials(deepcopy=False)
        self._write_csv(trials)
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        summary = {"folder": str(self.folder), "trials": len(trials),
                   "complete": len(complete),
                   "pruned": sum(t.state == TrialState.PRUNED for t in trials),
                   "failed": sum(t.state == TrialState.FAIL for t in trials),
                   "best_trial": None, "best_value": None, "best_values": None}  # fmt: skip
        if not complete:
            return summary
        self._plot(study, len(complete))
        best = study.best_trial
        values = values_of(best.params, self.space)
        assert best.value is not None, "a complete trial has a value"
        self.write_preset(values, f"trial {best.number} of {len(trials)} ({len(complete)} "
                          f"complete, {summary['pruned']} pruned), objective "
                          f"{self.settings.objective} = {best.value:.2f}")  # fmt: skip
        return summary | {"best_trial": best.number, "best_value": best.value,
                          "best_values": values}  # fmt: skip

    def _write_csv(self, trials: list) -> None:
        names = sorted({name for t in trials for name in t.params})
        text = io.StringIO()
        writer = csv.writer(text)
        writer.writerow(["number", "state", "value", "seconds", "worker", "run_dir", "error",
                         "pruned_at", "mean_eval_when_pruned", *names])  # fmt: skip
        for t in trials:
            values = values_of(t.params, self.space)
            attrs = t.user_attrs
            writer.writerow([t.number, t.state.name, trial_value(t, self.settings.objective),
                             attrs.get("seconds"), attrs.get("worker"), attrs.get("run_dir"),
                             attrs.get("error", ""), attrs.get("pruned_at"), attrs.get("mean_eval"),
                             *(_text(values.get(n)) for n in names)])  # fmt: skip
        write_text(self.folder / "trials.csv", text.getvalue())

    def _plot(self, study: optuna.Study, complete: int) -> None:
        import matplotlib

        matplotlib.use("Agg")
        from optuna.visualization.matplotlib import (
            plot_optimization_history,
            plot_param_importances,
        )

        with warnings.catch_warnings():  # Optuna marks its matplotlib plots experimental
            warnings.simplefilter("ignore")
            ax = plot_optimization_history(study)
            save_figure(ax.figure, self.folder / "optimization_history.png")
            numeric = [n for n, p in self.space.params.items() if p.kind != "fixed"]
            if complete >= 2 and numeric:  # importances compare trials' values
                try:
                    ax = plot_param_importances(study)
                    save_figure(ax.figure, self.folder / "param_importances.png")
                except (RuntimeError, ValueError) as e:  # e.g. every trial the same values
                    print(f"xiaoyarl: no param_importances.png ({e})", file=sys.stderr)

    def write_preset(self, values: dict, found: str) -> Path:
        """best.yaml: the base config's own settings and `values`, as a config file whose
        comments say where it comes from."""
        default, base = Config().to_dict(), self.config.to_dict()
        settings = {k: v for k, v in base.items() if v != default[k] and k not in RUN_FIELDS}
        settings.update(values)
        c = self.config
        header = [
            f"{c.algo} on {c.env_id}: found by `{self.settings.command or 'xiaoyarl tune'}`",
            f"({self.settings.engine}), {c.max_steps:,} env steps per trial, seed {c.seed},",
            f"on {datetime.date.today().isoformat()}, {machine()}: {found}.",
            "A search on one seed can overfit it: check the preset on fresh seeds against the",
            "defaults before relying on it (benchmarks/presets.py).",
            f"  xiaoyarl train {c.algo} {c.env_id} --config best.yaml",
        ]
        text = "".join(f"# {line}\n" for line in header)
        text += yaml.safe_dump(settings, sort_keys=False, default_flow_style=None)
        path = self.folder / "best.yaml"
        write_text(path, text)
        return path


def seed_value(objective: str, report: Report, summary: dict) -> float:
    """One seed's value of a trial (higher is better; see the module's docstring)."""
    if objective == "final":
        return report.means[-1]
    if objective == "time":
        if summary["solved"]:
            return -summary["seconds_to_target"]
        if summary["stop_reason"] == "diverged":
            return -math.inf  # below every miss, however fast it blew up
        return -MISSED_TARGET_FACTOR * summary["train_seconds"]  # evaluation included
    return report.value()


def check_target(config: Config) -> None:
    """`objective: time` needs a target: `target_return`, or the env's own."""
    if config.target_return is not None:
        return
    from xiaoyarl.envs import make_env

    with make_env(config.env_id, backend=config.backend, env_kwargs=config.env_kwargs) as env:
        if env.spec.target_return is None:
            raise ConfigError(
                f"tune: objective time measures the seconds to the target, and "
                f"{config.env_id} has none: give one with --target-return R."
            )


class Report(Callback):
    """Hands each evaluation of a trial's run to Optuna's pruner; stops the run when it prunes."""

    def __init__(self, trial: optuna.Trial, offset: int = 0) -> None:
        self.trial = trial
        self.offset = offset  # env steps of the trial's earlier seeds
        self.means: list[float] = []
        self.pruned_at: int | None = None

    def on_evaluation(self, loop: TrainLoop, result: EvalResult) -> bool | None:
        self.means.append(result.mean)
        self.trial.report(self.value(), self.offset + result.step)
        if self.trial.should_prune():
            self.pruned_at = result.step
            return False
        return None

    def value(self) -> float:
        """The mean of the evaluations so far (what the objective `mean` ends with)."""
        return sum(self.means) / len(self.means)


# --- search spaces in Optuna's terms ------------------------------------------------------------
def _plain_choice(options: list) -> bool:
    return all(o is None or isinstance(o, bool | int | float | str) for o in options)


def _text(value: object) -> str:
    """A value as YAML on one line (how lists and mappings are offered to Optuna)."""
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def suggest(trial: optuna.Trial, space: SearchSpace) -> dict:
    """The trial's value of every field of the search space, suggested by Optuna's sampler."""
    values: dict[str, Any] = {}
    for name, p in space.params.items():
        if p.kind == "fixed":
            values[name] = p.args[0]
        elif p.kind == "choice" and _plain_choice(list(p.args)):
            values[name] = trial.suggest_categorical(name, list(p.args))
        elif p.kind == "choice":  # lists (net_dims) and mappings: offered as their YAML text
            texts = [_text(o) for o in p.args]
            values[name] = p.args[texts.index(trial.suggest_categorical(name, texts))]
        else:
            low, high = p.args
            log = p.kind == "log_uniform"
            if field_is_int(name):
                values[name] = trial.suggest_int(name, math.ceil(low), math.floor(high), log=log)
            else:
                values[name] = trial.suggest_float(name, float(low), float(high), log=log)
    return values


def values_of(params: dict, space: SearchSpace) -> dict:
    """A trial's config values from its Optuna params (YAML texts back to lists, fixed values
    added)."""
    values: dict[str, Any] = {}
    for name, p in space.params.items():
        if p.kind == "fixed":
            values[name] = p.args[0]
        elif name in params and p.kind == "choice" and not _plain_choice(list(p.args)):
            values[name] = p.args[[_text(o) for o in p.args].index(params[name])]
        elif name in params:
            values[name] = params[name]
    return values


def trial_value(trial: optuna.trial.FrozenTrial, objective: str) -> float | None:
    """A finished trial's value in the objective's units: a pruned trial's only where the
    objective is the mean evaluation (Optuna keeps its last report, the mean of its evaluations
    so far, which the `final` and `time` objectives do not measure)."""
    from optuna.trial import TrialState

    if trial.state == TrialState.PRUNED and objective != "mean":
        return None
    return trial.value


def trial_line(trial: optuna.trial.FrozenTrial, study: optuna.Study,
               objective: str) -> str:  # fmt: skip
    """One line about a finished trial, for the console."""
    number = trial_value(trial, objective)
    value = "" if number is None else f" {number:.2f}"
    if "pruned_at" in trial.user_attrs:
        value += (f" at step {trial.user_attrs['pruned_at']:,} (mean evaluation "
                  f"{trial.user_attrs['mean_eval']:.2f})")  # fmt: skip
    try:
        best = f" | best {study.best_value:.2f} (trial {study.best_trial.number})"
    except ValueError:  # no complete trial yet
        best = ""
    error = f" ({trial.user_attrs['error']})" if "error" in trial.user_attrs else ""
    return f"trial {trial.number}: {trial.state.name.lower()}{value}{error}{best}"


# --- running a search ----------------------------------------------------------------------------
def tune(config: Config, settings: TuneSettings, folder: str | Path, resume: bool = False,
         log: Callable[[str], None] | None = print) -> dict:  # fmt: skip
    """Search hyper-parameters of `config` (each trial's base) in the study folder `folder`;
    return the summary (best trial, its value and values). See the module's docstring."""
    study = Study.create(folder, config, settings, resume)
    s, c = study.settings, study.config
    if s.engine == "pbt":
        return _tune_with_population(study, log)
    if log is not None:
        log(f"tune {c.algo} on {c.env_id} | {s.trials} trials of {c.max_steps:,} env steps | "
            f"{s.sampler} sampler, {s.pruner} pruner, objective {s.objective} | {s.jobs} "
            f"worker{'s' if s.jobs > 1 else ''} | folder {study.folder}")  # fmt: skip
    if s.jobs == 1:
        study.work(log)
    else:
        study.optuna_study()  # the storage's tables, made once before the workers open them
        run_workers(study.folder, s.jobs, quiet=log is None)
    summary = study.write_reports()
    if log is not None and summary["best_trial"] is not None:
        log(f"best: trial {summary['best_trial']} ({summary['best_value']:.2f}) with "
            f"{summary['best_values']}; preset {study.folder / 'best.yaml'}")  # fmt: skip
    return summary


def join(folder: str | Path, quiet: bool = False, worker: int | None = None) -> int:
    """`xiaoyarl tune --join FOLDER`: one more worker of an existing study (`worker`: its
    number among the workers `--jobs` started, None for one that joined by itself)."""
    study = Study(folder)
    study.work(None if quiet else print, worker)
    study.write_reports()
    return 0


def run_workers(folder: Path, jobs: int, quiet: bool) -> None:
    """`jobs` worker processes on this machine (`--join FOLDER` each), waited for; stopped with
    this process (SIGTERM: each ends its trial with a checkpoint and marks it failed)."""
    command = [sys.executable, "-m", "xiaoyarl", "tune", "--join", str(folder)]
    command += ["--quiet"] if quiet else []

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM too stops the workers before this process ends

    previous = signal.signal(signal.SIGTERM, stop)
    workers = [subprocess.Popen([*command, "--worker", str(k)]) for k in range(jobs)]
    try:
        codes = [w.wait() for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.terminate()
        for w in workers:
            w.wait()
        signal.signal(signal.SIGTERM, previous)
    failed = [c for c in codes if c != 0]
    if failed:
        raise XiaoyaError(f"{len(failed)} of {jobs} tuning workers failed (exit codes "
                           f"{failed}); the study in {folder} keeps every finished trial: "
                           f"continue with --resume.")  # fmt: skip


def _tune_with_population(study: Study, log: Callable[[str], None] | None) -> dict:
    """`--engine pbt`: the same search space as a generational population of `members` members,
    each training `max_steps` env steps; best.yaml from its best member."""
    from xiaoyarl.population.launch import train_population
    from xiaoyarl.population.schemes import PopulationConfig

    s = study.settings
    pop = PopulationConfig(members=s.members, search_space=s.search_space)
    folder = study.folder / "population"
    config = dataclasses.replace(study.config, cwd=None)
    resume = (folder / "population.yaml").is_file()
    result = train_population(config, pop, folder, resume=resume, log=log)
    summary = {"folder": str(study.folder), "population": str(folder),
               "best_trial": result["best_member"], "best_value": result["best_score"],
               "best_values": None}  # fmt: skip
    if result["best_hparams"]:
        values = {**values_of({}, study.space), **result["best_hparams"]}
        summary["best_values"] = values
        study.write_preset(values, f"member {result['best_member']} of {s.members} "
                           f"(score {result['best_score']})")  # fmt: skip
    return summary
