"""The `xiaoyarl` command line: train, eval, plot, list, record, export, check-env, fuse,
backtest, population, tune."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from xiaoyarl.config import Config
from xiaoyarl.config_io import default_run_dir, field_choices, field_docs
from xiaoyarl.errors import ConfigError, XiaoyaError
from xiaoyarl.presets import (
    ALGO_PRESETS,
    CONFIG_DIR,
    ID_PRESETS,
    PRESETS,
    preset_ids,
    preset_path,
)

if TYPE_CHECKING:
    from xiaoyarl.population.schemes import PopulationConfig

# a trial's budget unless --max-steps says otherwise: a short-budget search
TUNE_MAX_STEPS = 100_000
# `xiaoyarl tune`'s flags that set the search's settings (`TuneSettings`), by their dest
TUNE_FLAGS = ("trials", "timeout", "engine", "sampler", "pruner", "objective", "jobs", "storage",
              "heartbeat", "members", "sampler_seed", "trial_seeds")  # fmt: skip

# Old spellings, accepted (with a note) for one release: (command, old option) -> the option.
RENAMED = {("population", "--out"): "--cwd"}


def build_parser() -> argparse.ArgumentParser:
    """The `xiaoyarl` command line: every command and flag (also the site's CLI reference)."""
    from xiaoyarl import __version__

    parser = argparse.ArgumentParser(
        prog="xiaoyarl", description="Massively parallel deep reinforcement learning."
    )
    parser.add_argument("--version", action="version", version=f"xiaoyarl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train an agent",
                           description="Train ALGO on ENV, or continue a run with --resume DIR "
                           "(its own config.yaml says the algorithm and the env).")  # fmt: skip
    train.add_argument("algo", nargs="?", help="algorithm, e.g. ppo or a2c (see `xiaoyarl list`)")
    train.add_argument(
        "env", nargs="?", help="env id: built-in torch env, gymnasium id, or module:Env-v0"
    )
    _add_run_flags(train)
    _add_field_flag(train, "vector_mode")
    _add_field_flag(train, "runner")
    _add_field_flag(train, "num_workers", type=int, metavar="W")
    _add_field_flag(train, "restart_workers", type=int, metavar="K")
    train.add_argument("--learners", type=int, metavar="K",
                       help="K data-parallel learner processes on this machine (torch's "
                            "launcher; for several machines use torchrun)")  # fmt: skip

    ev = sub.add_parser(
        "eval",
        help="evaluate a run's best policy, or several runs' policies acting as one",
        description="Evaluate a run's best policy. Given several runs of one env, evaluate "
        "their ensemble (continuous actions averaged, discrete ones by majority vote) and, on "
        "the same episodes, each run alone.",
    )
    ev.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run folder(s) to evaluate")
    ev.add_argument(
        "--episodes",
        type=int,
        default=10,
        metavar="K",
        help="episodes to play, as parallel sub-envs (default 10)",
    )
    ev.add_argument("--seed", type=int, default=12_345,
                    help="sub-env i starts from seed + i (default 12345)")  # fmt: skip
    _add_deterministic_flags(ev)

    plot = sub.add_parser(
        "plot",
        help="(re)draw a run's learning_curve.png, or compare several runs on one figure",
        description="Redraw a run's learning_curve.png. Given several runs (seeds, algorithms), "
        "draw them on one figure: evaluation returns (mean and std band) above, the mean "
        "returns of the training episodes below, each run labelled by its folder name.",
    )
    plot.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run folder(s) to draw")
    plot.add_argument("--out", metavar="FILE",
                      help="image file (default: RUN_DIR/learning_curve.png for one run, "
                           "comparison.png for several)")  # fmt: skip

    rec = sub.add_parser("record", help="write a video (GIF or MP4) of a run's best policy")
    rec.add_argument("run_dir", help="the run folder whose best policy (actor.pt) plays")
    rec.add_argument("--episodes", type=int, default=1, metavar="K",
                     help="episodes to film, one after another (default 1)")  # fmt: skip
    rec.add_argument("--out", metavar="FILE", help="a .gif or .mp4 (default RUN_DIR/policy.gif)")
    rec.add_argument("--seed", type=int, default=0, help="episode i starts from seed + i")
    rec.add_argument("--fps", type=int, help="frames per second (default: the env's)")
    _add_deterministic_flags(rec)

    exp = sub.add_parser("export", help="export a run's best policy as ONNX or TorchScript")
    exp.add_argument("run_dir", help="the run folder whose best policy (actor.pt) to export")
    exp.add_argument("--format", choices=["onnx", "torchscript"], default="onnx",
                     help="onnx (default; runs without PyTorch) or torchscript")  # fmt: skip
    exp.add_argument("--out", metavar="FILE", help="default RUN_DIR/policy.onnx (.torchscript.pt)")

    chk = sub.add_parser("check-env", help="check an env against xiaoyarl's env contract")
    chk.add_argument("env_id", help="built-in torch env, gymnasium id, or module:Env-v0")
    chk.add_argument("--backend", choices=field_choices()["backend"], default="auto",
                     help="the env backend to check (default auto, as train)")  # fmt: skip
    chk.add_argument("--num-envs", type=int, default=4, metavar="N",
                     help="sub-envs of the vectorized env checked (default 4)")  # fmt: skip
    chk.add_argument("--seed", type=int, default=0, help="seed of the checked episodes (0)")
    chk.add_argument("--env-kwargs", metavar="YAML",
                     help="the env's keyword arguments, as a run's env_kwargs, e.g. "
                          "'{obs_keys: [image, direction]}'")  # fmt: skip
    chk.add_argument("--steps", type=int, metavar="N",
                     help="random steps (default: the time limit + 5, at most 2,000)")  # fmt: skip

    bt = sub.add_parser("backtest", help="backtest a StockTrading-v0 run on its held-out period")
    bt.add_argument("run_dir", help="a StockTrading-v0 run folder")
    bt.add_argument("--data", metavar="FILE", help="another market panel (CSV or Parquet)")
    bt.add_argument("--start", metavar="DATE", help="first day (default: the backtest period's)")
    bt.add_argument("--end", metavar="DATE", help="last day (default: the data's last)")

    fuse = sub.add_parser("fuse", help="average the agents of several runs into a new run")
    fuse.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                      help="runs of one algorithm and env, whose agents to average")  # fmt: skip
    fuse.add_argument("--out", required=True, metavar="RUN_DIR", help="the new run folder")
    fuse.add_argument("--weights", type=float, nargs="+", metavar="W",
                      help="one weight per run (default: equal)")  # fmt: skip

    pop = sub.add_parser(
        "population", help="train a population (generational evolution or a tournament)",
        description="Train a population of ALGO agents on ENV: generational evolution or "
        "tournament-based ensemble training. On one machine the slots are launched for you; "
        "under torchrun every process is a slot (see the README for several machines).",
    )  # fmt: skip
    pop.add_argument("algo", nargs="?", help="algorithm, e.g. ppo (see `xiaoyarl list`)")
    pop.add_argument("env", nargs="?", help="env id, as for `xiaoyarl train`")
    _add_run_flags(pop, kind="population")
    pop.add_argument(
        "--members",
        type=int,
        default=8,
        metavar="M",
        help="members (generational) or pods training at once (tournament)",
    )
    pop.add_argument(
        "--scheme",
        choices=["generational", "tournament"],
        default="generational",
        help="generational evolution (default) or tournament-based ensembles",
    )
    pop.add_argument(
        "--population-backend",
        choices=["process", "vmap"],
        help="process: a process per member (default); vmap: members of one shape (any "
        "algorithm) trained together as one stacked model in one process",
    )
    pop.add_argument(
        "--search",
        metavar="FILE.yaml",
        help="search space (config field: "
        "{log_uniform: [lo, hi]} | {uniform: [lo, hi]} | {choice: [..]} | value)",
    )
    pop.add_argument(
        "--workers",
        type=int,
        metavar="W",
        help="slots (processes) on this machine (default min(members, CPUs))",
    )
    pop.add_argument(
        "--generation-steps",
        type=_int_like,
        metavar="N",
        help="env steps per generation (default max-steps / 10)",
    )
    pop.add_argument(
        "--generation-seconds",
        type=float,
        metavar="S",
        help="or seconds of training per generation",
    )
    pop.add_argument(
        "--select-fraction",
        type=float,
        metavar="F",
        help="bottom fraction replaced by the top each generation (default 0.25; "
        "0: a static population)",
    )
    pop.add_argument(
        "--fuse-top",
        type=int,
        metavar="K",
        help="replaced members start from the fusion of the top K",
    )
    pop.add_argument(
        "--perturb-factors",
        type=float,
        nargs="+",
        metavar="F",
        help="explore: a copied value times one of these (default 0.8 1.2)",
    )
    pop.add_argument(
        "--resample-probability",
        type=float,
        metavar="P",
        help="explore: draw a copied value afresh from the search space instead (default 0.25)",
    )
    pop.add_argument("--leaderboard-size", type=int, metavar="L", help="default 4")
    pop.add_argument(
        "--pod-steps",
        type=_int_like,
        metavar="T",
        help="tournament: env steps per pod (default max-steps / 4)",
    )
    pop.add_argument("--join", metavar="DIR", help=argparse.SUPPRESS)  # a slot (the launcher's)

    tune = sub.add_parser(
        "tune", help="search hyper-parameters (Optuna, or a population) for a preset",
        description="Search hyper-parameters of ALGO on ENV with Optuna (TPE, pruned on each "
        "trial's evaluations) or as a population (--engine pbt). Writes trials.csv, plots and "
        "best.yaml (a preset: `xiaoyarl train ALGO ENV --config best.yaml`) into the study "
        "folder. Trials start, as `xiaoyarl train` does, from the task preset where one exists "
        "(--no-preset: the library's defaults), with the searched fields set by the search.",
    )  # fmt: skip
    tune.add_argument("algo", nargs="?", help="algorithm, e.g. ppo (see `xiaoyarl list`)")
    tune.add_argument("env", nargs="?", help="env id, as for `xiaoyarl train`")
    _add_run_flags(tune, kind="tune")
    tune.add_argument("--trials", type=int, metavar="N",
                      help="trials that complete or are pruned, all workers together (default "
                           "20)")  # fmt: skip
    tune.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="seconds each worker starts new trials for (default: no limit)",
    )
    tune.add_argument("--space", metavar="FILE.yaml",
                      help="search space (config field: {log_uniform: [lo, hi]} | {uniform: "
                           "[lo, hi]} | {choice: [..]} | value); default: the algorithm "
                           "family's (xiaoyarl/configs/tune/)")  # fmt: skip
    tune.add_argument("--engine", choices=["optuna", "pbt"],
                      help="optuna (default) or pbt: the same space as a generational "
                           "population of --members members")  # fmt: skip
    tune.add_argument("--sampler", choices=["tpe", "random"], help="Optuna's sampler (tpe)")
    tune.add_argument(
        "--pruner",
        choices=["median", "halving", "none"],
        help="stops trials that fall behind on their evaluations (median)",
    )
    tune.add_argument("--objective", choices=["mean", "final", "time"],
                      help="a trial's value: the mean of its evaluations (default; rewards "
                           "learning early), the last one, or the seconds to the target (time: "
                           "training and evaluation; trials stop at the target)")  # fmt: skip
    tune.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="worker processes on this machine sharing the study (default 1)",
    )
    tune.add_argument(
        "--storage",
        metavar="URL",
        help="the study's database (default: SQLite in the folder); a server "
        "database (postgresql://...) lets workers on other machines --join",
    )
    tune.add_argument("--heartbeat", type=int, metavar="S",
                      help="seconds between a running trial's heartbeats; a trial silent for "
                           "twice that is failed and retried (default 30)")  # fmt: skip
    tune.add_argument("--members", type=int, metavar="M", help="--engine pbt: members (8)")
    tune.add_argument("--sampler-seed", type=int, metavar="S", help="the sampler's seed (0)")
    tune.add_argument("--trial-seeds", type=int, metavar="N",
                      help="seeds each trial trains, one after another (--seed, --seed + 1, "
                           "...); its value is their mean (default 1)")  # fmt: skip
    tune.add_argument(
        "--join",
        metavar="DIR",
        help="be one more worker of the study in DIR (this or another machine)",
    )
    tune.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # its number (--jobs')

    ls = sub.add_parser("list", help="algorithms and built-in envs")
    ls.add_argument("--fields", action="store_true", help="also list every Config field")

    for command, old in RENAMED:  # still accepted, no longer offered in --help
        sub.choices[command].add_argument(old, dest=_old_dest(old), help=argparse.SUPPRESS)
    return parser


