"""`StockTradingEnv`: FinRL's stock-trading MDP as a batched torch simulator.

Each of `num_envs` sub-envs manages one account over a daily panel of N assets (a `Market`:
synthetic by default, a CSV / Parquet file, or a real sample; see `TradingConfig`). On a day t
the agent sees the account and the market up to the close of day t, trades at day t's close,
and is paid the change of its account value from day t's close to day t + 1's:

- action `(num_envs, N)` in [-1, 1], times `hmax` shares per asset, truncated to whole shares
  (2.7 -> 2, -2.7 -> -2): positive buys, negative sells;
- sells first: at most the shares held (no short selling); cash += price x shares x (1 - cost);
- then buys, at price x (1 + cost) a share: when the wanted buys cost more than the cash, every
  buy is scaled down by the same factor (a hair under cash / wanted cost) and rounded down, so
  cash never goes below 0 (no borrowing). FinRL fills buys one asset at a time, in order of
  action size; scaling all of them alike needs no loop over assets and does not depend on
  their order;
- when the turbulence index of day t (`finance.indicators.turbulence`) is at or above
  `turbulence_threshold`, nothing is bought and every position is sold (FinRL's risk control);
- reward = (value after the step at day t + 1's close - value before it at day t's close) x
  `reward_scale`, value = cash + holdings . close; transaction costs thus lower the reward.

State `(num_envs, 1 + 2N + K N)` float32, all of it known at day t's close:
[cash / initial_cash, close / close on the first training day (N), holdings x close /
initial_cash (N), K indicators x N assets (indicator-major)]. Indicators in price units are
divided by the close (Bollinger bands and SMAs as close-relative gaps, MACD as a fraction of
the price), then each (indicator, asset) is standardised with the mean and std of its values
up to that day (an expanding window, frozen from the last training day on, so a backtest is
scaled as training ended) and clipped to +-10: a state of day t depends on days <= t only.

Periods: dates [warmup, split) train, [split, end] backtest (the first `warmup` dates only warm
the indicators up). A training episode starts on a random day of the training period (drawn
from the env's own generator) and lasts `min(max_step, days in the period - 1)` steps, so every
training episode has the same length and ends (truncated) by the period's last date; a
backtest episode starts on the period's first date and runs to its last. Never terminated.
Finished sub-envs restart at once; `info["final_state"]` holds the observation before the
restart. `info` also holds `account_value` (float64, after the step, before any restart),
`traded_value` (buys plus sells at the close, float64) and `date_index` (int64, the day
reached), all `(num_envs,)`.

Accounting runs in float64 (cash of 1e6 and single shares do not fit float32's 7 digits); only
the observation and reward are float32. No Python loop over sub-envs or assets, no host sync in
`step`: it runs as is on a GPU.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import math
from dataclasses import dataclass
from typing import TypeGuard

import numpy as np
import torch

from xiaoyarl.envs.base import EnvSpec, VecEnv
from xiaoyarl.errors import ConfigError, EnvError
from xiaoyarl.finance.data import SAMPLES, Market, load_market, load_sample
from xiaoyarl.finance.indicators import (
    DEFAULT_INDICATORS,
    PRICE_DIFFERENCE_INDICATORS,
    PRICE_LEVEL_INDICATORS,
    check_indicator_names,
    compute_indicators,
    turbulence,
)
from xiaoyarl.finance.synthetic import START_DATE, STRUCTURES, synthetic_market

ENV_ID = "StockTrading-v0"
MARKETS = ("synthetic", "file", *(s.lower() for s in SAMPLES))
PERIODS = ("train", "backtest")
FEATURE_CLIP = 10.0  # standardised indicators are clipped to +-this


@dataclass(frozen=True)
class TradingConfig:
    """Everything that defines the trading MDP: the data, the periods and the trading rules.

    `StockTradingEnv(num_envs, device, seed, **kwargs)` takes these fields as keyword arguments
    (a run's `env_kwargs`); every default is written here and nowhere else.
    """

    # --- market data ---
    market: str | Market | None = None  # synthetic | file | goog (real sample) | a Market;
    # None: "file" when `data` is given, else "synthetic"
    data: str | None = None  # CSV / Parquet panel for market "file" (see finance.load_market)
    sort: bool = False  # market "file": sort the rows by date then ticker (else refused unsorted)
    structure: str = "regimes"  # synthetic: regimes | mean_reversion | momentum | random_walk
    market_seed: int = 0  # synthetic: seed of the market (the env's seed only draws start days)
    num_assets: int = 5  # synthetic: number of assets
    num_days: int = 1260  # synthetic: business days (1260 = 5 years)
    start_date: str = START_DATE  # synthetic: first date
    # --- periods ---
    split: str | float = 0.8  # first backtest date (YYYY-MM-DD), or the fraction of all dates
    # before it
    period: str = "train"  # train | backtest
    warmup: int = 60  # first dates only warm the indicators up (longest window: close_60_sma)
    max_step: int = 252  # train: days per episode, capped by the period's length
    backtest_start: str | None = None  # backtest: first date; None: the split
    backtest_end: str | None = None  # backtest: last date; None: the last date of the data
    # --- trading ---
    initial_cash: float = 1e6  # cash at the start of every episode
    hmax: int = 100  # most shares traded per asset and day (action 1 = buy hmax)
    transaction_cost: float = 1e-3  # fraction of the traded value paid on buys and on sells
    reward_scale: float = 1e-4  # reward = change of account value x this (FinRL's 1e-4: with
    # the default cash one reward unit is 1% of it)
    turbulence_threshold: float | None = None  # liquidate and stop buying at or above; None: off
    indicators: tuple[str, ...] = DEFAULT_INDICATORS  # stockstats names, see finance.indicators

    @classmethod
    def from_kwargs(cls, kwargs: dict) -> TradingConfig:
        """A validated config from keyword arguments (as given in `env_kwargs`); unknown names
        get a `ConfigError` listing the valid ones."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            hints = []
            for k in unknown:
                close = difflib.get_close_matches(k, names, n=1)
                hints.append(f"'{k}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
            raise ConfigError(
                f"{ENV_ID}: unknown env_kwargs {', '.join(hints)}. Valid names: {', '.join(names)}."
            )
        values = dict(kwargs)
        for key in ("split", "backtest_start", "backtest_end", "start_date"):
            if isinstance(values.get(key), (datetime.date, np.datetime64)):  # YAML reads dates
                values[key] = str(values[key])[:10]
        if isinstance(values.get("indicators"), (list, str)):
            values["indicators"] = tuple(
                [values["indicators"]]
                if isinstance(values["indicators"], str)
                else values["indicators"]
            )
        if values.get("data") is not None:
            values["data"] = str(values["data"])
        return cls(**values).validate()

    def validate(self) -> TradingConfig:
        """Check every field; a `ConfigError` names the field, the value and what is allowed."""

        def bad(name: str, allowed: str) -> None:
            raise ConfigError(
                f"{ENV_ID}: env_kwargs {name}={getattr(self, name)!r} is invalid; {allowed}."
            )

        market = self.resolved_market
        if not isinstance(market, Market) and market not in MARKETS:
            bad("market", f"choose one of {', '.join(MARKETS)} (or pass a finance.Market)")
        if market == "file" and not self.data:
            bad("data", "market 'file' needs data=PATH to a CSV or Parquet panel")
        if self.data is not None and market != "file":
            bad("data", f"data=PATH reads a file, but market is {market!r}: leave market unset")
        if not isinstance(self.sort, bool):
            bad("sort", "true or false")
        if self.sort and market != "file":
            bad("sort", "it sorts the rows of a file: give data=PATH too")
        if self.structure not in STRUCTURES:
            bad("structure", f"choose one of {', '.join(STRUCTURES)}")
        for name, low in (("num_assets", 1), ("num_days", 2), ("hmax", 1), ("max_step", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                bad(name, f"an integer >= {low}")
        if not isinstance(self.warmup, int) or self.warmup < 0:
            bad("warmup", "an integer >= 0")
        if not isinstance(self.market_seed, int):
            bad("market_seed", "an integer")
        if isinstance(self.split, bool) or not isinstance(self.split, (str, float, int)):
            bad("split", "a date YYYY-MM-DD or a fraction between 0 and 1")
        if not isinstance(self.split, str) and not 0.0 < float(self.split) < 1.0:
            bad("split", "a fraction strictly between 0 and 1 (or a date YYYY-MM-DD)")
        if self.period not in PERIODS:
            bad("period", f"choose one of {', '.join(PERIODS)}")
        if not _positive_finite(self.initial_cash):
            bad("initial_cash", "a positive number")
        if not _finite(self.transaction_cost) or not 0.0 <= self.transaction_cost < 1.0:
            bad("transaction_cost", "a fraction in [0, 1), e.g. 0.001")
        if not _finite(self.reward_scale) or self.reward_scale == 0:
            bad("reward_scale", "a non-zero number")
        if self.turbulence_threshold is not None and not _finite(self.turbulence_threshold):
            bad("turbulence_threshold", "a number, or null to turn liquidation off")
        check_indicator_names(self.indicators)
        return self

    @property
    def resolved_market(self) -> str | Market:
        """`market` with None resolved: "file" when `data` is given, else "synthetic"."""
        if self.market is None:
            return "file" if self.data is not None else "synthetic"
        return self.market.lower() if isinstance(self.market, str) else self.market


def _finite(x: object) -> TypeGuard[int | float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _positive_finite(x: object) -> bool:
    return _finite(x) and x > 0


def build_market(config: TradingConfig) -> Market:
    """The `Market` that `config` describes (synthetic, a file, or a real sample)."""
    market = config.resolved_market
    if isinstance(market, Market):
        return market
    if market == "synthetic":
        return synthetic_market(
            config.num_assets, config.num_days, config.market_seed, config.structure,
            config.start_date,
        )  # fmt: skip
    if market == "file":
        assert config.data is not None  # TradingConfig.validate refuses "file" without data
        return load_market(config.data, sort=config.sort)
    return load_sample(market.upper())


@dataclass(frozen=True)
class Periods:
    """Date indices (inclusive) of the training and the backtest period, and the episode of
    the chosen one: `first`, `last` and `horizon` (steps per episode)."""

    train_first: int
    train_last: int
    test_first: int
    test_last: int
    first: int
    last: int
    horizon: int


def split_periods(market: Market, config: TradingConfig) -> Periods:
    """Resolve `split`, `warmup`, `backtest_start/end` and `max_step` into date indices; a
    `ConfigError` naming the dates when a period is too short or outside the data."""
    t = market.num_dates
    if isinstance(config.split, str):
        split = market.date_index(config.split, "on_or_after")
    else:
        split = int(round(float(config.split) * t))
    train_first, train_last = config.warmup, split - 1
    test_first, test_last = split, t - 1
    dates = market.dates
    if train_last - train_first < 1:
        raise ConfigError(
            f"{ENV_ID}: the training period is too short: {market.name} has {t} dates "
            f"({dates[0]} .. {dates[-1]}), the first {config.warmup} (warmup) only warm up the "
            f"indicators and the backtest starts at date {split} ({dates[min(split, t - 1)]}), "
            f"leaving {max(train_last - train_first + 1, 0)} training dates; at least 2 are "
            f"needed. Move the split later, lower warmup, or give more data."
        )
    if test_last - test_first < 1:
        raise ConfigError(
            f"{ENV_ID}: the backtest period is too short: it starts at date {split} of {t} "
            f"({dates[min(split, t - 1)]}); at least 2 dates are needed. Move the split earlier."
        )
    if config.period == "train":
        first, last = train_first, train_last
        horizon = min(config.max_step, last - first)
    else:
        first, last = test_first, test_last
        if config.backtest_start is not None:
            first = market.date_index(config.backtest_start, "on_or_after")
        if config.backtest_end is not None:
            last = market.date_index(config.backtest_end, "on_or_before")
        if first < config.warmup:
            raise ConfigError(
                f"{ENV_ID}: backtest_start {config.backtest_start} falls in the first "
                f"{config.warmup} dates (until {dates[config.warmup - 1]}), where the "
                f"indicators are still warming up; start on {dates[config.warmup]} or later."
            )
        if last - first < 1:
            raise ConfigError(
                f"{ENV_ID}: the backtest from {dates[first]} to {dates[last]} has fewer than 2 "
                f"trading dates; choose backtest_start before backtest_end."
            )
        horizon = last - first
    return Periods(train_first, train_last, test_first, test_last, first, last, horizon)


def state_features(
    ohlcv: torch.Tensor, names: tuple[str, ...], train_first: int, train_last: int
) -> torch.Tensor:
    """The indicator part of the state for every date: `(T, K * N)` float64, indicator-major.

    Price-unit indicators are made relative to the close, then every (indicator, asset) column
    is standardised with the mean and std of its values from the first date up to the day
    itself (an expanding window: causal), frozen from the last training date on (a backtest is
    scaled as training ended), and clipped to +-`FEATURE_CLIP`. `train_first` only documents
    that the warm-up dates before it feed the statistics of the first training days.
    """
    raw = compute_indicators(ohlcv.double(), names)  # (T, N, K)
    close = ohlcv[..., 3].double().unsqueeze(-1)  # (T, N, 1)
    level = torch.tensor([n in PRICE_LEVEL_INDICATORS for n in names], device=raw.device)
    difference = torch.tensor([n in PRICE_DIFFERENCE_INDICATORS for n in names], device=raw.device)
    relative = torch.where(level, raw / close - 1.0, raw)
    relative = torch.where(difference, raw / close, relative)
    days = relative.shape[0]
    count = torch.arange(1, days + 1, dtype=torch.float64, device=raw.device).view(-1, 1, 1)
    mean = relative.cumsum(0) / count  # of dates 0..t
    var = (relative.square().cumsum(0) / count - mean.square()).clamp(min=0)
    frozen = torch.arange(days, device=raw.device).clamp(max=train_last)
    mean, std = mean[frozen], var[frozen].sqrt()
    std = torch.where(std > 1e-12, std, torch.ones_like(std))
    z = ((relative - mean) / std).clamp(-FEATURE_CLIP, FEATURE_CLIP)  # (T, N, K)
    return z.transpose(1, 2).reshape(z.shape[0], -1)


class StockTradingEnv(VecEnv):
    """FinRL-style stock trading over a daily panel, `num_envs` accounts at once (see the module
    docstring for the MDP and `TradingConfig` for the keyword arguments)."""

    name = ENV_ID
    if_discrete = False
    max_step = TradingConfig.max_step  # the default; an instance's spec holds the true limit
    target_return: float | None = None  # nothing defines "solved" for trading

    def __init__(
        self,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        **kwargs,
    ) -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise EnvError(f"num_envs must be a positive integer, got {num_envs!r}.")
        self.config = TradingConfig.from_kwargs(kwargs)
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.market = build_market(self.config)
        self.periods = split_periods(self.market, self.config)
        p, c = self.periods, self.config
        n_assets = self.market.num_tickers
        ohlcv = self.market.ohlcv.double()
        self.closes = ohlcv[..., 3].to(self.device)  # (T, N) float64
        self.price_ref = self.closes[p.train_first]  # (N,) prices on the first training day
        self.features = state_features(ohlcv, c.indicators, p.train_first, p.train_last)
        self.features = self.features.to(self.device)  # (T, K * N)
        self.turbulence = turbulence(ohlcv[..., 3]).to(self.device)  # (T,)
        if c.turbulence_threshold is None:
            self.turbulent = torch.zeros_like(self.turbulence, dtype=torch.bool)
        else:
            self.turbulent = self.turbulence >= c.turbulence_threshold  # (T,)
        self.initial_cash = float(c.initial_cash)
        self.hmax = int(c.hmax)
        self.cost = float(c.transaction_cost)
        state_dim = 1 + 2 * n_assets + len(c.indicators) * n_assets
        self.spec = EnvSpec(
            name=ENV_ID,
            num_envs=num_envs,
            state_dim=state_dim,
            action_dim=n_assets,
            if_discrete=False,
            max_step=p.horizon,
            target_return=None,
            action_low=(-float(c.hmax),) * n_assets,  # shares
            action_high=(float(c.hmax),) * n_assets,
        )
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(0 if seed is None else seed)
        self._new_episodes()

    # --- episodes ---------------------------------------------------------------------------
    def _start_days(self) -> torch.Tensor:
        """First day `(num_envs,)` int64 of a new episode of every sub-env."""
        p = self.periods
        if self.config.period == "backtest":
            return torch.full((self.num_envs,), p.first, dtype=torch.int64, device=self.device)
        latest = p.last - p.horizon  # so that every episode lasts `horizon` steps
        return torch.randint(
            p.first, latest + 1, (self.num_envs,), generator=self.generator, device=self.device
        )

    def _new_episodes(self) -> None:
        self.day = self._start_days()  # (num_envs,) int64 index into the market's dates
        self.elapsed = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)
        self.cash = torch.full(
            (self.num_envs,), self.initial_cash, dtype=torch.float64, device=self.device
        )
        self.holdings = torch.zeros(
            self.num_envs, self.market.num_tickers, dtype=torch.float64, device=self.device
        )  # whole shares

    def _observe(self, day: torch.Tensor, cash: torch.Tensor, holdings: torch.Tensor):
        """State `(n, state_dim)` float32 of accounts `cash (n,)`, `holdings (n, N)` on `day`."""
        price = self.closes.index_select(0, day)  # (n, N)
        parts = (
            (cash / self.initial_cash).unsqueeze(1),
            price / self.price_ref,
            holdings * price / self.initial_cash,
            self.features.index_select(0, day),
        )
        return torch.cat(parts, dim=1).float()

    # --- the contract ---------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> tuple[torch.Tensor, dict]:
        if seed is not None:
            self.generator.manual_seed(seed)
        self._new_episodes()
        return self._observe(self.day, self.cash, self.holdings), {}

    def step(
        self, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        expected = (self.num_envs, self.spec.action_dim)
        if action.shape != expected:
            raise EnvError(
                f"{ENV_ID}: step() expects actions of shape {expected} (floats in [-1, 1], one "
                f"per asset), got {tuple(action.shape)}."
            )
        day, cash, holdings = self.day, self.cash, self.holdings
        price = self.closes.index_select(0, day)  # (n, N) today's close
        value_before = cash + (holdings * price).sum(1)
        shares = torch.trunc(action.to(self.device, torch.float64).clamp(-1.0, 1.0) * self.hmax)
        sold = torch.minimum((-shares).clamp(min=0), holdings)  # sells: at most what is held
        wanted = shares.clamp(min=0)  # buys
        if self.config.turbulence_threshold is not None:  # turbulent: sell all, buy nothing
            turbulent = self.turbulent.index_select(0, day).unsqueeze(1)  # (n, 1)
            sold = torch.where(turbulent, holdings, sold)
            wanted = torch.where(turbulent, 0.0, wanted)
        cash = cash + (price * sold).sum(1) * (1.0 - self.cost)
        holdings = holdings - sold
        # buys, after the sells: scaled down alike when they cost more than the cash
        unit_cost = price * (1.0 + self.cost)
        wanted_cost = (wanted * unit_cost).sum(1)
        short = wanted_cost > cash
        scale = torch.where(short, cash / torch.where(short, wanted_cost, 1.0) * (1 - 1e-12), 1.0)
        bought = torch.floor(wanted * scale.unsqueeze(1))
        cash = cash - (bought * unit_cost).sum(1)
        holdings = holdings + bought
        traded_value = (price * (sold + bought)).sum(1)

        next_day = day + 1
        value_after = cash + (holdings * self.closes.index_select(0, next_day)).sum(1)
        reward = ((value_after - value_before) * self.config.reward_scale).float()
        elapsed = self.elapsed + 1
        truncated = elapsed >= self.periods.horizon
        terminated = torch.zeros_like(truncated)
        final_state = self._observe(next_day, cash, holdings)

        done = truncated
        if self.device.type == "cpu" and not bool(done.any()):
            # on a CPU, most steps end no episode: skip the restart (a host check is free here)
            self.day, self.elapsed, self.cash, self.holdings = next_day, elapsed, cash, holdings
            state = final_state.clone()
        else:  # finished sub-envs start a new episode (selected with torch.where: no sync)
            self.day = torch.where(done, self._start_days(), next_day)
            self.elapsed = elapsed.masked_fill(done, 0)
            self.cash = torch.where(done, self.initial_cash, cash)
            self.holdings = holdings.masked_fill(done.unsqueeze(1), 0.0)
            state = self._observe(self.day, self.cash, self.holdings)
        info = {
            "final_state": final_state,
            "account_value": value_after,
            "traded_value": traded_value,
            "date_index": next_day,
        }
        return state, reward, terminated, truncated, info

    def account_value(self) -> torch.Tensor:
        """Current value of every account `(num_envs,)` float64 at the current day's close."""
        price = self.closes.index_select(0, self.day)
        return self.cash + (self.holdings * price).sum(1)

    def state_dict(self) -> dict:
        return {
            "day": self.day.clone(),
            "elapsed": self.elapsed.clone(),
            "cash": self.cash.clone(),
            "holdings": self.holdings.clone(),
            "generator": self.generator.get_state(),
            "market": {
                "name": self.market.name,
                "num_dates": self.market.num_dates,
                "tickers": list(self.market.tickers),
            },  # fmt: skip
        }

    def load_state_dict(self, state: dict) -> None:
        saved = state.get("market", {})
        if saved.get("num_dates") != self.market.num_dates or saved.get("tickers") != list(
            self.market.tickers
        ):
            raise EnvError(
                f"{ENV_ID}: the saved env state is for {saved.get('name')} "
                f"({saved.get('num_dates')} dates, tickers {saved.get('tickers')}), but this env "
                f"trades {self.market.name} ({self.market.num_dates} dates, tickers "
                f"{list(self.market.tickers)}). Resume with the env_kwargs the run was made with."
            )
        self.day = state["day"].to(self.device).clone()
        self.elapsed = state["elapsed"].to(self.device).clone()
        self.cash = state["cash"].to(self.device).clone()
        self.holdings = state["holdings"].to(self.device).clone()
        self.generator.set_state(state["generator"])
