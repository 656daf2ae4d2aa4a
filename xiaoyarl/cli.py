"""The `xiaoyarl` command line: train, eval, plot, list."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from xiaoyarl.errors import XiaoyaError

# train options that map one-to-one onto Config fields (option dest -> field)
TRAIN_FIELDS = {
    "backend": "backend",
    "num_envs": "num_envs",
    "seed": "seed",
    "device": "device",
    "max_steps": "max_steps",
    "target_return": "target_return",
    "eval_every": "eval_every",
    "eval_episodes": "eval_episodes",
    "cwd": "cwd",
    "threads": "threads",
    "vector_mode": "vector_mode",
    "runner": "runner",
    "num_workers": "num_workers",
    "restart_workers": "restart_workers",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xiaoyarl", description="Massively parallel deep reinforcement learning."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train an agent", description="Train ALGO on ENV.")
    train.add_argument("algo", help="algorithm, e.g. ppo or a2c (see `xiaoyarl list`)")
    train.add_argument("env", help="env id: built-in torch env, gymnasium id, or module:Env-v0")
    train.add_argument("--backend", choices=["auto", "torch", "gymnasium", "envpool"])
    train.add_argument("--vector-mode", choices=["sync", "async"], help="gymnasium sub-envs")
    train.add_argument("--num-envs", type=int, metavar="N", help="sub-envs (per worker)")
    train.add_argument("--runner", choices=["single", "parallel"],
                       help="parallel: worker / learner / evaluator processes")  # fmt: skip
    train.add_argument("--num-workers", type=int, metavar="W", help="parallel: worker processes")
    train.add_argument("--restart-workers", type=int, metavar="K",
                       help="parallel: restart crashed workers up to K times")  # fmt: skip
    train.add_argument("--seed", type=int, metavar="S")
    train.add_argument("--device", metavar="auto|cpu|cuda|cuda:N")
    train.add_argument("--threads", type=int, metavar="N", help="torch CPU threads")
    train.add_argument("--max-steps", type=_int_like, metavar="N")
    train.add_argument("--target-return", type=float, metavar="R")
    train.add_argument("--eval-every", type=_int_like, metavar="N")
    train.add_argument("--eval-episodes", type=int, metavar="K")
    train.add_argument("--cwd", metavar="DIR", help="run folder (default runs/ENV_ALGO_SEED)")
    train.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="set any Config field, e.g. --set gamma=0.98 (repeatable)")  # fmt: skip
    train.add_argument("--config", metavar="FILE.yaml", help="start from this config file")
    train.add_argument("--resume", action="store_true", help="continue from the run's checkpoint")
    train.add_argument("--summary-json", metavar="FILE", help="write the run summary as JSON")
    train.add_argument("--quiet", action="store_true", help="print only errors")

    ev = sub.add_parser("eval", help="evaluate a run's best policy")
    ev.add_argument("run_dir")
    ev.add_argument("--episodes", type=int, default=10)
    ev.add_argument("--seed", type=int, default=12_345)

    plot = sub.add_parser("plot", help="(re)draw a run's learning_curve.png")
    plot.add_argument("run_dir")

    ls = sub.add_parser("list", help="algorithms and built-in envs")
    ls.add_argument("--fields", action="store_true", help="also list every Config field")
    return parser


def _int_like(text: str) -> int:
    """Integers written as 100000, 100_000 or 1e5."""
    value = float(text.replace("_", ""))
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"expected an integer, got {text}")
    return int(value)


def _train(args: argparse.Namespace) -> int:
    from xiaoyarl.config import Config
    from xiaoyarl.train.run import default_run_dir, train_agent

    config = Config.load(args.config) if args.config else Config()
    config.algo = args.algo.lower()
    config.env_id = args.env
    for dest, name in TRAIN_FIELDS.items():
        value = getattr(args, dest)
        if value is not None:
            config.set(name, value, source=f"--{dest.replace('_', '-')}")
    config.apply_overrides(args.set)
    if args.resume and not args.config:
        # Resume from the run's own config; options given now still override it.
        saved_path = Path(config.cwd or default_run_dir(config)) / "config.yaml"
        if saved_path.is_file():
            saved = Config.load(saved_path)
            for dest, name in TRAIN_FIELDS.items():
                if getattr(args, dest) is not None:
                    saved.set(name, getattr(args, dest))
            saved.apply_overrides(args.set)
            saved.algo, saved.env_id = config.algo, config.env_id
            config = saved
    summary = train_agent(config, resume=args.resume, log=None if args.quiet else print)
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


def _eval(args: argparse.Namespace) -> int:
    from xiaoyarl.policy import evaluate

    result = evaluate(args.run_dir, episodes=args.episodes, seed=args.seed)
    print(f"eval over {args.episodes} episodes: {result['mean']:.2f} ± {result['std']:.2f}")
    return 0


def _plot(args: argparse.Namespace) -> int:
    from xiaoyarl.config import Config
    from xiaoyarl.train.evaluator import plot_learning_curve

    run_dir = Path(args.run_dir)
    if not (run_dir / "recorder.csv").is_file():
        raise XiaoyaError(f"{run_dir} has no recorder.csv: it is not a xiaoyarl run folder yet.")
    config = Config.load(run_dir / "config.yaml") if (run_dir / "config.yaml").is_file() else None
    title = f"{config.algo} on {config.env_id}" if config else ""
    target = config.target_return if config else None
    print(plot_learning_curve(run_dir, title, target))
    return 0


def _list(args: argparse.Namespace) -> int:
    import dataclasses

    from xiaoyarl.agents import ALGORITHMS
    from xiaoyarl.config import Config
    from xiaoyarl.envs import TORCH_ENVS

    print("algorithms (continuous / discrete variants):")
    for name, (cont, disc) in ALGORITHMS.items():
        kinds = [k for k, c in (("continuous", cont), ("discrete", disc)) if c is not None]
        print(f"  {name:14s} {' / '.join(kinds)}")
    print("built-in torch-native envs (any gymnasium id also works):")
    for name, cls in TORCH_ENVS.items():
        kind = "discrete" if cls.if_discrete else "continuous"
        print(f"  {name:26s} {kind:10s} max_step {cls.max_step:4d}  target {cls.target_return:g}")
    if args.fields:
        print("config fields (--set name=value):")
        for f in dataclasses.fields(Config):
            default = f.default_factory() if callable(f.default_factory) else f.default
            print(f"  {f.name:18s} {default!r}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler = {"train": _train, "eval": _eval, "plot": _plot, "list": _list}[args.command]
    try:
        return handler(args)
    except XiaoyaError as e:
        print(f"xiaoyarl: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("xiaoyarl: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
