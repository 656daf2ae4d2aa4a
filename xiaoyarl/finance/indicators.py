"""Technical indicators and the turbulence index, as torch tensors over a whole daily panel.

The indicators are the ones FinRL feeds its trading agents, with the names and definitions of
the `stockstats` package (0.6.x), whose conventions are copied exactly:

- `macd`: EMA(close, 12) - EMA(close, 26); EMAs with span s are pandas `ewm(span=s,
  adjust=True, min_periods=1)`, i.e. weights (1 - a)^k normalised over the days seen so far,
  a = 2 / (s + 1). Day 0 is 0.
- `boll_ub`, `boll_lb`: SMA(close, 20) +- 2 x rolling std (ddof 1) over the last 20 days, both
  with min_periods 1 (partial windows at the start).
- `rsi_30`: 100 x SMMA(up moves) / (SMMA(up) + SMMA(down)), SMMA = `ewm(alpha=1/30,
  adjust=True)`; the first day's move is 0; 50 where both averages are 0 and on day 0.
- `cci_30`: (TP - SMA(TP, 30)) / (0.015 x mean absolute deviation of TP over 30 days),
  TP = (high + low + close) / 3; the SMA has min_periods 1, the deviation is 0 until 30 days
  exist, and CCI is 0 where the deviation is 0 (so on days 0..28).
- `dx_30`: 100 |+DI - -DI| / (+DI + -DI) with +DI = 100 SMMA(+DM, 30) / ATR, ATR = SMMA of the
  true range (previous close of day 0 = its own close), 0 where +DI + -DI = 0.
- `close_30_sma`, `close_60_sma`: rolling means with min_periods 1.

They agree with stockstats to floating-point rounding on every day, except `boll_ub/lb` on day 0,
where stockstats gives NaN (the std of one value) and this module gives the close (std 0): FinRL
back-fills that NaN with day 1, a look-ahead that is avoided here. Early values are defined but
noisy; the trading env skips a warm-up of 60 days (the longest window) before trading.

Every indicator is causal: its value on day t uses days <= t only (EMAs are computed by a
log-depth scan that only ever adds earlier days to later ones). Shapes: prices `(T, N)` for T
dates and N tickers, `ohlcv (T, N, 5)`; every indicator `(T, N)`, all indicators `(T, N, K)`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from xiaoyarl.errors import ConfigError

BOLL_WINDOW = 20
BOLL_STD_TIMES = 2.0
MACD_SPANS = (12, 26)
TURBULENCE_WINDOW = 252  # trading days of history for the turbulence index (FinRL: one year)


# --- moving averages -------------------------------------------------------------------------
def linear_scan(x: torch.Tensor, decay: float) -> torch.Tensor:
    """`y[t] = x[t] + decay * y[t - 1]` along dim 0 (`y[0] = x[0]`), in log2(T) tensor ops:
    after the pass with shift k, y[t] sums decay^j x[t - j] for j < 2k (Hillis-Steele scan)."""
    y, k, factor = x, 1, decay
    while k < x.shape[0]:
        y = torch.cat((y[:k], y[k:] + factor * y[:-k]))
        k, factor = 2 * k, factor * factor
    return y


def ewm_mean(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """pandas `x.ewm(alpha=alpha, adjust=True).mean()` along dim 0: on day t the weighted mean of
    days 0..t with weights (1 - alpha)^(t - s)."""
    decay = 1.0 - alpha
    t = torch.arange(x.shape[0], dtype=x.dtype, device=x.device).reshape(-1, *[1] * (x.dim() - 1))
    total_weight = (1.0 - decay ** (t + 1)) / alpha  # sum of decay^j, j = 0..t
    return linear_scan(x, decay) / total_weight


def ema(x: torch.Tensor, span: int) -> torch.Tensor:
    """stockstats' EMA: `ewm(span=span, adjust=True, min_periods=1)`, alpha = 2 / (span + 1)."""
    return ewm_mean(x, 2.0 / (span + 1.0))


def smma(x: torch.Tensor, window: int) -> torch.Tensor:
    """stockstats' smoothed moving average: `ewm(alpha=1 / window, adjust=True)`."""
    return ewm_mean(x, 1.0 / window)


