"""Stock trading: market data, indicators, synthetic markets, the trading env and backtests.

- `data`: the `Market` panel `(num_dates, num_tickers, 5)`, `load_market` (CSV / Parquet,
  validated), `load_sample` (a real daily sample an installed package ships);
- `indicators`: FinRL's technical indicators (stockstats definitions) and turbulence index,
  as causal torch tensors over the whole panel;
- `synthetic`: seeded factor-model markets with regimes, volatility clustering and optional
  planted structure (the default data: nothing is downloaded);
- `metrics`: Sharpe, Sortino, drawdown, ... of daily account values;
- `env`: `StockTradingEnv` (`StockTrading-v0`), FinRL's MDP as batched tensors;
- `backtest`: score a trained run on the held-out period against buy-and-hold.

Names load on first use (PEP 562).
"""

from __future__ import annotations

from xiaoyarl.lazy import attach

__getattr__, __dir__, __all__ = attach(globals())