def _add_run_flags(parser: argparse.ArgumentParser, kind: str = "run") -> None:
    """The flags of every command that starts runs (`train`, `population`, `tune`), declared here
    once so that their spelling, type and default cannot drift apart. Where a flag means
    something else for a population or a study (the folder is theirs; a value goes to every
    member or trial), its help says so."""
    population = kind != "run"

    def says(run: str, members: str, trials: str | None = None) -> str:
        if kind == "tune":
            return trials or members.replace("member", "trial")
        return members if population else run

    parser.add_argument("--cwd", metavar="DIR",
                        help=says("run folder (default runs/ENV_ALGO_SEED)",
                                  "population folder; each member's run folder is "
                                  "DIR/members/NAME (default runs/pop_ENV_ALGO)",
                                  "study folder; each trial's run folder is DIR/trials/NNNN "
                                  "(default runs/tune_ENV_ALGO)"))  # fmt: skip
    parser.add_argument("--resume", nargs="?", const=True, default=False, metavar="DIR",
                        help=says("continue from a run's checkpoint (this run's folder, or DIR)",
                                  "continue the population in its folder (--cwd's, or DIR) with "
                                  "its saved settings; only --workers may change",
                                  "continue the study in its folder (--cwd's, or DIR) with "
                                  "its saved search; --trials, --timeout, --jobs may "
                                  "change"))  # fmt: skip
    parser.add_argument("--no-preset", action="store_true",
                        help=says("start from the library's defaults even where ALGO on ENV has "
                                  "a task preset (`xiaoyarl list` shows them)",
                                  "start every member from the library's defaults even where "
                                  "ALGO on ENV has a task preset",
                                  "start every trial from the library's defaults even where "
                                  "ALGO on ENV has a task preset"))  # fmt: skip
    parser.add_argument("--config", metavar="FILE.yaml",
                        help=says("start from this config file",
                                  "start every member from this config file"))  # fmt: skip
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help=says("set any Config field, e.g. --set gamma=0.98 (repeatable)",
                                  "set a Config field of every member, e.g. --set gamma=0.98 "
                                  "(repeatable)"))  # fmt: skip
    parser.add_argument("--backend", choices=field_choices()["backend"],
                        help=says("env backend (default auto: torch-native where one exists)",
                                  "every member's env backend (default auto: torch-native "
                                  "where one exists)"))  # fmt: skip
    parser.add_argument("--device", metavar="auto|cpu|cuda|cuda:N",
                        help=says("default auto: cuda when available",
                                  "every member's device (default auto)"))  # fmt: skip
    parser.add_argument("--threads", type=int, metavar="N",
                        help=says("torch CPU threads (default: automatic, 1)",
                                  "torch CPU threads per member process (default 1); vmap: of "
                                  "the one process (default: every core)"))  # fmt: skip
    parser.add_argument("--seed", type=int, metavar="S",
                        help=says("derives every generator of the run (default 0)",
                                  "population seed (default 0; member i: S*1000+i)",
                                  "every trial's seed (default 0; with --trial-seeds N: S, "
                                  "S+1, ...); --engine pbt: the population's (member i: "
                                  "S*1000+i)"))  # fmt: skip
    parser.add_argument("--num-envs", type=int, metavar="N",
                        help=says("sub-envs (per worker)", "sub-envs of each member"))  # fmt: skip
    parser.add_argument("--max-steps", type=_int_like, metavar="N",
                        help=says("env-step budget", "env-step budget of each member",
                                  f"env-step budget of each trial (default "
                                  f"{TUNE_MAX_STEPS:,})"))  # fmt: skip
    parser.add_argument("--target-return", type=_target, metavar="R|none",
                        help=says("return that counts as solved (default: the env's); 'none': "
                                  "train for the whole --max-steps",
                                  "return drawn on population.png; a tournament stops once its "
                                  "best member reaches it (default, or 'none': train the whole "
                                  "budget)",
                                  "the target of --objective time, where each trial stops "
                                  "(default: the env's); the other objectives train every "
                                  "trial's whole budget"))  # fmt: skip
    parser.add_argument("--eval-every", type=_int_like, metavar="N",
                        help="env steps between evaluations")  # fmt: skip
    parser.add_argument("--eval-episodes", type=int, metavar="K", help="episodes per evaluation")
    parser.add_argument("--summary-json", metavar="FILE",
                        help=says("write the run summary as JSON",
                                  "write the population's summary as JSON"))  # fmt: skip
    parser.add_argument("--quiet", action="store_true", help="print only errors")


