"""StockTradingEnv: the vectorized step against a plain-Python single account, no look-ahead,
the VecEnv contract (shapes, dtypes, devices, auto-reset, truncation), seeding and resume."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from xiaoyarl.envs.check import _Findings, _random_actions, _vec_trajectory
from xiaoyarl.errors import ConfigError, EnvError, MarketDataError
from xiaoyarl.finance.data import Market
from xiaoyarl.finance.env import ENV_ID, StockTradingEnv, TradingConfig
from xiaoyarl.finance.indicators import (
    PRICE_DIFFERENCE_INDICATORS,
    PRICE_LEVEL_INDICATORS,
    compute_indicators,
)
from xiaoyarl.finance.synthetic import synthetic_market

MARKET = synthetic_market(num_assets=4, num_days=500, seed=11, structure="regimes")


def make(num_envs: int = 4, seed: int | None = 0, **kwargs) -> StockTradingEnv:
    return StockTradingEnv(num_envs, "cpu", seed, **{"market": MARKET, **kwargs})


# --- the reference: one account, plain Python, one asset at a time --------------------------------
def reference_features(env: StockTradingEnv) -> np.ndarray:
    """The indicator part of the state `(T, K * N)`, computed the slow way from the raw
    indicators (themselves tested against stockstats): each day standardised with the mean and
    std of the days up to it (up to the last training day, from then on)."""
    raw = compute_indicators(env.market.ohlcv).numpy()  # (T, N, K)
    close = env.market.close.numpy()
    last = env.periods.train_last
    t, n, k = raw.shape
    out = np.zeros((t, k * n))
    for j, name in enumerate(env.config.indicators):
        for i in range(n):
            column = raw[:, i, j].copy()
            if name in PRICE_LEVEL_INDICATORS:
                column = column / close[:, i] - 1.0
            elif name in PRICE_DIFFERENCE_INDICATORS:
                column = column / close[:, i]
            for day in range(t):
                seen = column[: min(day, last) + 1]
                std = seen.std() if seen.std() > 1e-12 else 1.0
                out[day, j * n + i] = np.clip((column[day] - seen.mean()) / std, -10, 10)
    return out


class ReferenceAccount:
    """One sub-env, obviously: FinRL's rules written out with floats and loops."""

    def __init__(self, env: StockTradingEnv, features: np.ndarray, day: int) -> None:
        self.close = env.closes.numpy()
        self.turbulent = env.turbulent.numpy()
        self.features = features
        c = env.config
        self.cash0, self.hmax = c.initial_cash, c.hmax
        self.cost, self.scale = c.transaction_cost, c.reward_scale
        self.ref = self.close[env.periods.train_first]
        self.horizon = env.periods.horizon
        self.liquidations = self.cash_limited = 0
        self.restart(day)

    def restart(self, day: int) -> None:
        self.day, self.cash, self.elapsed = day, self.cash0, 0
        self.holdings = [0.0] * len(self.ref)

    def observe(self) -> list[float]:
        prices = self.close[self.day]
        return (
            [self.cash / self.cash0]
            + [p / r for p, r in zip(prices, self.ref, strict=True)]
            + [h * p / self.cash0 for h, p in zip(self.holdings, prices, strict=True)]
            + list(self.features[self.day])
        )

    def value(self, day: int) -> float:
        return self.cash + sum(h * p for h, p in zip(self.holdings, self.close[day], strict=True))

    def step(self, action: list[float]) -> tuple[float, bool, float]:
        """Trade at today's close, move to tomorrow: (reward, truncated, account value)."""
        prices = self.close[self.day]
        before = self.value(self.day)
        shares = [math.trunc(max(-1.0, min(1.0, a)) * self.hmax) for a in action]
        if self.turbulent[self.day]:  # liquidate everything, buy nothing
            self.liquidations += any(h > 0 for h in self.holdings)
            for j, p in enumerate(prices):
                self.cash += p * self.holdings[j] * (1 - self.cost)
                self.holdings[j] = 0.0
        else:
            for j, p in enumerate(prices):  # sells first, at most what is held
                if shares[j] < 0:
                    sold = min(-shares[j], self.holdings[j])
                    self.cash += p * sold * (1 - self.cost)
                    self.holdings[j] -= sold
            wanted = [max(s, 0) for s in shares]
            wanted_cost = sum(w * p * (1 + self.cost) for w, p in zip(wanted, prices, strict=True))
            factor = 1.0
            if wanted_cost > self.cash:  # every buy scaled down alike, never below zero cash
                factor = self.cash / wanted_cost * (1 - 1e-12)
                self.cash_limited += 1
            for j, p in enumerate(prices):
                bought = math.floor(wanted[j] * factor)
                self.cash -= p * bought * (1 + self.cost)
                self.holdings[j] += bought
            assert self.cash >= 0
        self.day += 1
        self.elapsed += 1
        after = self.value(self.day)
        return (after - before) * self.scale, self.elapsed >= self.horizon, after


