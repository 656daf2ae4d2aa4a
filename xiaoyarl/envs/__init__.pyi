"""The public names of `xiaoyarl.envs` (its `__init__.py` loads them on first use,
`xiaoyarl/lazy.py`); what type checkers read."""

from xiaoyarl.config import BACKENDS
from xiaoyarl.envs.base import EnvSpec, TorchVecEnv, VecEnv
from xiaoyarl.envs.classic import TORCH_ENVS as CLASSIC_ENVS
from xiaoyarl.envs.registry import is_batched, is_torch_native, make_env
from xiaoyarl.envs.targets import DEFAULT_TARGET_RETURNS

# torch-native envs by id, built on first use (`envs/registry.py`)
TORCH_ENVS: dict[str, type[VecEnv]]

__all__ = [
    "BACKENDS",
    "CLASSIC_ENVS",
    "DEFAULT_TARGET_RETURNS",
    "EnvSpec",
    "TORCH_ENVS",
    "TorchVecEnv",
    "VecEnv",
    "is_batched",
    "is_torch_native",
    "make_env",
]