def _add_field_flag(parser: argparse.ArgumentParser, name: str, **kwargs: Any) -> None:
    """`--name` (dashed) for the Config field `name`, with the field's help and allowed values;
    `kwargs`: `add_argument`'s other keywords (each of its own type)."""
    parser.add_argument(f"--{name.replace('_', '-')}", help=field_docs()[name],
                        choices=field_choices().get(name), **kwargs)  # fmt: skip


def _old_dest(option: str) -> str:
    """Where argparse keeps an old spelling's value: `--out` -> `old_out`."""
    return "old_" + option.lstrip("-").replace("-", "_")


def _old_spellings(args: argparse.Namespace) -> None:
    """Move the value of an old spelling (`RENAMED`) to the option it now is, with a note."""
    for (command, old), new in RENAMED.items():
        value = getattr(args, _old_dest(old), None)
        if args.command != command or value is None:
            continue
        dest = new.lstrip("-").replace("-", "_")
        if getattr(args, dest) is not None:
            raise ConfigError(f"{old} {value} and {new} {getattr(args, dest)}: {old} is the old "
                              f"spelling of {new}; give {new} only.")  # fmt: skip
        print(f"xiaoyarl: {old} is deprecated and will be removed in the next release: use {new}",
              file=sys.stderr)  # fmt: skip
        setattr(args, dest, value)


