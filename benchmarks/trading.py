"""PPO on the stock-trading env: does it find a planted edge, and does it claim none on noise?

Three parts, all on synthetic markets (seeded, nothing downloaded):

1. "planted": a market whose asset SYN0 mean-reverts strongly (structure "mean_reversion").
   PPO trains on the first 80% of the dates with each seed, then its best policy is backtested
   on the held-out 20% (`xiaoyarl.finance.backtest`) against equal-weight buy-and-hold;
2. "random walk": the same on a market with no structure at all (independent random walks
   with zero expected return). Nothing can be learnt there, so the agent's Sharpe minus the
   index's should be indistinguishable from 0;
3. env throughput: env steps per second (summed over sub-envs) with random actions at 1, 256
   and 4096 sub-envs on the CPU.

For each run it reports the backtest Sharpe of agent and index and a 95% interval of their
difference from a paired moving-block bootstrap of the daily returns (blocks of 10 days,
2,000 resamples): an edge is claimed only where the whole interval lies above 0.

Usage: python benchmarks/trading.py [--seeds 0 1 2] [--max-steps 500000] [--threads 1]
       [--markets planted random] [--plots DIR] [--json out.json]
       [--quick]   (--quick: a smoke test of ~10 s, numbers meaningless)

Runtime: PPO's defaults (16 sub-envs x 64 steps per rollout, [64, 64] networks) ran about
4,000 env steps/s on 2 busy AMD EPYC cores with 1 thread, so 6 runs of 500,000 steps take about
12-13 minutes, plus ~15 s of throughput measurement.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from machine import machine

from xiaoyarl import Config, train_agent
from xiaoyarl.finance.backtest import backtest
from xiaoyarl.finance.env import ENV_ID, StockTradingEnv
from xiaoyarl.finance.metrics import TRADING_DAYS

# Ten years of business days: 8 to train on (less a 60-day warm-up), 2 (504 days) held out.
# hmax 1000 shares (about 10% of the initial cash a day at a price of 100) lets the agent build
# a position within days, which an edge that lasts days needs; the rest are the env defaults.
MARKETS = {
    "planted (mean reversion)": dict(structure="mean_reversion", num_days=2520, hmax=1000),
    "random walk": dict(structure="random_walk", num_days=2520, hmax=1000),
}
THROUGHPUT_ENVS = (1, 256, 4096)
BLOCK, RESAMPLES = 10, 2000


def sharpe(returns: np.ndarray) -> np.ndarray:
    """Annualised Sharpe of each row of daily returns `(..., days)`; 0 for a flat row."""
    std = returns.std(-1, ddof=1)
    safe = np.where(std > 0, std, 1.0)
    return np.where(std > 0, returns.mean(-1) / safe * np.sqrt(TRADING_DAYS), 0.0)


def bootstrap_sharpe_difference(
    agent: np.ndarray, index: np.ndarray, seed: int = 0
) -> tuple[float, float, float]:
    """Sharpe(agent) - Sharpe(index) of two account-value series over the same days, with a
    95% percentile interval from a paired moving-block bootstrap of their daily returns."""
    a = agent[1:] / agent[:-1] - 1.0
    b = index[1:] / index[:-1] - 1.0
    n = len(a)
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, n - BLOCK + 1, size=(RESAMPLES, -(-n // BLOCK)))
    rows = (starts[:, :, None] + np.arange(BLOCK)).reshape(RESAMPLES, -1)[:, :n]
    differences = sharpe(a[rows]) - sharpe(b[rows])
    low, high = np.percentile(differences, [2.5, 97.5])
    return float(sharpe(a) - sharpe(b)), float(low), float(high)


def train_and_backtest(
    market: str, env_kwargs: dict, seed: int, max_steps: int, threads: int, root: Path,
    plots: Path | None = None,
) -> dict:  # fmt: skip
    run_dir = root / f"{market.split()[0]}_{seed}"
    config = Config(
        algo="ppo", env_id=ENV_ID, seed=seed, threads=threads, max_steps=max_steps,
        cwd=str(run_dir), env_kwargs=env_kwargs, eval_every=max(max_steps // 10, 2048),
    )  # fmt: skip
    start = time.perf_counter()
    summary = train_agent(config, log=None)
    seconds = time.perf_counter() - start
    result = backtest(run_dir)
    if plots is not None:  # the backtest's account values and drawdowns
        plots.mkdir(parents=True, exist_ok=True)
        name = f"trading_{market.split()[0]}_seed{seed}.png"
        (plots / name).write_bytes((run_dir / "backtest.png").read_bytes())
    agent = np.asarray(result["series"]["agent"])
    index = np.asarray(result["series"]["equal_weight"])
    difference, low, high = bootstrap_sharpe_difference(agent, index, seed)
    return {
        "market": market,
        "seed": seed,
        "train_seconds": round(seconds, 1),
        "env_steps": summary["total_steps"],
        "best_train_eval": summary["best_eval_mean"],
        "backtest_days": result["period"]["days"],
        "agent": result["agent"],
        "equal_weight": result["equal_weight"],
        "sharpe_difference": difference,
        "sharpe_difference_95": [low, high],
        "edge_claimed": low > 0,
    }


def throughput(num_envs: int, seconds: float) -> float:
    """Env steps per second (summed over sub-envs) of the default env with random actions."""
    env = StockTradingEnv(num_envs, "cpu", seed=0)
    env.reset(seed=0)
    actions = torch.rand((64, num_envs, env.spec.action_dim)) * 2 - 1
    for a in actions[:8]:  # warm-up
        env.step(a)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for a in actions:
            env.step(a)
        steps += len(actions)
    return steps * num_envs / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--max-steps", type=int, default=500_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--throughput-seconds", type=float, default=3.0)
    parser.add_argument("--json", help="write the raw results here")
    parser.add_argument("--quick", action="store_true", help="smoke test: tiny budget")
    parser.add_argument("--markets", nargs="+", choices=[m.split()[0] for m in MARKETS],
                        help="only these markets (default: all)")  # fmt: skip
    parser.add_argument("--plots", help="copy each run's backtest plot into this folder")
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.max_steps, args.throughput_seconds = [0], 2048, 0.1
    if "env_kwargs" not in Config.field_names():
        raise SystemExit(
            "this xiaoyarl has no Config.env_kwargs: the trading env cannot be trained"
        )
    torch.set_num_threads(args.threads)
    print(machine())

    rates = {n: throughput(n, args.throughput_seconds) for n in THROUGHPUT_ENVS}
    for n, rate in rates.items():
        print(f"env throughput, {n:5d} sub-envs: {rate:12,.0f} env steps/s")

    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for market, env_kwargs in MARKETS.items():
            if args.markets and market.split()[0] not in args.markets:
                continue
            for seed in args.seeds:
                run = train_and_backtest(
                    market,
                    env_kwargs,
                    seed,
                    args.max_steps,
                    args.threads,
                    Path(tmp),
                    Path(args.plots) if args.plots else None,
                )
                runs.append(run)
                low, high = run["sharpe_difference_95"]
                print(
                    f"{market:26s} seed {seed}: Sharpe agent {run['agent']['sharpe']:6.2f}, "
                    f"index {run['equal_weight']['sharpe']:6.2f}, difference "
                    f"{run['sharpe_difference']:+.2f} [{low:+.2f}, {high:+.2f}] "
                    f"({run['train_seconds']:.0f} s, {run['env_steps']:,} steps)"
                )
    print()
    print("| market | seeds | agent Sharpe | index Sharpe | difference (95% interval each seed) "
          "| edge claimed |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for market in MARKETS:
        rows = [r for r in runs if r["market"] == market]
        if not rows:
            continue
        agent = statistics.mean(r["agent"]["sharpe"] or 0.0 for r in rows)
        index = statistics.mean(r["equal_weight"]["sharpe"] or 0.0 for r in rows)
        intervals = ", ".join(
            f"{r['sharpe_difference']:+.2f} [{r['sharpe_difference_95'][0]:+.2f}, "
            f"{r['sharpe_difference_95'][1]:+.2f}]"
            for r in rows
        )
        claimed = sum(r["edge_claimed"] for r in rows)
        print(f"| {market} | {len(rows)} | {agent:.2f} | {index:.2f} | {intervals} | "
              f"{claimed}/{len(rows)} |")  # fmt: skip
    if args.json:
        out = {"machine": machine(), "max_steps": args.max_steps, "throughput": rates,
               "runs": runs}  # fmt: skip
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
