"""SAC with Dict and image observations: the learning checks of the tests' small tasks, on
several seeds.

- `control_envs:Reach-v0`: move a point to a goal read from a dict of `observation`,
  `achieved_goal` and `desired_goal` (heading for the centre, blind to the goal: -38; target -10).
- `control_envs:PixelReach-v0`: move a point, seen only in an 8x8 RGB image, to the centre
  (standing still: -15; target -5).

Every run is `xiaoyarl train sac ENV --seed S --max-steps 20000 --threads 1 --target-return T
--summary-json F` with SAC's defaults (a CNN each for actor and critics on the images; the dict's
vectors through the running normaliser, switched off as SAC's default), the tests' envs on the
PYTHONPATH; counted solved when an evaluation reaches the target and 50 fresh episodes confirm
it. Runs go two at a time (`--jobs`), one torch thread each.

Usage: python benchmarks/observation_kinds.py [--seeds 0 1 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from machine import machine
from seeded import add_seed_options, run_all, train_cli

TASKS = {"Dict": ("control_envs:Reach-v0", -10.0), "image": ("control_envs:PixelReach-v0", -5.0)}


def train(kind: str, seed: int, budget: int, root: Path) -> dict:
    env_id, target = TASKS[kind]
    result = train_cli("sac", env_id, seed, budget, root / f"{kind}_{seed}",
                       ["--target-return", str(target)])  # fmt: skip
    return {"kind": kind, "env": env_id, "target": target, "seed": seed, **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_seed_options(parser, max_steps=20_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="xiaoyarl-kinds-"))
    tasks = [(kind, seed, args.max_steps, root) for kind in TASKS for seed in args.seeds]
    results = run_all(train, tasks, args.jobs)
    print("| observations | task | solved | env steps to target | seconds to target | best eval |")
    print("| --- | --- | --- | --- | --- | --- |")
    for kind, (env_id, target) in TASKS.items():
        rows = [r for r in results if r["kind"] == kind]
        solved = sum(r["solved"] for r in rows)
        steps = " / ".join(f"{r['steps_to_target']:,}" if r["solved"] else "-" for r in rows)
        secs = " / ".join(f"{r['seconds_to_target']:.0f}" if r["solved"] else "-" for r in rows)
        best = " / ".join(f"{r['best_eval_mean']:.1f}" for r in rows)
        print(f"| {kind} | {env_id} ({target:g}) | {solved}/{len(rows)} | {steps} | {secs} | "
              f"{best} |")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "max_steps": args.max_steps,
                                         "runs": results}, indent=1) + "\n")  # fmt: skip


if __name__ == "__main__":
    main()