def _target(text: str) -> float | str:
    """A target return, or 'none' (train for the whole budget)."""
    if text.strip().lower() == "none":
        return "none"
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'none', got {text}") from None


def _int_like(text: str) -> int:
    """Integers written as 100000, 100_000 or 1e5."""
    value = float(text.replace("_", ""))
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"expected an integer, got {text}")
    return int(value)


def _train(args: argparse.Namespace) -> int:
    from xiaoyarl.run import train_agent
    from xiaoyarl.scale import distributed

    if args.learners is not None and args.learners < 1:
        raise ConfigError(f"--learners {args.learners}: give a positive number of learners.")
    _resume_folder(args)
    if not (args.algo and args.env) and not (args.resume and args.cwd):
        raise ConfigError("name the algorithm and the env, e.g. `xiaoyarl train ppo "
                          "CartPole-v1`, or continue a run with --resume DIR.")  # fmt: skip
    if not args.algo and not (Path(args.cwd) / "config.yaml").is_file():
        raise ConfigError(f"--resume {args.cwd}: no run there (its config.yaml is missing); name "
                          f"the algorithm and the env to start one.")  # fmt: skip
    config = _start_config(args)  # its options' errors said once, before any learner starts
    if (args.learners or 1) > 1 and distributed.rank_from_environment() is None:
        return distributed.launch_local(args.argv, args.learners)  # each rank runs this command
    summary = train_agent(config, resume=bool(args.resume), log=None if args.quiet else print)
    if summary["rank"] != 0:  # several learners: rank 0 reports for all
        return 0
    if args.summary_json:
        path = Path(args.summary_json)
        path.parent.mkdir(parents=True, exist_ok=True)
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                 for k, v in summary.items()}  # fmt: skip
        path.write_text(json.dumps(clean, indent=2) + "\n")
    if not args.quiet:
        result = "solved" if summary["solved"] else "not solved"
        print(
            f"{result}: final eval {summary['final_eval_mean']:.2f} ± "
            f"{summary['final_eval_std']:.2f} after {summary['total_steps']:,} steps in "
            f"{summary['train_seconds']:.1f} s; run folder {summary['run_dir']}"
        )
    return {"SIGINT": 130, "SIGTERM": 143}.get(summary["stop_reason"], 0)


