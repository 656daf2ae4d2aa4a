"""Dict and Tuple action spaces as agents see them (`EnvSpec.action_parts`).

A structured action space (gymnasium's Dict or Tuple, nested, of Discrete, MultiDiscrete,
MultiBinary and Box parts; the parameterised actions of Platform or goal-kicking tasks,
`Tuple(Discrete(3), Tuple(Box(1), Box(1), Box(1)))`) is read as its leaves in the space's order,
each a *part*: `(path, kind, shape, counts, starts)`.

- `path`: the keys from the top, a Dict's key as a `str`, a Tuple's position as an `int`;
- `kind`: "discrete" or "continuous";
- `shape`: one action of the part: `()` for a Discrete, `(K,)` for a MultiDiscrete or
  MultiBinary, the Box's own shape;
- `counts`, `starts`: a discrete part's components, the choices of each and the first value
  (a Discrete's `start`); `()` for a continuous part.

Agents act on one flat vector: every discrete component, in the parts' order, then every
continuous value, in the parts' order. So the spec of such an env is one the agents already
know, chosen by what the parts are:

- only discrete parts: multi-discrete actions, int64 `(num_envs, K)`, `action_nvec` the counts;
- only continuous parts: continuous actions `(num_envs, C)` in `[-1, 1]`, the bounds side by
  side in `action_low`/`action_high`;
- both (hybrid actions): float32 `(num_envs, K + C)`, the K discrete choices (whole numbers)
  then the C continuous values in `[-1, 1]`; `if_discrete` False, `action_nvec` the counts,
  `action_dim` C and the bounds the continuous values'.

`nest` turns the flat parts back into the env's own structure (a dict or tuple, nested as the
space is), for numpy arrays and torch tensors alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from xiaoyarl.errors import EnvError

# (path, kind, shape, counts, starts): see the module
Part = tuple[tuple[str | int, ...], str, tuple[int, ...], tuple[int, ...], tuple[int, ...]]
STRUCTURED = (spaces.Dict, spaces.Tuple)


def read_parts(space: spaces.Space, name: str,
               path: tuple[str | int, ...] = ()) -> tuple[Part, ...]:  # fmt: skip
    """The parts of a Dict or Tuple action space, in its order (see the module); an `EnvError`
    naming a part of another kind and what to do."""
    if isinstance(space, spaces.Dict):
        return tuple(part for key, sub in space.spaces.items()
                     for part in read_parts(sub, name, (*path, key)))  # fmt: skip
    if isinstance(space, spaces.Tuple):
        return tuple(part for i, sub in enumerate(space.spaces)
                     for part in read_parts(sub, name, (*path, i)))  # fmt: skip
    if isinstance(space, spaces.Discrete):
        return ((path, "discrete", (), (int(space.n),), (int(space.start),)),)
    if isinstance(space, spaces.MultiBinary | spaces.MultiDiscrete):
        binary = isinstance(space, spaces.MultiBinary)
        nvec = np.full(space.shape, 2) if binary else np.asarray(space.nvec)  # type: ignore[union-attr]
        if nvec.ndim != 1:
            raise EnvError(f"{name}: action part {_label(path)} {space} has {nvec.ndim} axes; "
                           f"a multi-discrete part is one vector.")  # fmt: skip
        start = np.zeros_like(nvec) if binary else np.asarray(space.start)  # type: ignore[union-attr]
        return ((path, "discrete", (len(nvec),), tuple(int(k) for k in nvec),
                 tuple(int(s) for s in start)),)  # fmt: skip
    if isinstance(space, spaces.Box):
        if not (np.isfinite(space.low).all() and np.isfinite(space.high).all()):
            raise EnvError(f"{name}: action part {_label(path)} {space} has infinite bounds, "
                           f"so actions in [-1, 1] cannot be rescaled to it; give it finite "
                           f"bounds.")  # fmt: skip
        return ((path, "continuous", tuple(int(d) for d in space.shape), (), ()),)
    raise EnvError(f"{name}: action part {_label(path)} is a {type(space).__name__} space; the "
                   f"parts of a Dict or Tuple action space are Discrete, MultiDiscrete, "
                   f"MultiBinary, Box, or Dicts and Tuples of them.")  # fmt: skip


def bounds(space: spaces.Space) -> tuple[np.ndarray, np.ndarray]:
    """The bounds of every continuous value of a Dict or Tuple action space, side by side in the
    parts' order (float64 `(C,)` each)."""
    boxes = [sub for sub in leaves(space) if isinstance(sub, spaces.Box)]
    if not boxes:
        return np.zeros(0), np.zeros(0)
    low = np.concatenate([b.low.reshape(-1).astype(np.float64) for b in boxes])
    high = np.concatenate([b.high.reshape(-1).astype(np.float64) for b in boxes])
    return low, high


