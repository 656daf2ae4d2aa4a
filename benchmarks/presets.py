"""A preset against the library's defaults on fresh seeds: does the preset learn the task
faster, and as reliably?

A search (`xiaoyarl tune`) picks a preset on one seed; on that seed it is optimistic. This runs,
for each seed in turn and one torch thread each, alternating the two so a drift of the
machine's speed touches both alike,

    xiaoyarl train ALGO ENV --seed S --max-steps BUDGET --threads 1 --config PRESET
    xiaoyarl train ALGO ENV --seed S --max-steps BUDGET --threads 1 --no-preset

and reports, per side, the seeds that reached the env's target (confirmed, as every run), the
env steps and the seconds to it (training and evaluation, start-up excluded), with medians.
PRESET defaults to the task's preset file (`xiaoyarl list` names them).

`--target-return R` sets the target of both sides (e.g. a milestone short of the env's own);
`--no-defaults` runs the preset alone, for a task the defaults are known to miss (say so
with the defaults' own run beside it).

Usage: python benchmarks/presets.py ALGO ENV [--config FILE.yaml] [--seeds 1 2 3]
           [--max-steps 500000] [--json out.json] [--no-defaults] [--target-return R]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from machine import machine

from xiaoyarl.presets import preset_path


def train(algo: str, env: str, seed: int, budget: int, settings: list[str], folder: Path) -> dict:
    summary = folder.with_suffix(".json")
    command = [sys.executable, "-m", "xiaoyarl", "train", algo, env, "--seed", str(seed),
               "--max-steps", str(budget), "--threads", "1", "--cwd", str(folder),
               "--summary-json", str(summary), "--quiet", *settings]  # fmt: skip
    subprocess.run(command, check=True)
    result = json.loads(summary.read_text())
    return {"seed": seed, **{k: result[k] for k in ("solved", "steps_to_target",
                                                    "seconds_to_target", "final_eval_mean",
                                                    "total_steps", "train_seconds")}}  # fmt: skip


def describe(runs: list[dict]) -> str:
    solved = [r for r in runs if r["solved"]]
    text = f"{len(solved)}/{len(runs)} seeds"
    if solved:
        steps = statistics.median(r["steps_to_target"] for r in solved)
        seconds = statistics.median(r["seconds_to_target"] for r in solved)
        text += f", median {steps:,.0f} env steps and {seconds:.1f} s to the target"
    per_seed = " / ".join(f"{r['steps_to_target']:,} ({r['seconds_to_target']:.1f} s)"
                          if r["solved"] else "-" for r in runs)  # fmt: skip
    return f"{text}; per seed {per_seed}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("algo")
    parser.add_argument("env")
    parser.add_argument("--config", type=Path, help="the preset file (default: the task's)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--max-steps", type=int, default=500_000)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-defaults", action="store_true", help="run the preset alone")
    parser.add_argument("--target-return", help="both sides' target (default: the env's)")
    args = parser.parse_args()
    preset = args.config or preset_path(args.algo, args.env)
    if preset is None:
        sys.exit(f"{args.algo} on {args.env} has no preset; name one with --config FILE.yaml")
    root = Path(tempfile.mkdtemp(prefix="xiaoyarl-presets-"))
    sides = {"preset": ["--config", str(preset)], "defaults": ["--no-preset"]}
    if args.no_defaults:
        del sides["defaults"]
    if args.target_return is not None:
        sides = {side: [*settings, "--target-return", args.target_return]
                 for side, settings in sides.items()}  # fmt: skip
    results: dict[str, list[dict]] = {side: [] for side in sides}
    for seed in args.seeds:
        for side, settings in sides.items():
            run = train(args.algo, args.env, seed, args.max_steps, settings,
                        root / f"{side}_{seed}")  # fmt: skip
            results[side].append(run)
            print(side, json.dumps(run), flush=True)
    for side, runs in results.items():
        print(f"{side}: {describe(runs)}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "algo": args.algo,
                                         "env": args.env, "preset": str(preset),
                                         "max_steps": args.max_steps,
                                         "target_return": args.target_return,
                                         "results": results}, indent=1) + "\n")  # fmt: skip


if __name__ == "__main__":
    main()
