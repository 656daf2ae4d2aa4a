"""xiaoyarl: massively parallel deep reinforcement learning in PyTorch.

The public names (`__init__.pyi`) load on first use (PEP 562), so `import xiaoyarl.core.nets`
loads the networks and not the trainer: `from xiaoyarl import train_agent` imports
`xiaoyarl.run` when it runs.
"""

from __future__ import annotations

from xiaoyarl.envs.gym_registration import register_torch_envs
from xiaoyarl.lazy import attach

__version__ = "0.1.0"
__getattr__, __dir__, __all__ = attach(globals())

# `import xiaoyarl` is enough for `gymnasium.make_vec("xiaoyarl/CartPole-v1")` (README)
register_torch_envs()
