"""Several learners (torch.distributed, gloo on the CPU): throughput, time to target, and the
cost of keeping the ranks' gradients in step.

Two parts, each in fresh processes:

1. `--sync`: the gradient synchronisation on its own, 2 ranks, for a small network (PPO's
   [64, 64] actor and critic) and a large one (SAC's [256, 256] critics): a backward pass and
   xiaoyarl's one all-reduce of the flattened gradients, against the same with
   `torch.nn.parallel.DistributedDataParallel` (bucketed all-reduces during backward), and a
   backward pass with no synchronisation at all.
2. `--train`: `xiaoyarl train ALGO ENV --learners K` for K in `--learners` (1 = one ordinary
   process), a fixed budget of env steps with evaluation switched off, reporting the env steps
   per second of the whole job (all ranks' steps / wall-clock of the training loop), and,
   with `--target`, the seconds to the target from process start.

    python benchmarks/learners.py --sync
    python benchmarks/learners.py --train ppo:CartPole-v1 ppo:BipedalWalker-v3 --learners 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import machine

NETS = {  # name: (input size, hidden sizes, output size, batch)
    "small ([64, 64], batch 256)": (8, [64, 64], 4, 256),
    "large ([256, 256], batch 256)": (20, [256, 256], 1, 256),
}


def _sync_rank(rank: int, store: str, out: str, steps: int) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn

    from xiaoyarl.core.nets import build_mlp
    from xiaoyarl.scale.distributed import DataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    results = {}
    for name, (inputs, hidden, outputs, batch) in NETS.items():
        torch.manual_seed(0)
        net = build_mlp([inputs, *hidden, outputs], nn.ReLU)
        params = list(net.parameters())
        dp = DataParallel(rank, 2, torch.device("cpu"), 0)
        ddp = nn.parallel.DistributedDataParallel(build_mlp([inputs, *hidden, outputs], nn.ReLU))
        x = torch.randn(batch, inputs)

        def plain(model=net, x=x):
            model.zero_grad(set_to_none=True)
            model(x).square().mean().backward()

        def flat(dp=dp, params=params, plain=plain):
            plain()
            dp.average_gradients(params)

        def wrapped(ddp=ddp, plain=plain):
            plain(ddp)

        timings = {}
        for label, step in (("backward only", plain), ("flat all-reduce", flat),
                            ("DistributedDataParallel", wrapped)):  # fmt: skip
            for _ in range(20):
                step()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            timings[label] = (time.perf_counter() - t0) / steps * 1e6
        results[name] = {"params": sum(p.numel() for p in params), **timings}
    if rank == 0:
        Path(out).write_text(json.dumps(results))
    dist.destroy_process_group()


def sync_table(steps: int) -> str:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sync.json"
        mp.start_processes(_sync_rank, args=(str(Path(tmp) / "store"), str(out), steps),
                           nprocs=2, start_method="spawn")  # fmt: skip
        results = json.loads(out.read_text())
    lines = ["| network | parameters | backward only, us | + flat all-reduce, us | "
             "DistributedDataParallel, us |", "| --- | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['params']:,} | {r['backward only']:,.0f} | "
            f"{r['flat all-reduce']:,.0f} | {r['DistributedDataParallel']:,.0f} |"
        )
    return "\n".join(lines)


def train(algo: str, env_id: str, learners: int, steps: int, target: bool, root: Path) -> dict:
    summary = root / f"{algo}_{env_id}_{learners}_{time.time_ns()}.json"
    command = [
        sys.executable,
        "-m",
        "xiaoyarl",
        "train",
        algo,
        env_id,
        "--quiet",
        "--max-steps",
        str(steps),
        "--cwd",
        str(summary.with_suffix("")),
        "--summary-json",
        str(summary),
        "--set",
        "checkpoint_every=1000000000",
    ]
    if not target:
        command += ["--target-return", "none", "--eval-every", str(10**12),
                    "--eval-episodes", "1"]  # fmt: skip
    if learners > 1:
        command += ["--learners", str(learners)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ))
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    result = json.loads(summary.read_text())
    result["wall"] = time.perf_counter() - started
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sync", action="store_true", help="the gradient synchronisation")
    parser.add_argument("--sync-steps", type=int, default=300)
    parser.add_argument("--train", nargs="*", default=[], metavar="ALGO:ENV")
    parser.add_argument("--learners", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=200_000, help="env steps per run")
    parser.add_argument(
        "--target",
        action="store_true",
        help="train to the env's target instead (seconds to target)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args()
    raw: dict = {"machine": machine()}
    print(f"{machine()}, {time.strftime('%Y-%m-%d')}\n")
    if args.sync:
        table = sync_table(args.sync_steps)
        raw["sync"] = table
        print("Gradient synchronisation, 2 gloo ranks, per backward pass:\n")
        print(table + "\n")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for task in args.train:
            algo, env_id = task.split(":")
            for seed in args.seeds:
                for learners in args.learners:  # alternately, so drift hits all alike
                    r = train(algo, env_id, learners, args.steps, args.target, Path(tmp))
                    r.update(algo=algo, env=env_id, learners=learners, seed=seed)
                    rows.append(r)
                    print(json.dumps({k: r[k] for k in ("algo", "env", "learners", "seed",
                                      "total_steps", "steps_per_second", "wall", "solved",
                                      "process_seconds_to_target")}), flush=True)  # fmt: skip
    if rows:
        print(
            "\n| algo | env | learners | env steps/s (median) | s to target from process "
            "start (median) | seeds solved |\n| --- | --- | ---: | ---: | ---: | --- |"
        )
        groups: dict[tuple, list[dict]] = {}
        for r in rows:
            groups.setdefault((r["algo"], r["env"], r["learners"]), []).append(r)
        for (algo, env_id, learners), group in groups.items():
            sps = statistics.median(r["steps_per_second"] for r in group)
            solved = [r["process_seconds_to_target"] for r in group if r["solved"]]
            secs = f"{statistics.median(solved):.1f}" if solved and args.target else "-"
            print(
                f"| {algo} | {env_id} | {learners} | {sps:,.0f} | {secs} | "
                f"{len(solved)}/{len(group)} |"
            )
    raw["train"] = rows
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=2))


if __name__ == "__main__":
    main()
