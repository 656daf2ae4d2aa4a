"""Random-action steps per second of cooperative navigation: xiaoyarl's torch-native spread env
against mpe2's `simple_spread_v3` through `PettingZooVecEnv` (a Python loop over instances).

A step of N sub-envs counts as N env steps (each moves all 3 agents). Actions are drawn before
the clock starts and cycled, so the numbers are of the simulators, auto-reset included.

    python benchmarks/multi_agent_throughput.py --seconds 1 --json multi_agent_throughput.json
    python benchmarks/multi_agent_throughput.py --quick   # a smoke run of a few seconds
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable

import torch

from xiaoyarl.envs.multi import MultiAgentVecEnv, make_multi_agent_env

NUM_ACTION_BATCHES = 16  # distinct pre-drawn action batches, cycled through
TORCH_SIZES = [1, 16, 256, 4096, 16384]
MPE2_SIZES = [1, 16, 256]


def _rate(step: Callable[[int], None], seconds: float, sync: Callable[[], None]) -> float:
    """Calls of `step(i)` per second over about `seconds`, after a short warm-up."""
    for i in range(3):
        step(i)
    sync()
    calls, start = 0, time.perf_counter()
    while True:
        step(calls)
        calls += 1
        if calls % 4 == 0:
            sync()
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                return calls / elapsed


def bench(env: MultiAgentVecEnv, seconds: float) -> float:
    """Env steps per second (sub-env steps) of `env` under uniformly random actions."""
    spec, device = env.spec, env.device
    env.reset(seed=0)
    gen = torch.Generator(device=device).manual_seed(0)
    shape = (NUM_ACTION_BATCHES, spec.num_envs, spec.num_agents)
    if spec.if_discrete:
        actions = torch.randint(0, spec.action_dim, shape, generator=gen, device=device)
    else:
        actions = torch.rand((*shape, spec.action_dim), generator=gen, device=device) * 2 - 1

    def step(i: int) -> None:
        env.step(actions[i % NUM_ACTION_BATCHES])

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    rate = _rate(step, seconds, sync) * spec.num_envs
    env.close()
    return rate


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    parser.add_argument("--torch-sizes", nargs="+", type=int, default=TORCH_SIZES)
    parser.add_argument("--mpe2-sizes", nargs="+", type=int, default=MPE2_SIZES)
    parser.add_argument("--actions", choices=["discrete", "continuous"], default="discrete")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--quick", action="store_true", help="smoke run: small sizes, 0.05 s")
    parser.add_argument("--json", default=None, help="write the results to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.torch_sizes, args.mpe2_sizes = 0.05, [1, 256], [1, 16]
    torch.set_num_threads(args.threads)
    continuous = args.actions == "continuous"
    torch_id = "SpreadContinuous-v0" if continuous else "SpreadDiscrete-v0"

    results: list[dict] = []

    def record(sim: str, device: str, num_envs: int, rate: float) -> None:
        results.append({"simulator": sim, "device": device, "num_envs": num_envs, "sps": rate})
        print(f"  {sim:28s} {device:5s} N={num_envs:<6d} {rate:14,.0f} env steps/s")

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        # on an accelerator, checking action values reads them on the host at every step; a
        # trusted policy turns that off (`check_actions=False`), so both are measured there
        for check in [True] if device == "cpu" else [True, False]:
            label = f"xiaoyarl {torch_id}" + ("" if check else " (check_actions off)")
            for n in args.torch_sizes:
                env = make_multi_agent_env(
                    torch_id, n, device=device, seed=0, env_kwargs={"check_actions": check}
                )
                record(label, device, n, bench(env, args.seconds))
    try:
        import mpe2
    except ImportError:
        print("  mpe2 is not installed (pip install -e '.[multi]'): skipping its rows")
        mpe2 = None
    if mpe2 is not None:
        for n in args.mpe2_sizes:
            env = make_multi_agent_env(
                "mpe2:simple_spread_v3", n, seed=0, env_kwargs={"continuous_actions": continuous}
            )
            record("mpe2 simple_spread_v3 (adapter)", "cpu", n, bench(env, args.seconds))

    machine = {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "torch": torch.__version__,
        "mpe2": getattr(mpe2, "__version__", None),
        "torch_threads": args.threads,
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }
    print()
    print(f"torch {machine['torch']}, mpe2 {machine['mpe2']}, {args.threads} thread(s), "
          f"{args.actions} actions, N = 3 agents")  # fmt: skip
    print()
    print("| simulator | device | num_envs | env steps/s |")
    print("|---|---|---:|---:|")
    for r in results:
        print(f"| {r['simulator']} | {r['device']} | {r['num_envs']} | {r['sps']:,.0f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "seconds": args.seconds, "results": results}, f,
                      indent=2)  # fmt: skip
    return results


if __name__ == "__main__":
    main()
