"""Indicators against stockstats, turbulence against a slow loop, and causality of both."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xiaoyarl.finance.indicators import (
    DEFAULT_INDICATORS,
    compute_indicators,
    ewm_mean,
    linear_scan,
    turbulence,
)
from xiaoyarl.finance.synthetic import synthetic_market


def test_linear_scan_equals_the_recurrence_written_as_a_loop():
    x = torch.randn(37, 3, dtype=torch.float64)
    expected = x.clone()
    for t in range(1, 37):
        expected[t] = x[t] + 0.9 * expected[t - 1]
    torch.testing.assert_close(linear_scan(x, 0.9), expected, rtol=1e-13, atol=1e-13)
    # adjust=True EWM: a weighted mean of the days so far, weights 0.9^age
    weights = 0.9 ** torch.arange(36, -1, -1, dtype=torch.float64)
    last = (weights[:, None] * x).sum(0) / weights.sum()
    torch.testing.assert_close(ewm_mean(x, 0.1)[-1], last, rtol=1e-13, atol=1e-13)


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")
def test_indicators_equal_stockstats_on_every_day():
    """stockstats 0.6.x is the reference (the names FinRL users know). Day 0 of the Bollinger
    bands is NaN there (std of one value) and the close here; every other value agrees."""
    pd = pytest.importorskip("pandas")
    stockstats = pytest.importorskip("stockstats")
    market = synthetic_market(3, 320, seed=5, structure="regimes")
    ours = compute_indicators(market.ohlcv).numpy()  # (T, N, K)
    frame = market.to_frame()
    for i, ticker in enumerate(market.tickers):
        one = frame[frame["ticker"] == ticker].drop(columns="ticker").reset_index(drop=True)
        wrapped = stockstats.wrap(pd.DataFrame(one))
        for k, name in enumerate(DEFAULT_INDICATORS):
            reference = wrapped[name].to_numpy(dtype=np.float64)
            first = 1 if name.startswith("boll") else 0
            assert np.isfinite(ours[:, i, k]).all()
            np.testing.assert_allclose(
                ours[first:, i, k], reference[first:], rtol=1e-9, atol=1e-9,
                err_msg=f"{name} of {ticker}",
            )  # fmt: skip
        assert np.isnan(wrapped["boll_ub"].iloc[0])


def test_indicators_and_turbulence_are_causal():
    """Changing every price after day t leaves every value up to day t unchanged, bit for bit."""
    market = synthetic_market(4, 400, seed=2)
    t = 300
    changed = market.ohlcv.clone()
    changed[t + 1 :] *= torch.exp(0.1 * torch.randn(changed[t + 1 :].shape, dtype=torch.float64))
    before, after = compute_indicators(market.ohlcv), compute_indicators(changed)
    assert torch.equal(before[: t + 1], after[: t + 1])
    assert not torch.equal(before[t + 1 :], after[t + 1 :])
    turb_before, turb_after = turbulence(market.close), turbulence(changed[..., 3])
    assert torch.equal(turb_before[: t + 1], turb_after[: t + 1])
    assert not torch.equal(turb_before[t + 1 :], turb_after[t + 1 :])


def slow_turbulence(close: np.ndarray, window: int = 252) -> np.ndarray:
    """FinRL's `calculate_turbulence` without its zeroing of the first two values: for each day,
    the returns of the `window` days before it (day 0 has none), their mean and covariance, and
    the Mahalanobis distance of the day's returns with the pseudo-inverse."""
    returns = close[1:] / close[:-1] - 1.0  # returns[t - 1] is day t's
    out = np.zeros(len(close))
    for t in range(window, len(close)):
        history = returns[max(1, t - window) - 1 : t - 1]  # days max(1, t - window) .. t - 1
        mean = history.mean(axis=0)
        cov = np.atleast_2d(np.cov(history, rowvar=False, ddof=1))
        deviation = returns[t - 1] - mean
        out[t] = deviation @ np.linalg.pinv(cov) @ deviation
    return out


def test_turbulence_equals_the_slow_loop():
    market = synthetic_market(4, 330, seed=9, structure="regimes")
    fast = turbulence(market.close).numpy()
    slow = slow_turbulence(market.close.numpy())
    assert (fast[:252] == 0).all() and (fast[252:] > 0).all()
    np.testing.assert_allclose(fast, slow, rtol=1e-8, atol=1e-10)
    short = turbulence(market.close, window=20).numpy()  # another window, one asset
    np.testing.assert_allclose(short, slow_turbulence(market.close.numpy(), 20), rtol=1e-8)
    one = turbulence(market.close[:, :1], window=20).numpy()
    np.testing.assert_allclose(one, slow_turbulence(market.close[:, :1].numpy(), 20), rtol=1e-8)
