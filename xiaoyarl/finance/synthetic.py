"""Seeded synthetic markets: the default data of the trading env (nothing is downloaded).

`synthetic_market(num_assets, num_days, seed, structure)` simulates daily log-returns of
correlated assets and turns them into consistent OHLCV bars on business days from a fixed start
date. Same arguments -> the same `Market`, bit for bit (numpy's PCG64 generator, float64, one
fixed order of draws whatever the structure).

The model (structure "regimes", and the base of the planted structures):

- a hidden Markov chain over three regimes, bull / bear / volatile (`REGIMES`), that stays in
  its regime for about 50-70 days on average;
- one market factor with GARCH(1, 1) volatility clustering, scaled and shifted by the regime:
  f_t = drift(regime) + vol(regime) x e_t, e_t = sqrt(h_t) z_t,
  h_{t+1} = omega + alpha e_t^2 + beta h_t (daily vol 1% in the long run);
- asset i: r_{i,t} = beta_i f_t + s_i vol(regime) sqrt(h_t / h_bar) u_{i,t} (betas 0.6-1.4,
  idiosyncratic vol 0.8-1.5% a day), so assets are correlated and share the volatility clusters.

Planted structures (asset 0, ticker SYN0, carries it; the others follow the base model):

- "mean_reversion": asset 0's log price is its factor trend plus an AR(1) deviation x_t =
  0.8 x_{t-1} + noise with a stationary std of 8%: a price far below its moving averages comes
  back within days (half-life 3 days). Learnable from the state (close vs SMAs / Bollinger
  bands); a long-only rule on it beats equal-weight buy-and-hold by 0.5-1.7 Sharpe a year.
- "momentum": asset 0 has a slowly wandering drift m_t = 0.98 m_{t-1} + noise (std 0.3% a day),
  so trends persist for weeks and show in MACD and the SMAs.
- "random_walk": no structure at all: independent assets, constant volatility, no regimes and
  arithmetic returns of mean 0 (log drift -sigma^2/2): nothing is predictable, and an agent that
  claims an edge on it is fitting noise.

Bars: open_t = close_{t-1} x exp(gap), high = max(open, close) x exp(|n|), low = min(open,
close) x exp(-|n|) with gap and n of a fraction of the day's volatility, so low <= open, close
<= high; volume is log-normal and rises with the size of the move (always > 0).
"""

from __future__ import annotations

import numpy as np
import torch

from xiaoyarl.errors import ConfigError
from xiaoyarl.finance.data import Market

STRUCTURES = ("regimes", "mean_reversion", "momentum", "random_walk")
START_DATE = "2015-01-02"
REGIMES = ("bull", "bear", "volatile")
# Rows: from-regime; stays ~67 / ~40 / ~33 days on average.
TRANSITIONS = np.array([
    [0.985, 0.005, 0.010],
    [0.010, 0.975, 0.015],
    [0.020, 0.010, 0.970],
])  # fmt: skip
REGIME_DRIFT = np.array([0.15, -0.20, 0.0]) / 252  # market factor drift per day
REGIME_VOL = np.array([0.8, 1.2, 2.0])  # multiplies the GARCH volatility
GARCH_ALPHA, GARCH_BETA, DAILY_VOL = 0.08, 0.90, 0.01
MEAN_REVERSION_PHI, MEAN_REVERSION_STD = 0.8, 0.08
MOMENTUM_PHI, MOMENTUM_STD = 0.98, 0.003


def business_days(start: str, num_days: int) -> np.ndarray:
    """`num_days` consecutive business days (Monday-Friday) from `start` on: datetime64[D]."""
    first = np.busday_offset(np.datetime64(start, "D"), 0, roll="forward")
    return np.busday_offset(first, np.arange(num_days), roll="forward").astype("datetime64[D]")


