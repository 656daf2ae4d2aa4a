"""Backtest metrics against hand-computed numbers, and `backtest()` on hand-built runs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from xiaoyarl.config import Config
from xiaoyarl.config_io import save_config
from xiaoyarl.core.nets import ActorPPO, RunningNorm
from xiaoyarl.errors import CheckpointError, ConfigError, MarketDataError
from xiaoyarl.finance import metrics
from xiaoyarl.finance.backtest import backtest, buy_and_hold, format_report
from xiaoyarl.finance.env import ENV_ID, StockTradingEnv
from xiaoyarl.train.checkpoint import save_atomic

# --- metrics: expected numbers worked out by hand -------------------------------------------------
# V = 100, 110, 99, 108.9: daily returns +10%, -10%, +10%.
SERIES = [100.0, 110.0, 99.0, 108.9]


def test_return_metrics_by_hand():
    assert metrics.cumulative_return(SERIES) == pytest.approx(0.089)  # 108.9 / 100 - 1
    # two years (504 returns) from 100 to 400: 4^(252/504) - 1 = 2 - 1
    two_years = np.geomspace(100.0, 400.0, 505)
    assert metrics.annual_return(two_years) == pytest.approx(1.0)
    one_year = np.geomspace(100.0, 123.0, 253)  # exactly 252 returns: annual = cumulative
    assert metrics.annual_return(one_year) == pytest.approx(0.23)


def test_risk_metrics_by_hand():
    # returns 0.1, -0.1, 0.1: mean 1/30; deviations 1/15, -2/15, 1/15; sample variance
    # (1/225 + 4/225 + 1/225) / 2 = 1/75 = 0.04 / 3, so std = 0.2 / sqrt(3) = 0.1154701
    assert metrics.annual_volatility(SERIES) == pytest.approx(0.2 * math.sqrt(84))  # 1.8330303
    # Sharpe = (1/30) / (0.2 / sqrt 3) x sqrt 252 = sqrt(3)/6 x sqrt(252) = sqrt(756)/6
    assert metrics.sharpe_ratio(SERIES) == pytest.approx(4.5825757, rel=1e-7)
    # with 5% a year risk free: daily 1.05^(1/252) - 1 = 0.00019363; (0.0333333 - 0.0001936)
    # / 0.1154701 x 15.8745079 = 4.555924
    assert metrics.sharpe_ratio(SERIES, risk_free=0.05) == pytest.approx(4.555924, rel=1e-5)
    # downside deviation sqrt((0 + 0.01 + 0) / 3) = 0.1 / sqrt 3; Sortino = sqrt(3)/3 x sqrt 252
    assert metrics.sortino_ratio(SERIES) == pytest.approx(9.1651514, rel=1e-7)
    # peak 110, trough 99: -10%; then 108.9 is 1% below the peak
    np.testing.assert_allclose(metrics.drawdowns(SERIES), [0.0, 0.0, -0.1, -0.01], atol=1e-12)
    assert metrics.max_drawdown(SERIES) == pytest.approx(-0.1)
    # two years from 100 to 400 (annual return 100%) with a 20% fall on day 1: Calmar 1 / 0.2
    path = np.concatenate(([100.0], np.geomspace(80.0, 400.0, 504)))
    assert metrics.calmar_ratio(path) == pytest.approx(5.0)


def test_turnover_and_degenerate_series_by_hand():
    # 30 traded on an account of 100 over 2 days: 0.3 of the account in 2 days, 37.8 a year
    assert metrics.annual_turnover([10.0, 20.0], [100.0, 100.0, 100.0]) == pytest.approx(37.8)
    flat = torch.full((10,), 1e6, dtype=torch.float64)  # an agent that only holds cash
    out = metrics.performance(flat, traded_value=torch.zeros(9))
    assert out["sharpe"] == 0.0 and out["sortino"] == 0.0 and out["max_drawdown"] == 0.0
    assert out["annual_return"] == 0.0 and out["annual_turnover"] == 0.0
    assert math.isnan(out["calmar"])  # no drawdown: undefined
    rising = [100.0, 101.0, 102.01]  # +1% twice: no downside, no spread
    assert math.isnan(metrics.sortino_ratio(rising))
    with pytest.raises(ValueError, match="positive"):
        metrics.sharpe_ratio([100.0, -1.0, 3.0])


def test_buy_and_hold_by_hand():
    close = torch.tensor([[10.0, 40.0], [11.0, 38.0], [12.0, 44.0]], dtype=torch.float64)
    # 1000 cash, half each, 1% cost: 500 / 10.1 = 49.5 -> 49 shares; 500 / 40.4 = 12.4 -> 12;
    # spent 49 x 10.1 + 12 x 40.4 = 494.9 + 484.8 = 979.7, 20.3 cash left
    values, traded = buy_and_hold(close, torch.tensor([0.5, 0.5]), 1000.0, 0.01)
    expected = [1000.0, 20.3 + 49 * 11 + 12 * 38, 20.3 + 49 * 12 + 12 * 44]  # 995.3, 1136.3
    np.testing.assert_allclose(values.numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(traded.numpy(), [49 * 10 + 12 * 40, 0, 0])


# --- backtest(): runs built by hand ---------------------------------------------------------------
def make_run(tmp_path, monkeypatch, env_kwargs: dict, action: float, env_id: str = ENV_ID):
    """A run folder with a config.yaml and an actor.pt whose deterministic action is `action`
    for every asset on every day (an ActorPPO with zero weights and that bias)."""
    run = tmp_path / "run"
    run.mkdir()
    env = StockTradingEnv(1, **env_kwargs)
    spec = env.spec
    actor = ActorPPO(spec.state_dim, spec.action_dim, [8], RunningNorm(spec.state_dim, False))
    with torch.no_grad():
        for layer in actor.net:
            if isinstance(layer, torch.nn.Linear):
                layer.weight.zero_()
                layer.bias.zero_()
        actor.net[-1].bias.fill_(action)
    meta = {
        "actor_class": "ActorPPO", "state_dim": spec.state_dim, "action_dim": spec.action_dim,
        "net_dims": [8], "state_norm": False, "state_norm_clip": 10.0, "if_discrete": False,
        "action_low": spec.action_low, "action_high": spec.action_high, "env_id": spec.name,
        "algo": "ppo", "actor": actor.state_dict(),
    }  # fmt: skip
    save_atomic(meta, run / "actor.pt")
    config = Config(algo="ppo", env_id=env_id, seed=0, env_kwargs=env_kwargs)
    save_config(config, run / "config.yaml")
    return run


ONE_ASSET = {"market": "synthetic", "num_assets": 1, "num_days": 300, "market_seed": 4}


def test_an_all_in_agent_on_one_asset_is_buy_and_hold(tmp_path, monkeypatch):
    """Action +1 with an unlimited hmax spends all cash on day one (cash-limited, whole shares)
    and can never buy again: the agent's account is buy-and-hold's, to the cent."""
    run = make_run(tmp_path, monkeypatch, {**ONE_ASSET, "hmax": 10**9}, action=1.0)
    result = backtest(run)
    series = result["series"]
    assert result["period"] == {"start": series["dates"][0], "end": series["dates"][-1],
                                "days": 60}  # fmt: skip  # 300 days, split 0.8
    np.testing.assert_allclose(series["agent"], series["equal_weight"], rtol=1e-12)
    np.testing.assert_allclose(series["agent"], series["assets"]["SYN0"], rtol=1e-12)
    assert result["agent"]["sharpe"] == pytest.approx(result["equal_weight"]["sharpe"], rel=1e-9)
    saved = json.loads((run / "backtest.json").read_text())
    assert saved["agent"] == result["agent"]
    assert (run / "backtest.png").stat().st_size > 10_000


def test_a_flat_agent_and_the_report(tmp_path, monkeypatch):
    kwargs = {"market": "synthetic", "num_assets": 3, "num_days": 300, "split": 0.7}
    run = make_run(tmp_path, monkeypatch, kwargs, action=0.0)
    out = tmp_path / "report"
    result = backtest(run, start="2015-12-01", end="2016-01-29", out=out)
    assert result["period"]["start"] == "2015-12-01" and result["period"]["end"] == "2016-01-29"
    agent = result["agent"]
    assert agent["cumulative_return"] == 0.0 and agent["sharpe"] == 0.0
    assert agent["annual_turnover"] == 0.0 and agent["calmar"] is None  # NaN -> null
    assert set(result["assets"]) == {"SYN0", "SYN1", "SYN2"}
    # business days (the synthetic market has no holidays): 23 in December, 21 in January
    assert len(result["series"]["agent"]) == result["period"]["days"] == 23 + 21
    assert result["equal_weight"]["annual_turnover"] > 0  # the initial purchase
    assert (out / "backtest.json").is_file() and (out / "backtest.png").is_file()
    assert not (run / "backtest.json").exists()
    report = format_report(result)
    assert "equal-weight buy & hold" in report and "SYN2 buy & hold" in report
    assert "n/a" in report  # the flat agent's Calmar


def test_backtest_errors_name_the_problem(tmp_path, monkeypatch):
    run = make_run(tmp_path, monkeypatch, ONE_ASSET, action=0.0)
    with pytest.raises(MarketDataError, match="outside the data"):
        backtest(run, start="2030-01-02")
    pd = pytest.importorskip("pandas")
    from xiaoyarl.finance.synthetic import synthetic_market

    frame = synthetic_market(2, 300, seed=1).to_frame()
    good = tmp_path / "two.csv"
    frame.to_csv(good, index=False)
    with pytest.raises(ConfigError, match="does not match the policy"):
        backtest(run, data=str(good))  # 2 tickers, the policy trades 1
    broken = tmp_path / "broken.csv"
    pd.concat([frame.iloc[:5], frame.iloc[4:]]).to_csv(broken, index=False)
    with pytest.raises(MarketDataError, match="repeats a"):
        backtest(run, data=str(broken))

    other = tmp_path / "cartpole"
    other.mkdir()
    save_config(Config(algo="ppo", env_id="CartPole-v1"), other / "config.yaml")
    with pytest.raises(CheckpointError, match="trained on CartPole-v1"):
        backtest(other)
    with pytest.raises(CheckpointError, match="no config.yaml"):
        backtest(tmp_path / "nowhere")


def test_backtest_of_a_tiny_trained_run(tmp_path):
    """Train PPO in-process on the trading env for a few rollouts, then backtest its folder."""
    from xiaoyarl import train_agent

    env_kwargs = {"market": "synthetic", "num_assets": 2, "num_days": 300, "max_step": 30}
    config = Config(
        algo="ppo", env_id=ENV_ID, seed=0, max_steps=2048, num_envs=8, eval_every=1024,
        eval_episodes=2, cwd=str(tmp_path / "run"), env_kwargs=env_kwargs, threads=1,
    )  # fmt: skip
    train_agent(config, log=None)
    result = backtest(tmp_path / "run")
    assert result["period"]["days"] == 60 and result["tickers"] == ["SYN0", "SYN1"]
    assert len(result["series"]["agent"]) == 60 and result["series"]["agent"][0] == 1e6
    assert (tmp_path / "run" / "backtest.png").is_file()
