"""Multi-agent environments: `make_multi_agent_env` builds a `MultiAgentVecEnv`.

Ids are either a built-in torch-native env (`MULTI_AGENT_ENVS`: cooperative navigation as in
mpe2's `simple_spread_v3`, QMIX's two-step game) or a PettingZoo parallel env named
`"module:env_fn"` (e.g. `"mpe2:simple_spread_v3"`), adapted by `PettingZooVecEnv`. A
PettingZoo id names a Python attribute (`env_fn` is a dotted identifier), which tells it apart
from a single-agent gymnasium id `"module:Env-v0"` (whose name has a `-vN` version).

The contract (shapes, auto-reset, masks, team return) is in `envs/multi/base.py` and
`docs/guides/multi-agent.md`.
"""

from __future__ import annotations

from xiaoyarl.lazy import attach

__getattr__, __dir__, __all__ = attach(globals())
