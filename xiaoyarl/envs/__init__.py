"""Environments: `make_env` builds a `VecEnv` (torch-native when one exists, else gymnasium).

Names load on first use (PEP 562): `import xiaoyarl.envs.classic` loads the classic-control
envs only; `TORCH_ENVS` (and so `make_env`) imports every torch-native env when first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from xiaoyarl.errors import EnvError
from xiaoyarl.lazy import lazy_attributes

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch

    from xiaoyarl.envs.base import DEFAULT_TARGET_RETURNS, EnvSpec, TorchVecEnv, VecEnv

# Torch-native envs by id: classic control, the stock-trading MDP (`finance/env.py`) and the
# chasing task (`envs/chase.py`). Built by `_torch_envs()` on first access; `CLASSIC_ENVS` is
# `envs/classic.py`'s `TORCH_ENVS`.
TORCH_ENVS: dict[str, type[VecEnv]]
CLASSIC_ENVS: dict[str, type[TorchVecEnv]]

# public name -> the module that defines it
_MODULES = {
    "DEFAULT_TARGET_RETURNS": "xiaoyarl.envs.base",
    "EnvSpec": "xiaoyarl.envs.base",
    "TorchVecEnv": "xiaoyarl.envs.base",
    "VecEnv": "xiaoyarl.envs.base",
}


# Torch-native envs of the applications above this layer, by id: "module:Class", imported when
# the registry is first built, as gymnasium's entry points are (envs/ imports no application).
ENTRY_POINTS = {"StockTrading-v0": "xiaoyarl.finance.env:StockTradingEnv"}


def _torch_envs() -> dict[str, type[VecEnv]]:
    """TORCH_ENVS, built on first use (it imports every torch-native env) and kept."""
    if "TORCH_ENVS" not in globals():
        from xiaoyarl.envs.chase import ChaseEnv
        from xiaoyarl.envs.classic import TORCH_ENVS as CLASSIC_ENVS

        entries = {}
        for env_id, entry in ENTRY_POINTS.items():
            module, name = entry.split(":")
            entries[env_id] = getattr(importlib.import_module(module), name)
        globals()["TORCH_ENVS"] = {**CLASSIC_ENVS, **entries, "Chase-v0": ChaseEnv}
    return globals()["TORCH_ENVS"]


BACKENDS = ("auto", "torch", "gymnasium", "envpool", "playground")


def is_torch_native(env_id: str, backend: str = "auto") -> bool:
    """Whether `make_env(env_id, backend=backend)` gives a torch-native env."""
    return backend in ("auto", "torch") and env_id in _torch_envs()


def is_batched(env_id: str, backend: str = "auto") -> bool:
    """Whether the env steps all its sub-envs as one batched tensor program (torch-native, or
    MuJoCo Playground's JAX), so that many sub-envs cost little more than one."""
    return is_torch_native(env_id, backend) or backend == "playground"


def make_env(
    env_id: str,
    num_envs: int = 1,
    device: str | torch.device = "cpu",
    backend: str = "auto",
    seed: int | None = None,
    vector_mode: str = "sync",
    env_kwargs: dict | None = None,
) -> VecEnv:
    """A vectorized env of `num_envs` sub-envs on `device`.

    backend: "auto" takes the torch-native env when there is one for `env_id`, else gymnasium;
    "torch" insists on the torch-native env; "gymnasium" always adapts gymnasium's env (ids of
    the form "my_module:MyEnv-v0" import `my_module` first, so it can register its envs);
    "envpool" takes EnvPool's C++ version of the task (optional extra); "playground" takes a
    MuJoCo Playground task (JAX/MJX, optional extra) on the JAX device matching `device`.
    vector_mode: how gymnasium sub-envs run, "sync" (in this process) or "async" (one process each).
    env_kwargs: keyword arguments of the env: the torch-native env's constructor (e.g. the
    market of "StockTrading-v0"), or `gymnasium.make`'s.
    """
    if backend not in BACKENDS:
        raise EnvError(f"unknown env backend '{backend}'; choose one of {', '.join(BACKENDS)}.")
    if is_torch_native(env_id, backend):
        # a torch-native env's constructor takes these arguments; VecEnv's own does not
        env_class: Callable[..., VecEnv] = _torch_envs()[env_id]
        return env_class(num_envs, device=device, seed=seed, **(env_kwargs or {}))
    if backend == "torch":
        raise EnvError(
            f"there is no torch-native env named '{env_id}'. Torch-native envs: "
            f"{', '.join(_torch_envs())}. Use backend 'gymnasium' (or 'auto') for other ids."
        )
    if backend == "envpool":
        from xiaoyarl.envs.envpool import EnvPoolVecEnv

        if env_kwargs:
            raise EnvError("env_kwargs are not passed to EnvPool envs; use backend gymnasium.")
        return EnvPoolVecEnv(env_id, num_envs, device=device, seed=seed)
    if backend == "playground":
        from xiaoyarl.envs.playground import PlaygroundVecEnv

        return PlaygroundVecEnv(env_id, num_envs, device=device, seed=seed, env_kwargs=env_kwargs)
    from xiaoyarl.envs.gym import GymVecEnv

    return GymVecEnv(env_id, num_envs, device=device, seed=seed, vector_mode=vector_mode,
                     env_kwargs=env_kwargs)  # fmt: skip


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


def _classic_envs() -> dict:
    return importlib.import_module("xiaoyarl.envs.classic").TORCH_ENVS


__getattr__, __dir__ = lazy_attributes(
    globals(), {**_MODULES, "TORCH_ENVS": _torch_envs, "CLASSIC_ENVS": _classic_envs}
)
