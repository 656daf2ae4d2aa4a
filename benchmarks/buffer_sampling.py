"""Microseconds to sample a minibatch from a full replay buffer: xiaoyarl against Stable-Baselines3.

Measures, on a full buffer of `--capacity` transitions (default 1M, state_dim 17 and action_dim 6
like a MuJoCo task), the time of one call of:
- xiaoyarl `ReplayBuffer.sample` (uniform);
- xiaoyarl `PrioritizedReplayBuffer.sample`, and `sample` followed by `update_priorities`;
- Stable-Baselines3's `ReplayBuffer.sample` when `stable_baselines3` is importable (its numpy
  arrays are filled directly: a loop of `add` calls would take minutes).

on CPU, and on CUDA when available (SB3 then samples from host memory and copies the batch to
the GPU, which is how it works). Times include the synchronisation of the device.

    python benchmarks/buffer_sampling.py --threads 1 --json buffer_sampling.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable

import numpy as np
import torch

from xiaoyarl.core.buffer import PrioritizedReplayBuffer, ReplayBuffer, Transitions

CALLS_PER_CHECK = 16  # calls between clock reads


def _time_calls(call: Callable[[], None], seconds: float, sync: Callable[[], None]) -> float:
    """Call `call()` for about `seconds` (after a short warm-up); returns microseconds per call."""
    for _ in range(CALLS_PER_CHECK):
        call()
    sync()
    calls = 0
    start = time.perf_counter()
    while True:
        for _ in range(CALLS_PER_CHECK):
            call()
        calls += CALLS_PER_CHECK
        sync()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / calls * 1e6


def _random_transitions(rows: int, num_envs: int, state_dim: int, action_dim: int, max_step: int):
    """`rows` steps of random data, truncated every `max_step` steps (CPU tensors)."""
    gen = torch.Generator().manual_seed(0)
    truncates = torch.zeros(rows, num_envs, dtype=torch.bool)
    truncates[max_step - 1 :: max_step] = True
    return Transitions(
        states=torch.randn(rows, num_envs, state_dim, generator=gen),
        actions=torch.rand(rows, num_envs, action_dim, generator=gen) * 2 - 1,
        rewards=torch.randn(rows, num_envs, generator=gen),
        terminals=torch.zeros(rows, num_envs, dtype=torch.bool),
        truncates=truncates,
        next_states=torch.randn(rows, num_envs, state_dim, generator=gen),
    )


def bench_xiaoyarl(args: argparse.Namespace, device: str, data: Transitions) -> dict[str, float]:
    """Microseconds per call of uniform and prioritized sampling (and priority update)."""
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    dims = (args.num_envs, args.state_dim, args.action_dim, False, args.max_step, device)
    results = {}

    buf = ReplayBuffer(args.capacity, *dims)
    buf.add(data)
    results["uniform sample"] = _time_calls(lambda: buf.sample(args.batch_size), args.seconds, sync)

    per = PrioritizedReplayBuffer(args.capacity, *dims)
    per.add(data)
    results["prioritized sample"] = _time_calls(
        lambda: per.sample(args.batch_size), args.seconds, sync
    )
    td = torch.rand(args.batch_size, device=device) * 2

    def sample_and_update() -> None:
        batch = per.sample(args.batch_size)
        per.update_priorities(batch.indices, td)

    results["prioritized sample + update_priorities"] = _time_calls(
        sample_and_update, args.seconds, sync
    )
    return results


def bench_sb3(args: argparse.Namespace, device: str, data: Transitions) -> float:
    """Microseconds per call of SB3's `ReplayBuffer.sample` on a full buffer."""
    from gymnasium import spaces
    from stable_baselines3.common.buffers import ReplayBuffer as SB3ReplayBuffer

    obs_space = spaces.Box(-np.inf, np.inf, (args.state_dim,), np.float32)
    act_space = spaces.Box(-1.0, 1.0, (args.action_dim,), np.float32)
    buf = SB3ReplayBuffer(args.capacity, obs_space, act_space, device=device, n_envs=args.num_envs)
    rows = buf.buffer_size
    buf.observations[:] = data.states[:rows].numpy()
    buf.next_observations[:] = data.next_states[:rows].numpy()
    buf.actions[:] = data.actions[:rows].numpy()
    buf.rewards[:] = data.rewards[:rows].numpy()
    buf.dones[:] = (data.terminals | data.truncates)[:rows].numpy()
    buf.timeouts[:] = data.truncates[:rows].numpy()
    buf.pos, buf.full = 0, True
    np.random.seed(0)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    return _time_calls(lambda: buf.sample(args.batch_size), args.seconds, sync)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--capacity", type=int, default=1_000_000, help="transitions stored")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--num-envs", type=int, default=1, help="columns of the buffer")
    parser.add_argument("--state-dim", type=int, default=17)
    parser.add_argument("--action-dim", type=int, default=6)
    parser.add_argument("--max-step", type=int, default=1000, help="episode time limit")
    parser.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--json", default=None, help="write the results to this file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    try:
        import stable_baselines3

        sb3_version: str | None = stable_baselines3.__version__
    except ImportError:
        sb3_version = None
        print("stable_baselines3 is not installed: its row is skipped.")

    rows = args.capacity // args.num_envs
    data = _random_transitions(rows, args.num_envs, args.state_dim, args.action_dim, args.max_step)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    results: list[dict] = []

    def record(library: str, operation: str, device: str, us: float) -> None:
        results.append({"library": library, "operation": operation, "device": device, "us": us})
        print(f"  {library:18s} {operation:42s} {device:5s} {us:10.1f} us/call")

    for device in devices:
        for operation, us in bench_xiaoyarl(args, device, data).items():
            record("xiaoyarl", operation, device, us)
        if sb3_version is not None:
            record("stable-baselines3", "uniform sample", device, bench_sb3(args, device, data))

    machine = {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "stable_baselines3": sb3_version,
        "torch_threads": args.threads,
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }
    print()
    print(
        f"{args.capacity:,} transitions (state_dim {args.state_dim}, action_dim "
        f"{args.action_dim}, num_envs {args.num_envs}), batch {args.batch_size}; torch "
        f"{machine['torch']}, {args.threads} thread(s); stable_baselines3 "
        f"{sb3_version or 'not installed'}"
    )
    print()
    print("| library | operation | device | us/call |")
    print("|---|---|---|---:|")
    for r in results:
        print(f"| {r['library']} | {r['operation']} | {r['device']} | {r['us']:,.1f} |")
    if args.json:
        config = {k: v for k, v in vars(args).items() if k != "json"}
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "config": config, "results": results}, f, indent=2)
    return results


if __name__ == "__main__":
    main()
