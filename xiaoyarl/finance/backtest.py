"""Backtest a trained trading run on its held-out period, against buy-and-hold.

`backtest(run_dir)` rebuilds the run's `StockTradingEnv` (from `config.yaml`'s `env_kwargs`)
for the backtest period, lets the run's best policy (`actor.pt`) trade one account from the
period's first date to its last, deterministically, and compares its daily account values with
those of buy-and-hold over the same days: of all assets in equal parts (the "index") and of
each asset alone. Buy-and-hold spends the initial cash on the first date at the close, paying
the same transaction cost as the agent, in whole shares (not limited by `hmax`), and then never
trades. Every series starts at the initial cash on the first date, before any trade.

The metrics are those of `finance.metrics` (Sharpe with a risk-free rate of 0, annual
turnover). The numbers go to `backtest.json` (NaN written as null) and a picture of account
values and drawdowns to `backtest.png`, both written atomically.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import cast

import numpy as np
import torch

from xiaoyarl.errors import CheckpointError, ConfigError
from xiaoyarl.finance.env import ENV_ID, StockTradingEnv
from xiaoyarl.finance.metrics import drawdowns, performance
from xiaoyarl.train.checkpoint import atomic_output

# The metrics `backtest` reports for every strategy: key -> (column title, number format).
METRICS: dict[str, tuple[str, str]] = {
    "final_value":       ("final value", "{:,.0f}"),
    "cumulative_return": ("return", "{:+.1%}"),
    "annual_return":     ("annual", "{:+.1%}"),
    "annual_volatility": ("volatility", "{:.1%}"),
    "sharpe":            ("Sharpe", "{:.2f}"),
    "sortino":           ("Sortino", "{:.2f}"),
    "max_drawdown":      ("max drawdown", "{:.1%}"),
    "calmar":            ("Calmar", "{:.2f}"),
    "annual_turnover":   ("turnover/yr", "{:.2f}"),
}  # fmt: skip


def buy_and_hold(
    close: torch.Tensor, weights: torch.Tensor, initial_cash: float, cost: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Account values `(T,)` and traded value `(T,)` (float64) of buying whole shares with the
    fractions `weights (N,)` of `initial_cash` at the closes `close[0] (T, N)`, cost included,
    and holding them. Day 0's value is `initial_cash` (before the purchase), as the agent's."""
    close = close.double()
    unit_cost = close[0] * (1.0 + cost)
    shares = torch.floor(initial_cash * weights.double() / unit_cost)  # (N,)
    cash = initial_cash - (shares * unit_cost).sum()
    values = cash + close @ shares
    values[0] = initial_cash
    traded = torch.zeros_like(values)
    traded[0] = (shares * close[0]).sum()
    return values, traded


