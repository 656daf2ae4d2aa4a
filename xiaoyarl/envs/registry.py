"""`make_env`: the env of an id, torch-native when one exists, else gymnasium's (or EnvPool's,
or MuJoCo Playground's, as the backend asks)."""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
from collections.abc import Callable

import torch

from xiaoyarl.config import BACKENDS
from xiaoyarl.envs.base import VecEnv
from xiaoyarl.envs.chase import ChaseEnv
from xiaoyarl.envs.classic import TORCH_ENVS as CLASSIC_ENVS
from xiaoyarl.errors import EnvError

# Torch-native envs of the applications above this layer, by id: "module:Class", imported when
# the registry is first built, as gymnasium's entry points are (envs/ imports no application).
ENTRY_POINTS = {"StockTrading-v0": "xiaoyarl.finance.env:StockTradingEnv"}
# MinAtar's five games (Young and Tian 2019) in torch, under the `minatar` package's own ids
# (its minimal action sets); imported when the registry is first built
MINATAR_GAMES = {"Asterix": "asterix", "Breakout": "breakout", "Freeway": "freeway",
                 "Seaquest": "seaquest", "SpaceInvaders": "space_invaders"}  # fmt: skip
ENTRY_POINTS.update(
    (f"MinAtar/{game}-v1", f"xiaoyarl.envs.minatar.{module}:{game}Env")
    for game, module in MINATAR_GAMES.items()
)


@functools.cache
def torch_envs() -> dict[str, type[VecEnv]]:
    """Torch-native envs by id (`TORCH_ENVS`): classic control, the chasing task and the
    entry points, imported on the first call (an application's env imports its own
    dependencies)."""
    entries = {}
    for env_id, entry in ENTRY_POINTS.items():
        module, name = entry.split(":")
        entries[env_id] = getattr(importlib.import_module(module), name)
    return {**CLASSIC_ENVS, **entries, "Chase-v0": ChaseEnv}


def is_torch_native(env_id: str, backend: str = "auto") -> bool:
    """Whether `make_env(env_id, backend=backend)` gives a torch-native env."""
    return backend in ("auto", "torch") and env_id in torch_envs()


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
    evaluation: bool = False,
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
    evaluation: an env to evaluate on, not to train on: Atari games then play whole games with
    unclipped rewards (`envs/atari.py`); other envs are the same either way.
    """
    if backend not in BACKENDS:
        raise EnvError(f"unknown env backend '{backend}'; choose one of {', '.join(BACKENDS)}.")
    if is_torch_native(env_id, backend):
        # a torch-native env's constructor takes these arguments; VecEnv's own does not
        env_class: Callable[..., VecEnv] = torch_envs()[env_id]
        check_env_kwargs(env_id, env_class, env_kwargs)
        return env_class(num_envs, device=device, seed=seed, **(env_kwargs or {}))
    if backend == "torch":
        raise EnvError(
            f"there is no torch-native env named '{env_id}'. Torch-native envs: "
            f"{', '.join(torch_envs())}. Use backend 'gymnasium' (or 'auto') for other ids."
        )
    if backend == "envpool":
        from xiaoyarl.envs.envpool import EnvPoolVecEnv

        if env_kwargs:
            raise EnvError("env_kwargs are not passed to EnvPool envs; use backend gymnasium.")
        return EnvPoolVecEnv(env_id, num_envs, device=device, seed=seed, evaluation=evaluation)
    if backend == "playground":
        from xiaoyarl.envs.playground import PlaygroundVecEnv

        return PlaygroundVecEnv(env_id, num_envs, device=device, seed=seed, env_kwargs=env_kwargs)
    import gymnasium

    from xiaoyarl.envs.gym import GymVecEnv

    same = [k for k in torch_envs() if k.lower() == env_id.lower() and k != env_id]
    if same and env_id not in gymnasium.registry:  # ids are case-sensitive, as gymnasium's
        raise EnvError(f"unknown environment '{env_id}'. Did you mean '{same[0]}'? (Env ids are "
                       f"case-sensitive.)")  # fmt: skip
    return GymVecEnv(env_id, num_envs, device=device, seed=seed, vector_mode=vector_mode,
                     env_kwargs=env_kwargs, evaluation=evaluation)  # fmt: skip


def check_env_kwargs(
    env_id: str, env_class: Callable[..., VecEnv], env_kwargs: dict | None
) -> None:
    """Refuse a keyword the torch-native env's constructor does not take, naming the ones it
    does (and the closest), as gymnasium's `make` does for its envs."""
    params = inspect.signature(env_class).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    own = [
        name
        for name, p in params.items()
        if name not in ("num_envs", "device", "seed")
        and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    for key in env_kwargs or {}:
        if key not in own:
            close = difflib.get_close_matches(key, own, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            takes = f"It takes: {', '.join(own)}." if own else "It takes none."
            raise EnvError(
                f"env_kwargs: the torch-native env '{env_id}' takes no argument "
                f"'{key}'.{hint} {takes}"
            )