def leaves(space: spaces.Space) -> list[spaces.Space]:
    """The leaf spaces of a Dict or Tuple space, in the parts' order."""
    if isinstance(space, spaces.Dict):
        return [leaf for sub in space.spaces.values() for leaf in leaves(sub)]
    if isinstance(space, spaces.Tuple):
        return [leaf for sub in space.spaces for leaf in leaves(sub)]
    return [space]


def counts(parts: Sequence[Part]) -> tuple[int, ...]:
    """The choices of every discrete component, in the parts' order."""
    return tuple(k for _, kind, _, nvec, _ in parts if kind == "discrete" for k in nvec)


def continuous_dim(parts: Sequence[Part]) -> int:
    """How many continuous values the parts hold."""
    return sum(math.prod(shape) for _, kind, shape, _, _ in parts if kind == "continuous")


def split(parts: Sequence[Part], discrete: Any, continuous: Any, offsets: bool = True) -> list:
    """Each part's actions `(batch, *shape)` from the discrete components `(batch, K)` and the
    continuous values `(batch, C)` (numpy or torch; the continuous already in the env's units),
    a discrete part's with its starts added where `offsets`."""
    out, k, c = [], 0, 0
    for _, kind, shape, nvec, starts in parts:
        if kind == "discrete":
            value = discrete[:, k : k + len(nvec)]
            k += len(nvec)
            if offsets and any(starts):
                value = value + _like(value, starts)
            out.append(value.reshape(value.shape[0], *shape))
        else:
            size = math.prod(shape)
            value = continuous[:, c : c + size]
            c += size
            out.append(value.reshape(value.shape[0], *shape))
    return out


def nest(parts: Sequence[Part], values: Sequence[Any]) -> Any:
    """The parts' `values` in the env's structure: a dict where the space has a Dict, a tuple
    where it has a Tuple, nested as it is."""
    return _nest([(path, value) for (path, *_), value in zip(parts, values, strict=True)])


def _nest(items: list[tuple[tuple[str | int, ...], Any]]) -> Any:
    if len(items) == 1 and not items[0][0]:
        return items[0][1]
    groups: dict[str | int, list] = {}
    for path, value in items:
        groups.setdefault(path[0], []).append((path[1:], value))
    nested = {key: _nest(group) for key, group in groups.items()}
    if all(isinstance(key, int) for key in nested):
        return tuple(nested[i] for i in range(len(nested)))
    return nested


def names(parts: Sequence[Part]) -> list[str]:
    """Each part's path as one name, its keys joined by "/" (`"1/0"`, `"aim"`)."""
    return [_label(path) for path, *_ in parts]


def index(structure: Any, i: int) -> Any:
    """Row `i` of every leaf of a nested structure of batches (one sub-env's action)."""
    if isinstance(structure, dict):
        return {key: index(value, i) for key, value in structure.items()}
    if isinstance(structure, tuple):
        return tuple(index(value, i) for value in structure)
    return structure[i]


def _label(path: tuple[str | int, ...]) -> str:
    return "/".join(map(str, path)) or "the action"


def _like(value: Any, starts: tuple[int, ...]) -> Any:
    """`starts` as an array or tensor to add to `value`."""
    if isinstance(value, np.ndarray):
        return np.asarray(starts, dtype=value.dtype)
    return value.new_tensor(starts)