def test_vectorized_step_equals_the_reference_account_transition_by_transition():
    # little cash, so buys are often cash-limited; a turbulence threshold at the training
    # median, so positions are liquidated on about half of the days that have an index
    turbulence_days = slice(252, 400)  # days with a turbulence index in the training period
    probe = make(1)
    threshold = float(probe.turbulence[turbulence_days].median())
    env = make(6, seed=3, initial_cash=30_000.0, max_step=40, turbulence_threshold=threshold)
    features = reference_features(env)
    np.testing.assert_allclose(env.features.numpy(), features, rtol=1e-9, atol=1e-9)
    env.reset(seed=5)
    saved = env.state_dict()  # as if resumed mid-episode: the sub-envs' episodes end apart
    saved["elapsed"] = torch.tensor([0, 7, 13, 20, 26, 33])
    env.load_state_dict(saved)
    state = env._observe(env.day, env.cash, env.holdings)
    accounts = [ReferenceAccount(env, features, int(d)) for d in env.day]
    for account, elapsed in zip(accounts, saved["elapsed"].tolist(), strict=True):
        account.elapsed = elapsed
    generator = torch.Generator().manual_seed(0)
    p = env.periods
    episodes = 0
    for _ in range(160):
        for i, account in enumerate(accounts):
            np.testing.assert_allclose(state[i].numpy(), account.observe(), rtol=1e-6, atol=1e-6)
        action = torch.rand((6, 4), generator=generator) * 2.4 - 1.2  # also outside [-1, 1]
        state, reward, terminated, truncated, info = env.step(action)
        assert not terminated.any()
        for i, account in enumerate(accounts):
            expected_reward, expected_truncated, value = account.step(action[i].tolist())
            assert truncated[i].item() == expected_truncated
            torch.testing.assert_close(
                info["final_state"][i], torch.tensor(account.observe(), dtype=torch.float32),
                rtol=1e-6, atol=1e-6,
            )  # fmt: skip
            assert info["account_value"][i].item() == pytest.approx(value, rel=1e-12)
            assert reward[i].item() == pytest.approx(expected_reward, rel=1e-5, abs=1e-6)
            if expected_truncated:  # the env drew the next start day: the reference restarts
                episodes += 1
                start = int(env.day[i])
                assert p.first <= start <= p.last - p.horizon and env.elapsed[i] == 0
                account.restart(start)
            else:
                assert env.holdings[i].tolist() == account.holdings
                assert env.cash[i].item() == pytest.approx(account.cash, rel=1e-12, abs=1e-6)
    assert episodes >= 6 * 3
    assert sum(a.liquidations for a in accounts) > 10
    assert sum(a.cash_limited for a in accounts) > 50