def _start_config(args: argparse.Namespace, skip: tuple[str, ...] = ()) -> Config:
    """What a command that starts runs (train, population, tune) begins from: --config's file;
    with --resume, the run's own config.yaml; else the task preset of ALGO on ENV (said, unless
    --quiet); else the library's defaults. Then the command line (`_given`, `skip` left out),
    which overrides it."""
    from xiaoyarl.agents.settings import command_config

    given = _given(args, skip)
    asked = command_config(None, given, args.set)  # what the command line alone says
    kind, source = ("file", args.config) if args.config else ("defaults", None)
    if source is None and args.resume:
        saved = Path(asked.cwd or default_run_dir(asked)) / "config.yaml"
        kind, source = "run", saved if saved.is_file() else None
    elif source is None and not args.no_preset:
        kind, source = "preset", preset_path(asked.algo, asked.env_id, asked.env_kwargs)
    config = command_config(source, given, args.set, saved=kind == "run")
    if kind == "preset" and source is not None and not args.quiet:
        general = source.relative_to(CONFIG_DIR).as_posix() in ALGO_PRESETS.values()
        print(f"settings: the {'algorithm' if general else 'task'} preset {source} for "
              f"{config.algo} on {config.env_id}, then the command line (--no-preset: the "
              f"library's defaults)")  # fmt: skip
    elif kind == "file" and not args.quiet:
        print(f"settings: {args.config}, then the command line")
    return config


def _resume_folder(args: argparse.Namespace) -> None:
    """`--resume DIR` names the folder, as --cwd does (both may name the same one)."""
    if isinstance(args.resume, str):
        if args.cwd is not None and Path(args.cwd) != Path(args.resume):
            raise ConfigError(f"--resume {args.resume} and --cwd {args.cwd} name two folders; "
                              f"give one of them.")  # fmt: skip
        args.cwd = args.resume


def _given(args: argparse.Namespace, skip: tuple[str, ...] = ()) -> dict[str, object]:
    """What the command line says, field by field: algorithm, env, each option named as a Config
    field (`--num-envs` sets num_envs) but those in `skip`, and the target return (`--set` pairs
    come after these, and may not name the same field)."""
    given: dict[str, object] = {"algo": args.algo.lower(), "env_id": args.env} if args.algo else {}
    by_set = {pair.split("=", 1)[0].strip(): pair for pair in args.set}
    for name in Config.field_names():
        value = getattr(args, name, None)
        if value is not None and name not in ("algo", *skip):
            if name in by_set:  # one would silently win over the other
                flag = f"--{name.replace('_', '-')}"
                raise ConfigError(f"{flag} {value} and --set {by_set[name]} both set {name}; "
                                  f"give one of them.")  # fmt: skip
            given[name] = value
    if args.target_return == "none":
        given.update(target_return=None, stop_at_target=False)
    elif args.target_return is not None:  # a number: stop there (what --set may still change)
        given.update(target_return=args.target_return, stop_at_target=True)
    return given