def _clean(x: object) -> object:
    """NaN / inf as None (JSON's null), recursively; numpy / torch scalars as floats."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    return x


def backtest(
    run_dir: str | Path,
    data: str | None = None,
    start: str | None = None,
    end: str | None = None,
    out: str | Path | None = None,
) -> dict:
    """Score run `run_dir`'s best policy on the backtest period; see the module docstring.

    data: a CSV / Parquet panel to trade instead of the run's market (same tickers, in the same
    order, as the run was trained on; indicators are standardised with that file's own training
    period, i.e. the dates before the run's `split`).
    start, end: first and last date (YYYY-MM-DD) of the backtest; default the run's backtest
    period (from its `split` to the end of the data).
    out: folder for `backtest.json` and `backtest.png`; default `run_dir`.

    Returns {"period", "tickers", "agent", "equal_weight", "assets", "series", ...}: metrics
    by strategy (`METRICS`) and the daily account values behind them.
    """
    from xiaoyarl.agents.settings import load_saved_config
    from xiaoyarl.policy import load_policy

    run_dir = Path(run_dir)
    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        raise CheckpointError(f"{run_dir} has no config.yaml: it is not a xiaoyarl run folder.")
    config = load_saved_config(config_path)
    if config.env_id != ENV_ID:
        raise CheckpointError(
            f"run {run_dir} was trained on {config.env_id}, not on {ENV_ID}: a backtest needs a "
            f"run of the trading env (xiaoyarl train ppo {ENV_ID} --set env_kwargs={{...}})."
        )
    policy = load_policy(run_dir)
    env_kwargs = dict(getattr(config, "env_kwargs", None) or {})
    if data is not None:
        env_kwargs["data"] = str(data)
        env_kwargs.pop("market", None)  # "file", resolved from `data`
    env_kwargs["period"] = "backtest"
    if start is not None:
        env_kwargs["backtest_start"] = str(start)
    if end is not None:
        env_kwargs["backtest_end"] = str(end)
    env = StockTradingEnv(1, "cpu", seed=config.seed, **env_kwargs)
    if (env.spec.state_dim, env.spec.action_dim) != (policy.state_dim, policy.meta["action_dim"]):
        raise ConfigError(
            f"the backtest market ({env.market.name}, {env.market.num_tickers} tickers, "
            f"{len(env.config.indicators)} indicators: state of {env.spec.state_dim} values) "
            f"does not match the policy of {run_dir} (state of {policy.state_dim} values, "
            f"{policy.meta['action_dim']} assets). Give data with the tickers the run was "
            f"trained on."
        )

    state, _ = env.reset(seed=config.seed)
    values, traded = [env.account_value()], []
    with torch.no_grad():
        for _ in range(env.spec.max_step):
            action = policy.act_normalized(state.to(policy.device)).to(env.device)
            state, _, _, _, info = env.step(action)
            values.append(info["account_value"])
            traded.append(info["traded_value"])
    agent_values = torch.cat(values)  # (days,)
    agent_traded = torch.cat(traded)

    p = env.periods
    close = env.closes[p.first : p.last + 1]  # (days, N)
    n_assets = env.market.num_tickers
    cash, cost = env.initial_cash, env.cost
    index_values, index_traded = buy_and_hold(
        close, torch.full((n_assets,), 1.0 / n_assets), cash, cost
    )
    asset_series = {}
    for i, ticker in enumerate(env.market.tickers):
        weights = torch.zeros(n_assets)
        weights[i] = 1.0
        asset_series[ticker] = buy_and_hold(close, weights, cash, cost)

    dates = [str(d) for d in env.market.dates[p.first : p.last + 1]]
    result = {
        "run_dir": str(run_dir),
        "market": env.market.name,
        "period": {"start": dates[0], "end": dates[-1], "days": len(dates)},
        "tickers": list(env.market.tickers),
        "initial_cash": cash,
        "transaction_cost": cost,
        "agent": performance(agent_values, agent_traded),
        "equal_weight": performance(index_values, index_traded),
        "assets": {t: performance(v, tr) for t, (v, tr) in asset_series.items()},
        "series": {
            "dates": dates,
            "agent": agent_values.tolist(),
            "equal_weight": index_values.tolist(),
            "assets": {t: v.tolist() for t, (v, _) in asset_series.items()},
        },
    }
    result = cast(dict, _clean(result))  # a dict comes back a dict
    out_dir = Path(out) if out is not None else run_dir
    with atomic_output(out_dir / "backtest.json") as path:
        path.write_text(json.dumps(result, indent=1, allow_nan=False) + "\n")
    plot_backtest(result, out_dir / "backtest.png")
    return result


def format_report(result: dict) -> str:
    """The numbers of a `backtest` result as a text table (what `xiaoyarl backtest` prints)."""
    rows = [("agent", result["agent"]), ("equal-weight buy & hold", result["equal_weight"])]
    rows += [(f"{ticker} buy & hold", m) for ticker, m in result["assets"].items()]
    width = max(len(name) for name, _ in rows)
    period = result["period"]
    lines = [
        f"backtest {period['start']} .. {period['end']} ({period['days']} trading days) on "
        f"{result['market']}",
        " ".join([" " * width] + [f"{title:>12s}" for title, _ in METRICS.values()]),
    ]
    for name, numbers in rows:
        cells = [
            "n/a" if numbers.get(key) is None else form.format(numbers[key])
            for key, (_, form) in METRICS.items()
        ]
        lines.append(" ".join([f"{name:<{width}s}"] + [f"{c:>12s}" for c in cells]))
    return "\n".join(lines)


def plot_backtest(result: dict, path: str | Path) -> Path:
    """Draw account values (relative to the initial cash) and drawdowns over the period."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = result["series"]
    dates = np.array(series["dates"], dtype="datetime64[D]")
    cash = result["initial_cash"]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True,
                                      gridspec_kw={"height_ratios": [2, 1]})  # fmt: skip
    for ticker, values in series["assets"].items():
        top.plot(dates, np.asarray(values) / cash, lw=0.8, alpha=0.5, label=ticker)
    for name, style in (("equal_weight", "k--"), ("agent", "C3-")):
        values = np.asarray(series[name])
        label = "equal-weight buy & hold" if name == "equal_weight" else "agent"
        sharpe = result[name]["sharpe"]
        label += f" (Sharpe {sharpe:.2f})" if sharpe is not None else ""
        top.plot(dates, values / cash, style, lw=1.8, label=label)
        bottom.plot(dates, drawdowns(values), style, lw=1.2)
    top.set_ylabel("account value / initial cash")
    top.set_title(f"backtest {result['period']['start']} .. {result['period']['end']}")
    top.legend(fontsize=7, ncol=2)
    top.grid(alpha=0.3)
    bottom.set_ylabel("drawdown")
    bottom.grid(alpha=0.3)
    fig.autofmt_xdate()
    fig.tight_layout()
    path = Path(path)
    with atomic_output(path) as partial:
        fig.savefig(partial, dpi=100, format="png")
    plt.close(fig)
    return path