def _windows(x: torch.Tensor, window: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The last `window` days of every day: values `(T, N, window)` (zero before day 0), a mask of
    the real days `(T, 1, window)` and their count `(T, 1)`."""
    t, n = x.shape
    padded = torch.cat((x.new_zeros(window - 1, n), x))
    values = padded.unfold(0, window, 1)  # (T, N, window), oldest first
    day = torch.arange(t, device=x.device).reshape(t, 1, 1)
    position = torch.arange(window, device=x.device).reshape(1, 1, window)
    mask = position >= (window - 1 - day)  # (T, 1, window)
    count = mask.sum(-1).to(x.dtype)  # (T, 1) = min(t + 1, window)
    return values * mask, mask, count


def rolling_mean(x: torch.Tensor, window: int) -> torch.Tensor:
    """Mean of the last `window` days, of fewer at the start (pandas `rolling(min_periods=1)`)."""
    values, _, count = _windows(x, window)
    return values.sum(-1) / count


def rolling_std(x: torch.Tensor, window: int) -> torch.Tensor:
    """Sample std (ddof 1) of the last `window` days, min_periods 1; 0 on day 0 (pandas: NaN)."""
    values, mask, count = _windows(x, window)
    mean = values.sum(-1, keepdim=True) / count.unsqueeze(-1)
    squares = ((values - mean) * mask).square().sum(-1)
    return (squares / (count - 1).clamp(min=1)).sqrt()


def rolling_mad(x: torch.Tensor, window: int) -> torch.Tensor:
    """Mean absolute deviation from the window's mean over full windows of `window` days; 0 on
    the first `window - 1` days (stockstats' `_mad`)."""
    values, mask, count = _windows(x, window)
    mean = values.sum(-1, keepdim=True) / count.unsqueeze(-1)
    mad = ((values - mean) * mask).abs().sum(-1) / count
    return torch.where(count >= window, mad, torch.zeros_like(mad))


def _diff(x: torch.Tensor) -> torch.Tensor:
    """`x[t] - x[t - 1]`, 0 on day 0."""
    return torch.cat((torch.zeros_like(x[:1]), x[1:] - x[:-1]))


def _safe_ratio(num: torch.Tensor, den: torch.Tensor, fill: float) -> torch.Tensor:
    """`num / den`, `fill` where `den == 0`."""
    return torch.where(den != 0, num / torch.where(den != 0, den, 1.0), torch.full_like(num, fill))


# --- the indicators: each ohlcv (T, N, 5) -> (T, N) --------------------------------------------
def _open_high_low_close(ohlcv: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return ohlcv[..., 0], ohlcv[..., 1], ohlcv[..., 2], ohlcv[..., 3]


def macd(ohlcv: torch.Tensor) -> torch.Tensor:
    """MACD: the 12-day minus the 26-day exponential moving average of the close."""
    close = ohlcv[..., 3]
    return ema(close, MACD_SPANS[0]) - ema(close, MACD_SPANS[1])


def boll_ub(ohlcv: torch.Tensor) -> torch.Tensor:
    """The upper Bollinger band: the 20-day mean of the close plus 2 standard deviations."""
    close = ohlcv[..., 3]
    return rolling_mean(close, BOLL_WINDOW) + BOLL_STD_TIMES * rolling_std(close, BOLL_WINDOW)


def boll_lb(ohlcv: torch.Tensor) -> torch.Tensor:
    """The lower Bollinger band: the 20-day mean of the close minus 2 standard deviations."""
    close = ohlcv[..., 3]
    return rolling_mean(close, BOLL_WINDOW) - BOLL_STD_TIMES * rolling_std(close, BOLL_WINDOW)


def rsi(ohlcv: torch.Tensor, window: int = 30) -> torch.Tensor:
    """The relative strength index over `window` days (Wilder's smoothing), 0-100."""
    change = _diff(ohlcv[..., 3])
    up = smma(change.clamp(min=0), window)
    down = smma((-change).clamp(min=0), window)
    value = _safe_ratio(100.0 * up, up + down, 50.0)
    value[0] = 50.0
    return value


def cci(ohlcv: torch.Tensor, window: int = 30) -> torch.Tensor:
    """The commodity channel index over `window` days, from the typical price."""
    _, high, low, close = _open_high_low_close(ohlcv)
    typical = (close + high + low) / 3.0
    return _safe_ratio(
        typical - rolling_mean(typical, window), 0.015 * rolling_mad(typical, window), 0.0
    )


def dx(ohlcv: torch.Tensor, window: int = 30) -> torch.Tensor:
    """The directional movement index over `window` days, 0-100."""
    _, high, low, close = _open_high_low_close(ohlcv)
    up_move, down_move = _diff(high), -_diff(low)
    plus_dm = torch.where((up_move > 0) & (up_move > down_move), up_move, 0.0)
    minus_dm = torch.where((down_move > 0) & (down_move > up_move), down_move, 0.0)
    prev_close = torch.cat((close[:1], close[:-1]))
    true_range = torch.maximum(high - low, (high - prev_close).abs())
    true_range = torch.maximum(true_range, (low - prev_close).abs())
    atr = smma(true_range, window)
    plus_di = _safe_ratio(100.0 * smma(plus_dm, window), atr, 0.0)  # 0 (not NaN) where ATR = 0
    minus_di = _safe_ratio(100.0 * smma(minus_dm, window), atr, 0.0)
    return _safe_ratio(100.0 * (plus_di - minus_di).abs(), plus_di + minus_di, 0.0)


def close_sma(ohlcv: torch.Tensor, window: int) -> torch.Tensor:
    """The simple moving average of the close over `window` days."""
    return rolling_mean(ohlcv[..., 3], window)


INDICATORS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "macd": macd,
    "boll_ub": boll_ub,
    "boll_lb": boll_lb,
    "rsi_30": rsi,
    "cci_30": cci,
    "dx_30": dx,
    "close_30_sma": lambda ohlcv: close_sma(ohlcv, 30),
    "close_60_sma": lambda ohlcv: close_sma(ohlcv, 60),
}
DEFAULT_INDICATORS: tuple[str, ...] = tuple(INDICATORS)  # FinRL's INDICATORS list, in its order
# Indicators in price units (divided by the close in the env's state); the others are 0..100
# oscillators (rsi, dx) or unitless (cci).
PRICE_LEVEL_INDICATORS = frozenset({"boll_ub", "boll_lb", "close_30_sma", "close_60_sma"})
PRICE_DIFFERENCE_INDICATORS = frozenset({"macd"})


def check_indicator_names(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """`names` as a tuple, or a `ConfigError` naming the unknown ones and the known ones."""
    if isinstance(names, str):
        names = [names]
    unknown = [n for n in names if n not in INDICATORS]
    if unknown:
        raise ConfigError(
            f"unknown indicator(s) {', '.join(map(repr, unknown))}; choose from "
            f"{', '.join(INDICATORS)} (stockstats names)."
        )
    if len(set(names)) != len(names):
        raise ConfigError(f"indicators are listed twice: {list(names)}.")
    return tuple(names)


def compute_indicators(
    ohlcv: torch.Tensor, names: tuple[str, ...] | list[str] = DEFAULT_INDICATORS
) -> torch.Tensor:
    """Indicators `names` of a panel `(T, N, 5)`: `(T, N, K)`, same dtype and device."""
    names = check_indicator_names(names)
    if ohlcv.dim() != 3 or ohlcv.shape[-1] != 5:
        raise ValueError(f"ohlcv must have shape (T, N, 5), got {tuple(ohlcv.shape)}.")
    return torch.stack([INDICATORS[name](ohlcv) for name in names], dim=-1)


# --- turbulence ----------------------------------------------------------------------------------
def turbulence(close: torch.Tensor, window: int = TURBULENCE_WINDOW) -> torch.Tensor:
    """FinRL's turbulence index `(T,)` of closing prices `(T, N)`.

    Day t's returns r_t = close_t / close_{t-1} - 1 `(N,)` against the mean mu and covariance S
    (ddof 1) of the returns of the `window` days before it (t - window .. t - 1; only
    1 .. window - 1 on day `window`, as day 0 has no return): (r_t - mu) pinv(S) (r_t - mu)^T.
    0 on days 0 .. window - 1. Causal: day t uses closes up to day t.

    One difference from FinRL's `calculate_turbulence`: FinRL also sets the first two positive
    values (days `window` and `window + 1`) to 0, a quirk of its loop that is not copied here.
    Computed for all days at once from cumulative sums of r and r r^T (float64 inside).
    """
    num_dates, n = close.shape
    out = torch.zeros(num_dates, dtype=close.dtype, device=close.device)
    if num_dates <= window:
        return out
    c = close.double()
    returns = torch.cat((c.new_zeros(1, n), c[1:] / c[:-1] - 1.0))  # (T, N), day 0 zero
    sum_r = torch.cat((c.new_zeros(1, n), returns.cumsum(0)))  # (T + 1, N): sums of days < t
    outer = returns.unsqueeze(2) * returns.unsqueeze(1)  # (T, N, N)
    sum_rr = torch.cat((c.new_zeros(1, n, n), outer.cumsum(0)))  # (T + 1, N, N)

    days = torch.arange(window, num_dates, device=close.device)  # (D,)
    first = (days - window).clamp(min=1)  # first history day of each day
    count = (days - first).to(torch.float64).reshape(-1, 1)  # (D, 1)
    mean = (sum_r[days] - sum_r[first]) / count  # (D, N)
    second = sum_rr[days] - sum_rr[first]  # (D, N, N): sum of r r^T over the history
    cov = (second - count.unsqueeze(-1) * mean.unsqueeze(2) * mean.unsqueeze(1)) / (
        count.unsqueeze(-1) - 1.0
    )
    deviation = (returns[days] - mean).unsqueeze(1)  # (D, 1, N)
    distance = deviation @ torch.linalg.pinv(cov) @ deviation.transpose(1, 2)  # (D, 1, 1)
    out[window:] = distance.reshape(-1).to(close.dtype)
    return out