def _add_deterministic_flags(parser: argparse.ArgumentParser) -> None:
    """`--deterministic` / `--stochastic`: the policy's best actions or samples (default: as the
    run evaluated, its `eval_deterministic`)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--deterministic",
        action="store_true",
        default=None,
        help="the policy's best actions (default: as the run evaluated)",
    )
    group.add_argument(
        "--stochastic",
        action="store_false",
        dest="deterministic",
        default=None,
        help="actions sampled as the agent explored (deterministic=False)",
    )


def _eval(args: argparse.Namespace) -> int:
    from xiaoyarl.policy import evaluate

    runs = args.run_dirs
    result = evaluate(runs if len(runs) > 1 else runs[0], episodes=args.episodes, seed=args.seed,
                      deterministic=args.deterministic)  # fmt: skip
    what = f" of the ensemble of {len(runs)} runs" if len(runs) > 1 else ""
    episodes = f"{args.episodes} episode{'s' if args.episodes != 1 else ''}"
    print(f"eval{what} over {episodes}: {result['mean']:.2f} ± {result['std']:.2f}")
    if len(runs) > 1:  # each member on the same episodes, for comparison
        for run_dir in runs:
            alone = evaluate(run_dir, args.episodes, args.seed, args.deterministic)
            print(f"  {run_dir} alone: {alone['mean']:.2f} ± {alone['std']:.2f}")
    return 0


def _plot(args: argparse.Namespace) -> int:
    from xiaoyarl.train.evaluator import plot_learning_curve
    from xiaoyarl.train.plots import plot_runs

    runs = [Path(run) for run in args.run_dirs]
    for run_dir in runs:
        if not (run_dir / "recorder.csv").is_file():
            raise XiaoyaError(
                f"{run_dir} has no recorder.csv: it is not a xiaoyarl run folder yet."
            )
    if len(runs) > 1:
        print(plot_runs(runs, args.out or "comparison.png"))
        return 0
    run_dir = runs[0]
    title = target = None
    if not (run_dir / "plot.json").is_file() and (run_dir / "config.yaml").is_file():
        from xiaoyarl.agents.settings import load_saved_config

        title, target = _plot_info_of_old_run(load_saved_config(run_dir / "config.yaml"))
    print(plot_learning_curve(run_dir, title, target, out=args.out))
    return 0


def _plot_info_of_old_run(config: Config) -> tuple[str, float | None]:
    """Title and target of a run written before runs kept `plot.json`, as training drew them."""
    from xiaoyarl.envs import is_torch_native, make_env
    from xiaoyarl.train.start import run_title

    backend = "torch" if is_torch_native(config.env_id, config.backend) else config.backend
    title = run_title(config, "gymnasium" if backend == "auto" else backend)
    target = config.target_return
    if target is None:
        with make_env(config.env_id, 1, "cpu", config.backend,
                      env_kwargs=config.env_kwargs) as env:  # fmt: skip
            target = env.spec.target_return
    return title, target


class _ListedEnv(Protocol):
    """What `xiaoyarl list` shows of a registered env class: class attributes that every one
    states (`TorchVecEnv`'s subclasses and `StockTradingEnv`), which `VecEnv` does not."""

    if_discrete: bool
    max_step: int
    target_return: float | None


def _list(args: argparse.Namespace) -> int:

    from xiaoyarl.agents import ALGORITHMS
    from xiaoyarl.envs import TORCH_ENVS
    from xiaoyarl.envs.multi import MULTI_AGENT_ENVS

    print("algorithms (continuous / discrete variants):")
    for name, (cont, disc) in ALGORITHMS.items():
        kinds = [k for k, c in (("continuous", cont), ("discrete", disc)) if c is not None]
        print(f"  {name:14s} {' / '.join(kinds)}")
    for title, envs in (
        ("built-in torch-native envs (any gymnasium id also works)", TORCH_ENVS),
        ("built-in multi-agent envs (any PettingZoo parallel env too, as module:env_fn)",
         MULTI_AGENT_ENVS),
    ):  # fmt: skip
        print(f"{title}:")
        for name, registered in envs.items():
            cls = cast(_ListedEnv, registered)
            kind = "discrete" if cls.if_discrete else "continuous"
            target = "none" if cls.target_return is None else f"{cls.target_return:g}"
            print(f"  {name:26s} {kind:10s} max_step {cls.max_step:4d}  target {target}")
    print("task presets (settings `xiaoyarl train ALGO ENV` starts from; --no-preset: none):")
    for task in dict.fromkeys(task for _, task in PRESETS):
        print(f"  {task}: {', '.join(preset_ids(task))}")
        for (algo, of_task), name in PRESETS.items():
            if of_task == task:
                print(f"    {algo:8s} {CONFIG_DIR.name}/{name}")
                for (id_algo, env_id, id_task), own in ID_PRESETS.items():
                    if (id_algo, id_task) == (algo, task):
                        print(f"    {'':8s} on {env_id}: {CONFIG_DIR.name}/{own}")
    print("  any other task:")
    for algo, name in ALGO_PRESETS.items():
        print(f"    {algo:8s} {CONFIG_DIR.name}/{name}")
    if args.fields:
        _list_fields()
    return 0


def _record(args: argparse.Namespace) -> int:
    from xiaoyarl.record import record_video

    path = record_video(args.run_dir, args.out, episodes=args.episodes, seed=args.seed,
                        fps=args.fps, deterministic=args.deterministic)  # fmt: skip
    print(path)
    return 0


def _export(args: argparse.Namespace) -> int:
    from xiaoyarl.export import export_policy

    print(export_policy(args.run_dir, args.out, fmt=args.format))
    return 0


def _backtest(args: argparse.Namespace) -> int:
    from xiaoyarl.finance.backtest import backtest, format_report

    print(format_report(backtest(args.run_dir, args.data, args.start, args.end)))
    return 0


POPULATION_FIELDS = ("members", "scheme", "workers", "generation_steps", "generation_seconds",
                     "select_fraction", "fuse_top", "leaderboard_size", "pod_steps",
                     "perturb_factors", "resample_probability")  # fmt: skip


def _population_settings(args: argparse.Namespace) -> tuple[Config, PopulationConfig, Path]:
    """The members' config, the population's settings and its folder, from the command line
    (with --resume: from the population folder, where only --workers may change)."""
    from xiaoyarl.population.schemes import Population, PopulationConfig
    from xiaoyarl.population.search_space import SearchSpace

    _resume_folder(args)
    if args.resume and args.cwd is None and not (args.algo and args.env):
        raise ConfigError("--resume: name the population folder, as --resume DIR or --cwd DIR.")
    if not args.resume and not (args.algo and args.env):
        raise ConfigError(
            "name the algorithm and the env, e.g. `xiaoyarl population ppo "
            "Pendulum-v1 --members 8`, or continue one with --resume DIR."
        )
    env = (args.env or "").replace(":", "_").replace("/", "_")
    folder = Path(args.cwd or f"runs/pop_{env}_{(args.algo or '').lower()}")
    if args.resume:
        if not (folder / "population.yaml").is_file():
            raise ConfigError(f"--resume {folder}: no population there.")
        saved = Population(folder)
        if args.workers is not None:
            saved.pop.workers = args.workers
        return saved.config, saved.pop, folder
    config = _start_config(args, skip=("cwd",))  # the folder is the population's, not config.cwd
    pop = PopulationConfig()
    for name in POPULATION_FIELDS:
        if getattr(args, name) is not None:
            setattr(pop, name, getattr(args, name))
    pop.perturb_factors = tuple(pop.perturb_factors)
    if args.population_backend is not None:
        pop.backend = args.population_backend
    if args.search:
        pop.search_space = SearchSpace.load(args.search).spec
    if pop.backend == "vmap" and not args.config:
        _constant_preset_schedules(config, args)
    return config, pop, folder


def _constant_preset_schedules(config: Config, args: argparse.Namespace) -> None:
    """A vmapped population keeps each member's values constant: the schedules a preset set
    (PQN's decaying learning rate) give way, and the command says so; one asked for with --set
    is kept, and refused with the reason."""
    asked = {pair.split("=", 1)[0].strip() for pair in args.set or []}
    for field in fields(config):
        value = getattr(config, field.name)
        if field.name.endswith("_schedule") and value != "constant" and field.name not in asked:
            setattr(config, field.name, "constant")
            if not args.quiet:
                print(f"settings: {field.name} constant, not the preset's {value}: a vmapped "
                      f"population keeps each member's values constant")  # fmt: skip


def _population(args: argparse.Namespace) -> int:
    from xiaoyarl.population.launch import join, train_population
    from xiaoyarl.population.slots import under_torchrun

    if args.join:
        return join(args.join, args.quiet)
    log = None if args.quiet else print
    config, pop, out = _population_settings(args)
    summary = train_population(config, pop, out, resume=bool(args.resume), log=log)
    if under_torchrun():
        return 0
    if args.summary_json:
        path = Path(args.summary_json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(summary, indent=2) + "\n")
    if log is not None:
        best = summary["best_score"]
        print(
            f"population {'done' if summary['done'] else 'stopped'}: best "
            f"{summary['best_member']} ({best if best is None else round(best, 2)}) with "
            f"{summary['best_hparams']}; folder {out} (population.csv, population.png)"
        )
    return 0 if summary["done"] else 130


def _tune(args: argparse.Namespace) -> int:
    from xiaoyarl.population.search_space import SearchSpace
    from xiaoyarl.tune.study import Study, TuneSettings, default_space, join, tune

    if args.join:
        return join(args.join, args.quiet, args.worker)
    _resume_folder(args)
    if args.resume and args.cwd is None and not (args.algo and args.env):
        raise ConfigError("--resume: name the study folder, as --resume DIR or --cwd DIR.")
    if not args.resume and not (args.algo and args.env):
        raise ConfigError("name the algorithm and the env, e.g. `xiaoyarl tune ppo Pendulum-v1 "
                          "--trials 20`, or continue a study with --resume DIR.")  # fmt: skip
    env = (args.env or "").replace(":", "_").replace("/", "_")
    folder = Path(args.cwd or f"runs/tune_{env}_{(args.algo or '').lower()}")
    if args.resume:
        saved = Study(folder) if (folder / "tune.yaml").is_file() else None
        if saved is None:
            raise ConfigError(f"--resume {folder}: no study there (tune.yaml is missing).")
        config, settings = saved.config, saved.settings
    else:
        config = _start_config(args, skip=("cwd",))  # the folder is the study's
        if args.max_steps is None and not any(s.startswith("max_steps=") for s in args.set):
            config.max_steps = TUNE_MAX_STEPS  # a short budget per trial, unless told
        space = SearchSpace.load(args.space) if args.space else None
        settings = TuneSettings(search_space=space.spec if space else default_space(config.algo),
                                command="xiaoyarl " + shlex.join(args.argv))  # fmt: skip
    for name in TUNE_FLAGS:
        if getattr(args, name) is not None:
            setattr(settings, name, getattr(args, name))
    summary = tune(config, settings, folder, resume=bool(args.resume),
                   log=None if args.quiet else print)  # fmt: skip
    if args.summary_json:
        path = Path(args.summary_json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


def _fuse(args: argparse.Namespace) -> int:
    from xiaoyarl.scale.fusion import fuse_runs

    out = fuse_runs(args.run_dirs, args.out, args.weights)
    print(f"fused {len(args.run_dirs)} runs into {out} (evaluate it with `xiaoyarl eval {out}`, "
          f"continue training with `--resume {out}`)")  # fmt: skip
    return 0


def _check_env(args: argparse.Namespace) -> int:
    """Print the checker's report; exit 1 when it found errors."""
    from xiaoyarl.envs.check import check_env, format_report

    env_kwargs = None
    if args.env_kwargs is not None:
        import yaml

        env_kwargs = yaml.safe_load(args.env_kwargs)
        if not isinstance(env_kwargs, dict):
            raise ConfigError(f"--env-kwargs takes a mapping such as '{{obs_keys: [image]}}', "
                              f"got {args.env_kwargs!r}.")  # fmt: skip
    problems = check_env(args.env_id, backend=args.backend, num_envs=args.num_envs,
                         seed=args.seed, steps=args.steps, env_kwargs=env_kwargs)  # fmt: skip
    print(format_report(args.env_id, problems))
    return 1 if any(p.severity == "error" for p in problems) else 0


@dataclass(frozen=True)
class FieldRow:
    """One Config field as `xiaoyarl list --fields` and the site's Config reference show it."""

    name: str
    default: Any
    help: str
    choices: tuple | None  # the allowed values, where a fixed set
    readers: tuple[str, ...]  # the algorithms that read it; () for a field every run reads
    automatic: tuple[str, ...]  # for a null default: `algo, algo: value` lines, what it becomes


def config_field_rows() -> list[FieldRow]:
    """Every Config field: default, help, allowed values, which algorithms read it (for
    algorithm-specific fields) and, for a field whose null default is chosen per algorithm,
    backend and device, what it becomes (`_automatic_values`)."""
    import dataclasses

    from xiaoyarl.agents import ALGORITHMS
    from xiaoyarl.agents.settings import fields_read

    readers: dict[str, list[str]] = {}
    for algo in ALGORITHMS:
        for field in fields_read(algo):
            readers.setdefault(field, []).append(algo)
    docs, choices = field_docs(), field_choices()
    automatic = _automatic_values(readers)
    return [FieldRow(f.name, f.default_factory() if callable(f.default_factory) else f.default,
                     docs[f.name], choices.get(f.name), tuple(readers.get(f.name, ())),
                     tuple(automatic.get(f.name, ())))
            for f in dataclasses.fields(Config)]  # fmt: skip


def _list_fields() -> None:
    """`xiaoyarl list --fields`: `config_field_rows` as text."""
    print("config fields (--set name=value; default, {allowed values}, then what it does):")
    print("  (null: chosen per algorithm, backend and device, as listed under the field, with the")
    print("  other automatic fields left null; torch-native includes Playground's JAX tasks)")
    for row in config_field_rows():
        who = f" [{', '.join(row.readers)}]" if row.readers else ""
        doc = row.help
        if row.choices:
            doc = f"{{{', '.join(map(str, row.choices))}}} {doc}"  # as argparse shows them
        if row.automatic:  # what null gives, listed below
            doc = f"{doc}{who}; null gives:"
            who = ""
        print(f"  {row.name:18s} {row.default!r:12s} {doc}{who}")
        for line in row.automatic:
            print(f"      {line}")


# The settings an automatic default may depend on: (batched env, device type) -> label.
_SETTINGS = {(True, "cpu"): "torch-native, CPU", (True, "cuda"): "torch-native, GPU",
             (False, "cpu"): "gymnasium, CPU", (False, "cuda"): "gymnasium, GPU"}  # fmt: skip


def _automatic_values(readers: dict[str, list[str]]) -> dict[str, list[str]]:
    """For each field whose null default `resolve_config` fills in, lines `algo, algo: value`
    grouping the algorithms that get the same values; a value that depends on the backend or
    the device is given for each. Computed by resolving a default Config of every algorithm in
    every setting, so the listing cannot drift from the agents' own defaults."""
    import dataclasses

    from xiaoyarl.agents import ALGORITHMS
    from xiaoyarl.agents.settings import resolve_config

    nulls = [f.name for f in dataclasses.fields(Config) if getattr(Config(), f.name) is None]
    resolved = {(algo, setting): resolve_config(Config(algo=algo), *setting)
                for algo in ALGORITHMS for setting in _SETTINGS}  # fmt: skip
    found: dict[str, list[str]] = {}
    for name in nulls:
        groups: dict[str, list[str]] = {}  # the values' text -> the algorithms that get them
        for algo in readers.get(name, ALGORITHMS):
            values = {s: getattr(resolved[algo, s], name) for s in _SETTINGS}
            if None not in values.values():
                groups.setdefault(_describe_values(values), []).append(algo)
        if groups:
            found[name] = [f"{', '.join(algos)}: {text}" for text, algos in groups.items()]
    return found


def _describe_values(values: dict[tuple[bool, str], object]) -> str:
    """`64 (torch-native, CPU), 16 (torch-native, GPU), 128 (gymnasium)`, merging the settings
    that share a value: `1 (torch-native), 8 (gymnasium)`, or a single value."""

    def show(value: object) -> str:
        if isinstance(value, bool):
            return str(value).lower()
        return f"{value:g}" if isinstance(value, float) else str(value)

    def merged(settings: list[tuple[bool, str]]) -> dict[str, list[tuple[bool, str]]]:
        by_value: dict[str, list[tuple[bool, str]]] = {}
        for setting in settings:
            by_value.setdefault(show(values[setting]), []).append(setting)
        return by_value

    if len(merged(list(_SETTINGS))) == 1:
        return show(next(iter(values.values())))
    parts = []
    for batched, kind in ((True, "torch-native"), (False, "gymnasium")):
        by_value = merged([(batched, "cpu"), (batched, "cuda")])
        if len(by_value) == 1:
            parts.append(f"{next(iter(by_value))} ({kind})")
        else:
            parts += [f"{value} ({_SETTINGS[where[0]]})" for value, where in by_value.items()]
    return ", ".join(parts)


def _set_without_equals(argv: list[str]) -> str | None:
    """The fix for `--set gamma 0.9` (argparse would say only "unrecognized arguments: 0.9"),
    or None when every --set is followed by a key=value."""
    for i, token in enumerate(argv[:-1]):
        if token == "--":
            break
        if token == "--set" and i + 2 < len(argv):
            key, value = argv[i + 1], argv[i + 2]
        elif token.startswith("--set="):
            key, value = token.removeprefix("--set="), argv[i + 1]
        else:
            continue
        is_value = not value.startswith("-") or re.fullmatch(r"-[\d.]\S*", value)
        if key and "=" not in key and not key.startswith("-") and is_value:
            return f"--set takes key=value: did you mean --set {key}={value}?"
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the `xiaoyarl` command line on `argv` (default: `sys.argv[1:]`); the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    hint = _set_without_equals(argv)
    if hint is not None:
        print(f"xiaoyarl: error: {hint}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    args.argv = argv
    handler = {
        "train": _train,
        "eval": _eval,
        "plot": _plot,
        "list": _list,
        "record": _record,
        "export": _export,
        "check-env": _check_env,
        "fuse": _fuse,
        "backtest": _backtest,
        "population": _population,
        "tune": _tune,
    }[args.command]
    try:
        _old_spellings(args)
        return handler(args)
    except XiaoyaError as e:
        print(f"xiaoyarl: error: {e}", file=sys.stderr)
        for note in getattr(e, "__notes__", ()):
            print(f"xiaoyarl: {note}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print("xiaoyarl: interrupted", file=sys.stderr)
        for note in getattr(e, "__notes__", ()):  # what a run kept, and how to go on
            print(f"xiaoyarl: {note}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader left (`xiaoyarl list --fields | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 141  # as a shell reports a process ended by SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
