"""Multi-agent algorithms on the single-agent ones: VDN and QMIX (value decomposition),
MADDPG and MATD3 (centralized critics), MAPPO (PPO with a centralized value), PQN-VDN (PQN with
VDN's additive team value).

Names load on first use (PEP 562).
"""

from __future__ import annotations

from xiaoyarl.lazy import attach

__getattr__, __dir__, __all__ = attach(globals())
