"""Env steps per second of MuJoCo Playground tasks through xiaoyarl's adapter (`--backend
playground`), random actions, at several numbers of sub-envs, for MJX's JAX and Warp
implementations; on the CPU, and on a GPU when one is there (`--device cuda`).

What is timed is `PlaygroundVecEnv.step` as the runner calls it: a torch action batch in, the
torch observation, reward and flags out (DLPack both ways), the time limit and auto-reset
included. A step of N sub-envs counts as N steps. Compilation (of the reset and of the first
two steps) happens before the clock starts and is reported separately.

    pip install -e '.[playground]'
    python benchmarks/playground_throughput.py --tasks CartpoleBalance CheetahRun \
        --num-envs 1 16 256 4096 --impls jax warp --seconds 3 --json playground.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import torch

from xiaoyarl.envs import make_env

NUM_ACTION_BATCHES = 16  # distinct pre-drawn action batches, cycled through


def bench(task: str, num_envs: int, impl: str, device: str, seconds: float) -> dict:
    """Compile seconds (reset and first step) and env steps per second of one configuration."""
    start = time.perf_counter()
    env = make_env(task, num_envs, device, "playground", seed=0, env_kwargs={"impl": impl})
    generator = torch.Generator(device=device).manual_seed(0)
    shape = (NUM_ACTION_BATCHES, num_envs, env.spec.action_dim)
    actions = torch.rand(shape, generator=generator, device=device) * 2 - 1
    obs, _ = env.reset()
    for i in range(2):  # the second step can compile again: its state comes from a step
        obs = env.step(actions[i])[0]
    obs.sum().item()  # wait for the device
    compile_seconds = time.perf_counter() - start
    calls, start = 0, time.perf_counter()
    while True:
        for _ in range(8):
            obs = env.step(actions[calls % NUM_ACTION_BATCHES])[0]
            calls += 1
        obs.sum().item()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            break
    rate = calls * num_envs / elapsed
    return {"task": task, "num_envs": num_envs, "impl": impl, "device": device,
            "compile_seconds": compile_seconds, "steps_per_second": rate}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["CartpoleBalance", "CheetahRun"])
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 16, 256, 4096])
    parser.add_argument("--impls", nargs="+", default=["jax", "warp"], choices=["jax", "warp"])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (JAX uses its own)")
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    for task in args.tasks:
        for impl in args.impls:
            for n in args.num_envs:
                r = bench(task, n, impl, args.device, args.seconds)
                rows.append(r)
                print(f"{task:18s} {impl:5s} {n:6,d} envs: {r['steps_per_second']:12,.0f} "
                      f"steps/s (compile {r['compile_seconds']:.0f} s)", flush=True)  # fmt: skip
    print(f"\n{platform.processor() or platform.machine()}, device {args.device}, "
          f"{time.strftime('%Y-%m-%d')}\n")  # fmt: skip
    print("| task | MJX impl | num_envs | env steps/s | compile s |")
    print("| --- | --- | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['task']} | {r['impl']} | {r['num_envs']:,} | "
              f"{r['steps_per_second']:,.0f} | {r['compile_seconds']:.0f} |")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
