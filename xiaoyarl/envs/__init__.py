"""Environments: the `VecEnv` contract (`base.py`), torch-native simulators and adapters;
`make_env` (`registry.py`) builds one by id.

Names load on first use (PEP 562): `import xiaoyarl.envs.cartpole` loads CartPole and the
contract only; `make_env` and `TORCH_ENVS` load the registry (and every torch-native env).
"""

from __future__ import annotations

import importlib

from xiaoyarl.lazy import attach

__getattr__, __dir__, __all__ = attach(globals(), {
    "TORCH_ENVS": lambda: importlib.import_module("xiaoyarl.envs.registry").torch_envs(),
})  # fmt: skip
