"""Multi-agent memory: the learning check of the tests' Recall task, on several seeds, with a
GRU and without one.

Recall (`tests/memory_envs.py`): each of two agents sees a cue of its own at the first of 4
steps and is paid at the last for naming it; the team's return is 2 for agents that remember,
1 in expectation for any feed-forward policy (at the last step it sees the same whatever the
cue). MAPPO and PQN-VDN on the discrete version, MADDPG and MATD3 on the continuous one (an
agent paid 1 - |action - target| / 2, the target -1 or 1). 8 sub-envs, `net_dims: [32]`, a GRU
of 16 units, 8,000 env steps, 32 evaluation episodes; the library's defaults otherwise (no
preset exists for the task).

Every run is `xiaoyarl train ALGO memory_envs:make_recall --seed S ... --summary-json F`, the
tests' envs on the PYTHONPATH. Runs go two at a time (`--jobs`), one torch thread each.

Usage: python benchmarks/multi_agent_memory.py [--seeds 0 1 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from machine import machine
from seeded import add_seed_options, run_all, train_cli

ENV = "memory_envs:make_recall"
GRU = ["--set", "recurrent=gru", "--set", "recurrent_dim=16"]
# name -> (algorithm, continuous actions, memory, extra CLI arguments)
RUNS = {
    "MAPPO, GRU": ("mappo", False, GRU, ["--set", "horizon_len=32"]),
    "MAPPO, feed-forward": ("mappo", False, [], ["--set", "horizon_len=32"]),
    "PQN-VDN, GRU": ("pqn_vdn", False, GRU, ["--set", "horizon_len=32"]),
    "PQN-VDN, feed-forward": ("pqn_vdn", False, [], ["--set", "horizon_len=32"]),
    "MADDPG, GRU": ("maddpg", True, GRU, ["--set", "batch_size=64", "--set",
                                          "learning_starts=256"]),
    "MATD3, GRU": ("matd3", True, GRU, ["--set", "batch_size=64", "--set",
                                        "learning_starts=256"]),
}  # fmt: skip


def train(name: str, seed: int, budget: int, root: Path) -> dict:
    algo, continuous, memory, extra = RUNS[name]
    cwd = root / f"{name.replace(' ', '_').replace(',', '')}_{seed}"
    common = [
        "--num-envs",
        "8",
        "--eval-every",
        str(budget // 2),
        "--eval-episodes",
        "32",
        "--target-return",
        "none",
        "--no-preset",
        "--set",
        "net_dims=[32]",
        "--set",
        f"env_kwargs={{max_episode_steps: 4, continuous: {str(continuous).lower()}}}",
    ]
    result = train_cli(algo, ENV, seed, budget, cwd, [*common, *memory, *extra])
    return {"run": name, "algo": algo, "seed": seed, **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_seed_options(parser, max_steps=8_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="xiaoyarl-recall-"))
    tasks = [(name, seed, args.max_steps, root) for name in RUNS for seed in args.seeds]
    results = run_all(train, tasks, args.jobs)
    print("| run | env steps | final eval (team return, of 2) per seed | at 2 | seconds |")
    print("| --- | --- | --- | --- | --- |")
    for name in RUNS:
        rows = [r for r in results if r["run"] == name]
        finals = " / ".join(f"{r['final_eval_mean']:.2f}" for r in rows)
        remembered = sum(r["final_eval_mean"] >= 1.9 for r in rows)
        seconds = " / ".join(f"{r['train_seconds']:.0f}" for r in rows)
        print(f"| {name} | {args.max_steps:,} | {finals} | {remembered}/{len(rows)} | "
              f"{seconds} |")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "runs": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