# --- no look-ahead --------------------------------------------------------------------------------
def perturbed_after(market: Market, t: int) -> Market:
    """The market with every price and volume after day `t` changed."""
    ohlcv = market.ohlcv.clone()
    noise = torch.exp(0.2 * torch.randn(ohlcv[t + 1 :].shape, dtype=torch.float64))
    ohlcv[t + 1 :, :, :4] = ohlcv[t + 1 :, :, :4] * noise[..., :1]  # OHLC alike: stays valid
    ohlcv[t + 1 :, :, 4] *= noise[..., 4]
    return Market(market.dates, market.tickers, ohlcv, name="perturbed")


def rollout(env: StockTradingEnv, steps: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    state, _ = env.reset(seed=seed)
    states, rewards = [state], []
    for _ in range(steps):
        state, reward, *_ = env.step(torch.rand((env.num_envs, 4), generator=generator) * 2 - 1)
        states.append(state)
        rewards.append(reward)
    return torch.stack(states), torch.stack(rewards)


def test_no_look_ahead_prices_after_day_t_change_nothing_up_to_day_t():
    split = str(MARKET.dates[400])
    t = 430  # a backtest day: the backtest runs from 400, so its state at step 30 is day 430
    kwargs = {"split": split, "period": "backtest", "turbulence_threshold": 5.0}
    original = StockTradingEnv(1, seed=0, market=MARKET, **kwargs)
    changed = StockTradingEnv(1, seed=0, market=perturbed_after(MARKET, t), **kwargs)
    states, rewards = rollout(original, 60)
    states2, rewards2 = rollout(changed, 60)
    steps = t - 400
    assert torch.equal(states[: steps + 1], states2[: steps + 1])  # states of days 400..t
    assert torch.equal(rewards[:steps], rewards2[:steps])  # rewards up to the close of day t
    assert not torch.equal(rewards[steps], rewards2[steps])  # the step t -> t + 1 sees t + 1
    # nor on a training day: the state's scaling uses only the days before it
    early = {"split": split, "period": "backtest", "backtest_start": str(MARKET.dates[100])}
    a = rollout(StockTradingEnv(1, seed=0, market=MARKET, **early), 150)[0]
    b = rollout(StockTradingEnv(1, seed=0, market=perturbed_after(MARKET, 200), **early), 150)[0]
    assert torch.equal(a[:101], b[:101]) and not torch.equal(a[101], b[101])  # days 100..200
    # training never sees anything after the split, whatever it is
    train = StockTradingEnv(4, seed=0, market=MARKET, split=split, max_step=50)
    train2 = StockTradingEnv(4, seed=0, market=perturbed_after(MARKET, 399), split=split,
                             max_step=50)  # fmt: skip
    a, b = rollout(train, 120), rollout(train2, 120)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


# --- the contract ---------------------------------------------------------------------------------
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


@pytest.mark.parametrize("device", DEVICES)
def test_shapes_dtypes_and_devices(device):
    env = StockTradingEnv(3, device, 0, market=MARKET, indicators=["macd", "rsi_30"])
    n, k = 4, 2
    assert env.spec.state_dim == 1 + 2 * n + k * n and env.spec.action_dim == n
    assert env.spec.name == ENV_ID and env.spec.target_return is None and not env.spec.if_discrete
    assert env.spec.action_low == (-100.0,) * n and env.spec.action_high == (100.0,) * n
    state, info = env.reset(seed=1)
    assert state.shape == (3, env.spec.state_dim) and state.dtype == torch.float32
    assert state.device.type == device and isinstance(info, dict)
    assert (state[:, 0] == 1).all() and (state[:, 1 + n : 1 + 2 * n] == 0).all()  # cash only
    out = env.step(torch.zeros(3, n, device=device))
    state, reward, terminated, truncated, info = out
    for tensor, dtype, shape in ((state, torch.float32, (3, env.spec.state_dim)),
                                 (reward, torch.float32, (3,)), (terminated, torch.bool, (3,)),
                                 (truncated, torch.bool, (3,)),
                                 (info["final_state"], torch.float32, (3, env.spec.state_dim)),
                                 (info["account_value"], torch.float64, (3,)),
                                 (info["traded_value"], torch.float64, (3,)),
                                 (info["date_index"], torch.int64, (3,))):  # fmt: skip
        assert tensor.dtype == dtype and tensor.shape == shape and tensor.device.type == device
    assert (reward == 0).all()  # no position, no cost: the account does not move
    with pytest.raises(EnvError, match=r"actions of shape \(3, 4\)"):
        env.step(torch.zeros(3, 5, device=device))
    with env:  # a VecEnv is a context manager; close() releases nothing here
        pass


def test_keeps_the_vec_env_contract():
    """The checks of `xiaoyarl check-env` (final_state, time limit, auto-reset, seeding)."""
    env = make(4, max_step=30)
    actions = _random_actions(env.spec, 4, 75, seed=0)
    found = _Findings()
    first = _vec_trajectory(env, 0, actions, found)
    assert first is not None and not found.problems(), found.problems()
    second = _vec_trajectory(make(4, max_step=30), 0, actions, None)
    assert second is not None and torch.equal(first.start, second.start)
    assert len(first.fingerprints) == 76  # reset() and 75 steps
    assert first.fingerprints == second.fingerprints  # same seed and actions: the same data


def test_auto_reset_and_truncation():
    env = make(5, max_step=20)
    state, _ = env.reset(seed=0)
    starts = env.day.clone()
    lengths = torch.zeros(5, dtype=torch.int64)
    buy = torch.ones(5, 4)
    for _ in range(60):
        state, reward, terminated, truncated, info = env.step(buy)
        lengths += 1
        assert not terminated.any()
        assert torch.equal(truncated, lengths == 20)  # every episode lasts exactly 20 days
        assert torch.equal(info["date_index"], starts + lengths)
        if truncated.any():
            ended = truncated
            assert (info["final_state"][ended, 1 + 4 : 1 + 8] > 0).all()  # it held shares
            assert (state[ended, 0] == 1).all() and (state[ended, 1 + 4 : 1 + 8] == 0).all()
            assert not torch.equal(state[ended], info["final_state"][ended])
            starts = torch.where(ended, env.day, starts)
            lengths[ended] = 0
        still = ~truncated
        assert torch.equal(state[still], info["final_state"][still])


def test_backtest_period_runs_from_its_first_to_its_last_date():
    env = make(2, seed=None, period="backtest", split=0.8, max_step=5)
    p = env.periods
    assert (p.first, p.last) == (400, 499) and env.spec.max_step == 99  # max_step: train only
    env.reset(seed=3)
    assert (env.day == 400).all()
    for _ in range(98):
        *_, truncated, info = env.step(torch.rand(2, 4) * 2 - 1)
        assert not truncated.any()
    *_, truncated, info = env.step(torch.zeros(2, 4))
    assert truncated.all() and (info["date_index"] == 499).all() and (env.day == 400).all()
    inner = make(1, period="backtest", backtest_start=str(MARKET.dates[420]),
                 backtest_end=str(MARKET.dates[450]))  # fmt: skip
    assert (inner.periods.first, inner.periods.last, inner.spec.max_step) == (420, 450, 30)


def test_seeding_and_resume_are_exact():
    env = make(8)
    first, _ = env.reset(seed=4)
    again, _ = env.reset(seed=4)
    assert torch.equal(first, again)
    other, _ = env.reset(seed=5)
    assert not torch.equal(first, other)  # another seed, other start days
    env.reset(seed=4)
    generator = torch.Generator().manual_seed(1)
    actions = torch.rand((400, 8, 4), generator=generator) * 2 - 1
    for a in actions[:150]:
        env.step(a)
    saved = env.state_dict()
    tail = [env.step(a) for a in actions[150:]]
    resumed = make(8, seed=123)
    resumed.load_state_dict(saved)
    for a, expected in zip(actions[150:], tail, strict=True):
        got = resumed.step(a)
        for x, y in zip(got[:4], expected[:4], strict=True):
            assert torch.equal(x, y)
    other_market = make(8, market=synthetic_market(4, 300, seed=1))
    with pytest.raises(EnvError, match="env_kwargs the run was made with"):
        other_market.load_state_dict(saved)


# --- configuration errors -------------------------------------------------------------------------
def test_configuration_errors_name_the_field_and_the_fix():
    with pytest.raises(ConfigError, match=r"'hmx' \(did you mean 'hmax'\?\)"):
        make(hmx=10)
    with pytest.raises(ConfigError, match="structure='trend'"):
        StockTradingEnv(1, structure="trend")
    with pytest.raises(ConfigError, match="split=1.5"):
        make(split=1.5)
    with pytest.raises(ConfigError, match="transaction_cost"):
        make(transaction_cost=-0.1)
    with pytest.raises(ConfigError, match="unknown indicator"):
        make(indicators=["macd", "vwap"])
    with pytest.raises(ConfigError, match="training period is too short"):
        make(split=str(MARKET.dates[61]))
    with pytest.raises(MarketDataError, match="outside the data, which runs from 2015-01-02"):
        make(period="backtest", backtest_end="2031-01-01", backtest_start="2030-01-01")
    with pytest.raises(ConfigError, match="warming up"):
        make(period="backtest", backtest_start=str(MARKET.dates[10]))
    with pytest.raises(ConfigError, match="market 'file' needs data"):
        StockTradingEnv(1, market="file")
    import datetime

    config = TradingConfig.from_kwargs({"split": datetime.date(2016, 6, 1), "indicators": "macd"})
    assert config.split == "2016-06-01" and config.indicators == ("macd",)  # as YAML gives them


def test_data_file_and_default_market(tmp_path):
    pytest.importorskip("pandas")
    path = tmp_path / "panel.csv"
    MARKET.to_frame().to_csv(path, index=False)
    from_file = StockTradingEnv(2, seed=0, data=str(path))
    direct = make(2)
    assert torch.equal(from_file.reset(seed=1)[0], direct.reset(seed=1)[0])
    default = StockTradingEnv()  # the documented defaults: 5 synthetic assets, 5 years
    assert default.market.num_tickers == 5 and default.market.num_dates == 1260
    assert default.spec.state_dim == 1 + 2 * 5 + 8 * 5 and default.spec.max_step == 252


def test_an_unsorted_data_file_is_refused_with_a_hint_the_env_accepts(tmp_path):
    pytest.importorskip("pandas")
    path = tmp_path / "panel.csv"
    MARKET.to_frame().iloc[::-1].to_csv(path, index=False)
    with pytest.raises(MarketDataError, match="not sorted.*sort=True"):
        StockTradingEnv(1, data=str(path))
    sorted_env = StockTradingEnv(2, seed=0, data=str(path), sort=True)  # the hint works
    assert torch.equal(sorted_env.reset(seed=1)[0], make(2).reset(seed=1)[0])
    with pytest.raises(ConfigError, match="sort"):
        StockTradingEnv(1, sort=True)  # nothing to sort in a synthetic market


def test_the_real_sample_as_a_market():
    pytest.importorskip("backtesting", reason="the GOOG sample ships with `backtesting`")
    env = StockTradingEnv(2, seed=0, market="goog", turbulence_threshold=3.0)
    assert env.market.tickers == ("GOOG",) and env.spec.state_dim == 1 + 2 + 8
    assert env.periods.test_first == 1718  # the default split: 80% of 2,148 dates, rounded
    env.reset(seed=0)
    for _ in range(300):
        state, reward, *_ = env.step(torch.rand(2, 1) * 2 - 1)
    assert state.isfinite().all() and reward.isfinite().all()
