"""Memory: recurrent policies against feed-forward ones on tasks observed without velocities.

`CartPoleNoVelocity-v1` observes only the cart's position and the pole's angle,
`PendulumNoVelocity-v1` only the pendulum's angle (its cosine and sine), so one observation does
not tell where they are heading: a policy must remember. Every run is

    xiaoyarl train ALGO ENV --seed S --max-steps BUDGET --threads 1 \
        [--set recurrent=lstm|gru] --summary-json F

with the library's defaults otherwise (the algorithm's own; the recurrent encoder's 128 units),
and counts as solved when an evaluation reaches the env's target (475; -200) and 50 fresh
episodes confirm it (the usual rule). Runs go two at a time (`--jobs`), one torch thread each.

Usage: python benchmarks/memory.py [--algo ppo] [--env CartPoleNoVelocity-v1]
       [--policies feed-forward lstm gru] [--seeds 0 1 2] [--max-steps 300000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from machine import machine
from seeded import add_seed_options, run_all, train_cli

POLICIES = {"feed-forward": [], "lstm": ["--set", "recurrent=lstm"],
            "gru": ["--set", "recurrent=gru"]}  # fmt: skip


def train(algo: str, env: str, policy: str, seed: int, budget: int, root: Path) -> dict:
    result = train_cli(algo, env, seed, budget, root / f"{algo}_{policy}_{seed}",
                       POLICIES[policy])  # fmt: skip
    return {"algo": algo, "policy": policy, "seed": seed, **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default="ppo")
    parser.add_argument("--env", default="CartPoleNoVelocity-v1")
    parser.add_argument("--policies", nargs="+", choices=list(POLICIES), default=list(POLICIES))
    add_seed_options(parser, max_steps=300_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="xiaoyarl-memory-"))
    tasks = [(args.algo, args.env, policy, seed, args.max_steps, root)
             for policy in args.policies for seed in args.seeds]  # fmt: skip
    results = run_all(train, tasks, args.jobs)
    print("| policy | solved | env steps to target | seconds to target | best eval |")
    print("| --- | --- | --- | --- | --- |")
    for policy in args.policies:
        rows = [r for r in results if r["policy"] == policy]
        solved = sum(r["solved"] for r in rows)
        steps = " / ".join(f"{r['steps_to_target']:,}" if r["solved"] else "-" for r in rows)
        secs = " / ".join(f"{r['seconds_to_target']:.0f}" if r["solved"] else "-" for r in rows)
        best = " / ".join(f"{r['best_eval_mean']:.0f}" for r in rows)
        print(f"| {policy} | {solved}/{len(rows)} | {steps} | {secs} | {best} |")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "algo": args.algo, "env": args.env,
                                         "max_steps": args.max_steps, "runs": results},
                                        indent=1) + "\n")  # fmt: skip


if __name__ == "__main__":
    main()
