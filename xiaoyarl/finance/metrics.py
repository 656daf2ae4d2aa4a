"""Performance metrics of a series of daily account values, as quant libraries report them.

Inputs are account values `(num_days,)` V_0 .. V_n (numpy, torch or a list; V_0 is the value
before the first day's return), so there are n daily returns r_t = V_t / V_{t-1} - 1.
Conventions (those of empyrical / pyfolio):

- a year has `TRADING_DAYS` = 252 trading days; annual return is geometric:
  (V_n / V_0)^(252 / n) - 1;
- volatility is the sample std (ddof 1) of daily returns times sqrt(252);
- Sharpe = mean(r - rf) / std(r) x sqrt(252), with rf the daily rate equivalent to the annual
  `risk_free` rate ((1 + risk_free)^(1/252) - 1); Sortino uses the downside deviation
  sqrt(mean(min(r - rf, 0)^2)) over all days instead of the std;
- maximum drawdown is the largest fall from a running peak, as a negative fraction (-0.25 is
  a 25% fall); Calmar = annual return / |maximum drawdown|;
- turnover is traded value (buys plus sells) over the average account value, per year.

Undefined ratios (a zero std, no drawdown) are NaN, except that a series with no movement at
all (every return 0, e.g. an agent that holds cash) has Sharpe and Sortino 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

# Not empyrical (unmaintained since 2020) nor its fork empyrical-reloaded: it needs Python 3.11+,
# pandas and scipy, compounds returns (so the last bits differ) and gives NaN for a flat series.
TRADING_DAYS = 252


def _values(values: np.ndarray | torch.Tensor | Sequence[float]) -> np.ndarray:
    """Account values as float64 numpy `(num_days,)`; at least two, all positive and finite."""
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().double().numpy()
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or len(array) < 2:
        raise ValueError(f"need a 1-d series of at least 2 account values, got {array.shape}.")
    if not (np.isfinite(array).all() and (array > 0).all()):
        raise ValueError("account values must be positive and finite.")
    return array


def daily_returns(values: np.ndarray | torch.Tensor | Sequence[float]) -> np.ndarray:
    """r_t = V_t / V_{t-1} - 1: `(num_days - 1,)`."""
    v = _values(values)
    return v[1:] / v[:-1] - 1.0


def cumulative_return(values: np.ndarray | torch.Tensor | Sequence[float]) -> float:
    """V_n / V_0 - 1."""
    v = _values(values)
    return float(v[-1] / v[0] - 1.0)


def annual_return(values: np.ndarray | torch.Tensor | Sequence[float]) -> float:
    """Geometric: (V_n / V_0)^(252 / n) - 1 for n daily returns."""
    v = _values(values)
    return float((v[-1] / v[0]) ** (TRADING_DAYS / (len(v) - 1)) - 1.0)


def annual_volatility(values: np.ndarray | torch.Tensor | Sequence[float]) -> float:
    """Sample std (ddof 1) of daily returns x sqrt(252); NaN with a single return."""
    r = daily_returns(values)
    if len(r) < 2:
        return math.nan
    return float(r.std(ddof=1) * math.sqrt(TRADING_DAYS))


def _daily_risk_free(risk_free: float) -> float:
    return (1.0 + risk_free) ** (1.0 / TRADING_DAYS) - 1.0


def sharpe_ratio(
    values: np.ndarray | torch.Tensor | Sequence[float], risk_free: float = 0.0
) -> float:
    """Annualised Sharpe ratio: mean(r - rf) / std(r, ddof 1) x sqrt(252), rf daily."""
    excess = daily_returns(values) - _daily_risk_free(risk_free)
    if len(excess) < 2:
        return math.nan
    std = excess.std(ddof=1)
    if std == 0:
        return 0.0 if (excess == 0).all() else math.nan
    return float(excess.mean() / std * math.sqrt(TRADING_DAYS))


def sortino_ratio(
    values: np.ndarray | torch.Tensor | Sequence[float], risk_free: float = 0.0
) -> float:
    """Annualised Sortino ratio: mean(r - rf) / sqrt(mean(min(r - rf, 0)^2)) x sqrt(252)."""
    excess = daily_returns(values) - _daily_risk_free(risk_free)
    downside = math.sqrt(float(np.mean(np.minimum(excess, 0.0) ** 2)))
    if downside == 0:
        return 0.0 if (excess == 0).all() else math.nan
    return float(excess.mean() / downside * math.sqrt(TRADING_DAYS))


def drawdowns(values: np.ndarray | torch.Tensor | Sequence[float]) -> np.ndarray:
    """V_t / max(V_0..V_t) - 1 on every day `(num_days,)`: 0 at a new peak, negative below."""
    v = _values(values)
    return v / np.maximum.accumulate(v) - 1.0


def max_drawdown(values: np.ndarray | torch.Tensor | Sequence[float]) -> float:
    """The lowest drawdown, a fraction <= 0 (-0.25: 25% below the running peak)."""
    return float(drawdowns(values).min())


def calmar_ratio(values: np.ndarray | torch.Tensor | Sequence[float]) -> float:
    """Annual return / |maximum drawdown|; NaN without a drawdown."""
    drawdown = max_drawdown(values)
    if drawdown == 0:
        return math.nan
    return annual_return(values) / -drawdown


def annual_turnover(
    traded_value: np.ndarray | torch.Tensor | Sequence[float],
    values: np.ndarray | torch.Tensor | Sequence[float],
) -> float:
    """Sum of traded value (buys and sells, in money) / mean account value, x 252 / n: the
    fraction of the account traded per year. `traded_value` has one entry per day (any length
    matching `values`' days, e.g. n steps or n + 1 days with the initial purchase)."""
    traded = np.asarray(
        traded_value.detach().cpu().double().numpy()
        if isinstance(traded_value, torch.Tensor)
        else traded_value,
        dtype=np.float64,
    )
    v = _values(values)
    return float(traded.sum() / v.mean() * TRADING_DAYS / (len(v) - 1))


def performance(
    values: np.ndarray | torch.Tensor | Sequence[float],
    traded_value: np.ndarray | torch.Tensor | Sequence[float] | None = None,
    risk_free: float = 0.0,
) -> dict[str, float]:
    """Every metric of one account-value series, by name (turnover only with `traded_value`)."""
    v = _values(values)
    out = {
        "final_value": float(v[-1]),
        "cumulative_return": cumulative_return(v),
        "annual_return": annual_return(v),
        "annual_volatility": annual_volatility(v),
        "sharpe": sharpe_ratio(v, risk_free),
        "sortino": sortino_ratio(v, risk_free),
        "max_drawdown": max_drawdown(v),
        "calmar": calmar_ratio(v),
    }
    if traded_value is not None:
        out["annual_turnover"] = annual_turnover(traded_value, v)
    return out
