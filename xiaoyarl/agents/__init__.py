"""Agents, one module per algorithm family; `registry.py` names them by algorithm.

Names load on first use (PEP 562): `import xiaoyarl.agents.ppo` loads PPO and what it builds
on, not every agent; `ALGORITHMS`, `agent_class` and `make_agent` load the registry (and so
every agent).
"""

from __future__ import annotations

from xiaoyarl.lazy import attach

__getattr__, __dir__, __all__ = attach(globals())