def synthetic_market(
    num_assets: int = 5,
    num_days: int = 1260,
    seed: int = 0,
    structure: str = "regimes",
    start: str = START_DATE,
    dtype: torch.dtype = torch.float64,
) -> Market:
    """A seeded synthetic daily panel of `num_assets` tickers SYN0.. over `num_days` business
    days from `start` (see the module docstring for the model and the `structure` choices)."""
    if structure not in STRUCTURES:
        raise ConfigError(f"unknown market structure {structure!r}; choose one of {STRUCTURES}.")
    if num_assets < 1 or num_days < 2:
        raise ConfigError(
            f"a synthetic market needs num_assets >= 1 and num_days >= 2, got {num_assets} and "
            f"{num_days}."
        )
    rng = np.random.default_rng(seed)
    n, t = num_assets, num_days
    # every draw, in one fixed order, whatever the structure
    start_price = rng.uniform(20.0, 200.0, n)
    betas = rng.uniform(0.6, 1.4, n)
    idio_vol = rng.uniform(0.008, 0.015, n)
    base_volume = rng.uniform(1e5, 1e7, n)
    regime_u = rng.random(t)
    factor_z = rng.standard_normal(t)
    idio_z = rng.standard_normal((t, n))
    planted_z = rng.standard_normal(t)
    gap_z = rng.standard_normal((t, n))
    range_z = np.abs(rng.standard_normal((2, t, n)))
    volume_z = rng.standard_normal((t, n))

    if structure == "random_walk":
        sigma = np.full((t, n), 1.0) * (idio_vol + DAILY_VOL) / 2  # constant, 0.9-1.25% a day
        log_returns = sigma * idio_z - 0.5 * sigma**2
    else:
        regime = np.empty(t, dtype=np.int64)
        cumulative = TRANSITIONS.cumsum(1)
        state = 0
        for day in range(t):  # Markov chain over regimes
            regime[day] = state
            state = min(int(np.searchsorted(cumulative[state], regime_u[day], side="right")), 2)
        omega = DAILY_VOL**2 * (1.0 - GARCH_ALPHA - GARCH_BETA)
        variance = np.empty(t)
        h = DAILY_VOL**2
        for day in range(t):  # GARCH(1, 1)
            variance[day] = h
            shock = np.sqrt(h) * factor_z[day]
            h = omega + GARCH_ALPHA * shock**2 + GARCH_BETA * h
        scale = REGIME_VOL[regime] * np.sqrt(variance / DAILY_VOL**2)  # (T,) vol multiplier
        factor = REGIME_DRIFT[regime] + DAILY_VOL * scale * factor_z
        sigma = idio_vol * scale[:, None]  # (T, N) idiosyncratic vol of each day
        log_returns = betas * factor[:, None] + sigma * idio_z
        sigma = np.sqrt((betas * DAILY_VOL * scale[:, None]) ** 2 + sigma**2)  # total vol
        if structure == "mean_reversion":
            noise_std = MEAN_REVERSION_STD * np.sqrt(1.0 - MEAN_REVERSION_PHI**2)
            deviation = np.empty(t)
            x = 0.0
            for day in range(t):
                x = MEAN_REVERSION_PHI * x + noise_std * planted_z[day]
                deviation[day] = x
            # asset 0: factor trend plus the AR(1) deviation (replaces its idiosyncratic noise)
            log_returns[:, 0] = betas[0] * factor + np.diff(deviation, prepend=0.0)
        elif structure == "momentum":
            noise_std = MOMENTUM_STD * np.sqrt(1.0 - MOMENTUM_PHI**2)
            drift = np.empty(t)
            m = 0.0
            for day in range(t):
                m = MOMENTUM_PHI * m + noise_std * planted_z[day]
                drift[day] = m
            log_returns[:, 0] += np.concatenate(([0.0], drift[:-1]))  # known the day before
    log_returns[0] = 0.0  # day 0 is the start price
    close = start_price * np.exp(np.cumsum(log_returns, axis=0))
    previous = np.concatenate((start_price[None], close[:-1]))
    open_ = previous * np.exp(0.3 * sigma * gap_z)
    high = np.maximum(open_, close) * np.exp(0.5 * sigma * range_z[0])
    low = np.minimum(open_, close) * np.exp(-0.5 * sigma * range_z[1])
    volume = base_volume * np.exp(0.3 * volume_z) * (1.0 + np.abs(log_returns) / sigma)
    ohlcv = torch.from_numpy(np.stack((open_, high, low, close, volume), axis=-1)).to(dtype)
    tickers = tuple(f"SYN{i}" for i in range(n))
    name = f"synthetic(structure={structure}, seed={seed}, assets={n}, days={t})"
    return Market(business_days(start, t), tickers, ohlcv, name=name)
