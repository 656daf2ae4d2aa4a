"""Market data, indicators, synthetic markets and backtests for the stock-trading env.

- `data`: the `Market` panel `(num_dates, num_tickers, 5)`, `load_market` (CSV / Parquet,
  validated), `load_sample` (a real daily sample an installed package ships);
- `indicators`: FinRL's technical indicators (stockstats definitions) and turbulence index,
  as causal torch tensors over the whole panel;
- `synthetic`: seeded factor-model markets with regimes, volatility clustering and optional
  planted structure (the default data: nothing is downloaded);
- `metrics`: Sharpe, Sortino, drawdown, ... of daily account values;
- `backtest`: score a trained run on the held-out period against buy-and-hold.

The env itself is `xiaoyarl.envs.stock.StockTradingEnv`.
"""

from xiaoyarl.finance.data import Market, frame_to_market, load_market, load_sample
from xiaoyarl.finance.indicators import DEFAULT_INDICATORS, compute_indicators, turbulence
from xiaoyarl.finance.metrics import performance
from xiaoyarl.finance.synthetic import STRUCTURES, synthetic_market

__all__ = [
    "DEFAULT_INDICATORS",
    "STRUCTURES",
    "Market",
    "compute_indicators",
    "frame_to_market",
    "load_market",
    "load_sample",
    "performance",
    "synthetic_market",
    "turbulence",
]
