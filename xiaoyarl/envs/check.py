"""`check_env`: does an environment keep xiaoyarl's contract, and if not, what to fix.

In the spirit of Stable-Baselines3's `check_env`, in two parts:

1. For a gymnasium env (any id `make_env` would hand to gymnasium, `module:Env-v0` included),
   one raw `gymnasium.make` instance: supported spaces, the reset/step API, observations
   (type, shape, dtype, finite, inside the bounds), rewards and flags, a time limit reported
   as a termination, and seeding (same seed and actions -> same results; another seed ->
   another first observation).
2. The `VecEnv` that `make_env` builds (torch-native, gymnasium or envpool): tensor types,
   dtypes, shapes and device, `info["final_state"]`, finite values, the time limit and
   auto-reset over `spec.max_step + 5` random steps (at most `DEFAULT_STEPS` unless asked for
   more), and seeding determinism.

A check takes seconds and bounded memory: the seeding replay compares a fingerprint of each
step's data, not the data kept.

Nothing the env raises escapes: exceptions become problems naming their type and message.
`format_report` turns the problems into the text a person reads.
"""

from __future__ import annotations

import copy
import math
import re
import warnings
from typing import Any, Literal, NamedTuple

import gymnasium
import numpy as np
import torch
from gymnasium import spaces

from xiaoyarl.envs import BACKENDS, is_torch_native, make_env
from xiaoyarl.envs.actions import STRUCTURED, read_parts
from xiaoyarl.envs.base import EnvSpec, VecEnv
from xiaoyarl.envs.gym import (
    WRAP_ADVICE,
    dict_layout,
    keyed_by_position,
    make_gym_env,
    resolve_gym_id,
    time_limit_of,
)
from xiaoyarl.errors import ConfigError, EnvError, XiaoyaError

# Steps of the raw gymnasium env replayed to check its seeding (the VecEnv replays all steps).
SEEDING_STEPS = 100
# The most random steps a check runs by default: the time limit + 5 where that is shorter, which
# exercises time limits and auto-resets; an Atari game's 27,000-step limit needs `steps`.
DEFAULT_STEPS = 2_000

_SEEDING_ADVICE = (
    "Draw every random number from `self.np_random`, which `super().reset(seed=seed)` seeds in "
    "your reset(); never from `np.random`, `random`, `torch` or the clock"
)
_TORCH_SEEDING_ADVICE = (
    "Draw every random number from the env's own `self.generator` (seeded by the constructor "
    "and by reset(seed)), never from torch's global generator"
)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # colour codes in gymnasium's warnings


Severity = Literal["error", "warning"]


class Problem(NamedTuple):
    """One finding: `severity` "error" (breaks xiaoyarl or gymnasium's API) or "warning"."""

    severity: Severity
    message: str


class _Findings:
    """Problems in the order first seen; a problem seen again only increments its count."""

    def __init__(self) -> None:
        self._items: dict[str, list] = {}  # key -> [severity, message, count]

    def add(self, key: str, severity: Severity, message: str) -> None:
        if key in self._items:
            self._items[key][2] += 1
        else:
            self._items[key] = [severity, message, 1]

    def has_errors(self) -> bool:
        return any(severity == "error" for severity, _, _ in self._items.values())

    def problems(self) -> list[Problem]:
        out = []
        for severity, message, count in self._items.values():
            if count > 1:
                message = f"{message} [seen {count} times]"
            out.append(Problem(severity, message))
        return out


def check_env(
    env_id: str,
    backend: str = "auto",
    num_envs: int = 4,
    seed: int = 0,
    steps: int | None = None,
    env_kwargs: dict | None = None,
) -> list[Problem]:
    """Check `env_id` against xiaoyarl's env contract; an empty list means no problem found.

    backend: as in `make_env`. The raw gymnasium checks run when `make_env` would use
    gymnasium ("auto" for an id with no torch-native env, or "gymnasium").
    num_envs, seed: for `make_env(env_id, num_envs, "cpu", backend, seed)`.
    steps: random steps to run (default: the env's time limit + 5, so that time limits and
    auto-resets are exercised, at most `DEFAULT_STEPS`).
    env_kwargs: the env's keyword arguments, as a run's `env_kwargs` (`obs_keys`, the keys of a
    Dict observation to read, included).
    """
    if backend not in BACKENDS:
        raise ConfigError(f"unknown env backend '{backend}'; choose one of {', '.join(BACKENDS)}.")
    if num_envs < 1 or (steps is not None and steps < 1):
        raise ConfigError(f"num_envs and steps must be positive, got {num_envs} and {steps}.")
    found = _Findings()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        usable = True
        if backend not in ("envpool", "playground") and not is_torch_native(env_id, backend):
            usable = _check_gymnasium(env_id, seed, steps, found, env_kwargs)
        if usable:
            _check_vec_env(env_id, backend, num_envs, seed, steps, found, env_kwargs)
    if not found.has_errors():  # else gymnasium's warnings mostly repeat what was found
        for w in caught:  # gymnasium's env checker and wrappers warn about what they notice
            if issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning)):
                continue
            text = _ANSI.sub("", str(w.message)).strip().removeprefix("WARN: ")
            found.add(f"warned:{text}", "warning", f"a warning was raised while checking: {text}")
    return found.problems()


def default_steps(time_limit: int) -> int:
    """The random steps a check runs unless told: past the time limit, within `DEFAULT_STEPS`."""
    return min(time_limit + 5, DEFAULT_STEPS)


def format_report(env_id: str, problems: list[Problem]) -> str:
    """A readable report of `check_env(env_id)`'s problems, errors first."""
    errors = [p for p in problems if p.severity == "error"]
    others = [p for p in problems if p.severity != "error"]
    if not problems:
        return f"check_env('{env_id}'): no problems found."
    lines = [f"check_env('{env_id}'): {len(errors)} error(s), {len(others)} warning(s)"]
    lines += [f"  ERROR: {p.message}" for p in errors]
    lines += [f"  warning: {p.message}" for p in others]
    return "\n".join(lines)


# --- 1. the raw gymnasium env -------------------------------------------------------------------
# Not gymnasium's check_env: it steps once and stops at its first failure, so NaN observations,
# a time limit reported as a termination and a later exception pass it (tests/test_env_checker.py).
def _check_gymnasium(
    env_id: str, seed: int, steps: int | None, found: _Findings, env_kwargs: dict | None
) -> bool:
    """Check one raw `gymnasium.make` instance; False when xiaoyarl cannot use its spaces."""
    try:
        registered_id, kwargs = resolve_gym_id(env_id, env_kwargs)
        keep = kwargs.pop("obs_keys", None)  # xiaoyarl's own settings, not the env's
        kwargs.pop("atari", None)
        env = make_gym_env(env_id, registered_id, {**kwargs, "disable_env_checker": True})
    except Exception as e:
        found.add("make", "error", f"making the gymnasium env failed: {_describe(e)}")
        return False
    try:
        usable = _check_spaces(env, found, keep)
        limit = _max_episode_steps(env)
        num_steps = default_steps(limit) if steps is None else steps
        if _check_api(env, seed, num_steps, limit, found):
            _check_gym_seeding(env, seed, min(num_steps, SEEDING_STEPS), found)
        return usable
    finally:
        _close(env, found)


def _check_spaces(env: gymnasium.Env, found: _Findings, keep: list | None = None) -> bool:
    """Check the observation and action spaces (of a Dict, the keys `keep`, where given); False
    if xiaoyarl cannot use them."""
    usable = True
    obs_space, act_space = env.observation_space, env.action_space
    if isinstance(obs_space, spaces.Tuple):  # read as a Dict keyed by position
        obs_space = keyed_by_position(obs_space)
    if isinstance(obs_space, spaces.Dict):  # packed into one vector, if every key can be read
        if keep is not None:
            obs_space = spaces.Dict({k: v for k, v in obs_space.spaces.items() if k in keep})
        try:
            dict_layout(obs_space, "this env")
        except EnvError as e:
            found.add("obs-space", "error", str(e))
            usable = False
    elif not isinstance(obs_space, spaces.Box):
        found.add(
            "obs-space",
            "error",
            f"observation space {obs_space} is not supported: xiaoyarl needs a Box (a vector, "
            f"flattened to float32 if it has more axes, or an image (H, W, C), (C, H, W) or (H, "
            f"W), uint8 kept as uint8) or a Dict (or Tuple) of Box and Discrete keys. To use "
            f"this env, {WRAP_ADVICE}.",
        )
        usable = False
    if isinstance(act_space, spaces.Box):
        if not (np.isfinite(act_space.low).all() and np.isfinite(act_space.high).all()):
            found.add(
                "act-space",
                "error",
                f"action space {act_space} has infinite bounds, so xiaoyarl's actions in "
                f"[-1, 1] cannot be rescaled to it. Give the space finite bounds, or wrap the env "
                f"with gymnasium.wrappers.RescaleAction in your own module.",
            )
            usable = False
    elif isinstance(act_space, STRUCTURED):  # read by its parts, if every part can be
        try:
            read_parts(act_space, "this env")
        except EnvError as e:
            found.add("act-space", "error", str(e))
            usable = False
    elif not isinstance(act_space, spaces.Discrete | spaces.MultiDiscrete | spaces.MultiBinary):
        found.add(
            "act-space",
            "error",
            f"action space {act_space} is not supported: xiaoyarl supports Discrete, "
            f"MultiDiscrete, MultiBinary and finite Box action spaces, and Dicts and Tuples of "
            f"them. For another, {WRAP_ADVICE}.",
        )
        usable = False
    return usable


def _check_api(env: gymnasium.Env, seed: int, num_steps: int, limit: int, found: _Findings) -> bool:
    """Reset, then `num_steps` random steps: the API, observations, rewards, flags, time limit.

    False when reset() or step() is too broken for the seeding check to mean anything.
    """
    obs_space = env.observation_space
    env.action_space.seed(seed)
    try:
        out: Any = env.reset(seed=seed)  # whatever the env returns: checked below
    except Exception as e:
        found.add(
            "reset-raised",
            "error",
            f"the gymnasium env's reset(seed={seed}) raised {_sentence(_describe(e))} "
            f"reset must accept the keywords seed and options.",
        )
        return False
    if not (isinstance(out, tuple) and len(out) == 2):
        found.add(
            "reset-api",
            "error",
            f"the gymnasium env's reset() returned {_short(out)}; it "
            f"must return a tuple (observation, info) with info a dict.",
        )
        return False
    _check_obs(out[0], obs_space, "from reset()", found)
    _check_info(out[1], "reset()", found)

    episodes: list[tuple[int, bool, bool]] = []  # (length, terminated, truncated)
    length = 0
    for t in range(1, num_steps + 1):
        action = env.action_space.sample()
        try:
            out = env.step(action)
        except Exception as e:
            found.add("step-raised", "error", _step_exception(env, action, t, e))
            return False
        if not (isinstance(out, tuple) and len(out) == 5):
            found.add("step-api", "error", _step_arity_message(out))
            return False
        obs, reward, terminated, truncated, info = out
        _check_obs(obs, obs_space, f"from step() {t}", found)
        _check_reward(reward, t, found)
        ok = _check_flag(terminated, "terminated", t, found)
        ok = _check_flag(truncated, "truncated", t, found) and ok
        _check_info(info, "step()", found)
        length += 1
        if ok and (terminated or truncated):
            episodes.append((length, bool(terminated), bool(truncated)))
            length = 0
            try:
                env.reset()
            except Exception as e:
                found.add(
                    "reset-raised",
                    "error",
                    f"the gymnasium env's reset() after an episode ended raised "
                    f"{_sentence(_describe(e))}",
                )
                return False
    _check_time_limit(episodes, limit, "the gymnasium env", found)
    return True


def _check_gym_seeding(env: gymnasium.Env, seed: int, num_steps: int, found: _Findings) -> None:
    """Same seed and actions -> the same observations and rewards; another seed -> another start."""
    env.action_space.seed(seed + 1)
    actions = [env.action_space.sample() for _ in range(num_steps)]
    try:
        first = _gym_trajectory(env, seed, actions)
        second = _gym_trajectory(env, seed, actions)
        other_start = copy.deepcopy(env.reset(seed=seed + 1)[0])
    except Exception as e:
        found.add(
            "seeding-raised",
            "error",
            f"replaying {num_steps} steps to check its seeding, the gymnasium env raised "
            f"{_sentence(_describe(e))}",
        )
        return
    for t, (a, b) in enumerate(zip(first, second, strict=True)):
        if not _same_array(a[0], b[0]) or not _same_array(a[1], b[1]):
            where = "the first observations" if t == 0 else f"the results of step {t}"
            found.add(
                "seeding",
                "error",
                f"the gymnasium env is not deterministic given its seed: two runs from "
                f"reset(seed={seed}) with the same actions differ in {where}. Runs cannot be "
                f"reproduced this way. {_SEEDING_ADVICE}.",
            )
            return
    if _same_array(first[0][0], other_start):
        found.add(
            "seed-ignored",
            "warning",
            f"reset(seed={seed}) and reset(seed={seed + 1}) return the same first observation: "
            f"the env may ignore the seed (then all sub-envs of a VecEnv start alike). If the "
            f"start is random, seed it with super().reset(seed=seed) and self.np_random; if it "
            f"is fixed by design, ignore this warning.",
        )


def _gym_trajectory(env: gymnasium.Env, seed: int, actions: list) -> list[tuple[Any, Any]]:
    """`[(obs, reward)]` from `reset(seed)` then `actions` (auto-reset by hand, unseeded)."""
    obs, _ = env.reset(seed=seed)
    out: list[tuple[Any, Any]] = [(copy.deepcopy(obs), 0.0)]  # (arrays, dicts or tuples of them)
    for action in actions:
        obs, reward, terminated, truncated, _ = env.step(action)
        out.append((copy.deepcopy(obs), np.array(reward, copy=True)))
        if terminated or truncated:
            out.append((copy.deepcopy(env.reset()[0]), 0.0))
    return out


def _check_obs(obs: Any, space: spaces.Space, when: str, found: _Findings) -> None:
    """Type, shape, dtype, finiteness and bounds of one observation of a Box space."""
    if not isinstance(space, spaces.Box):
        return
    if not isinstance(obs, np.ndarray):
        found.add(
            "obs-type",
            "error",
            f"the observation {when} is a {type(obs).__name__}, not a "
            f"numpy array; return np.asarray(obs, dtype=np.{space.dtype}).",
        )
        try:
            obs = np.asarray(obs)
        except Exception:
            return
    if obs.shape != space.shape:
        found.add(
            "obs-shape",
            "error",
            f"the observation {when} has shape {obs.shape} but the observation space has shape "
            f"{space.shape}; return observations of the declared shape (or fix the space).",
        )
        return
    if obs.dtype != space.dtype:
        found.add(
            "obs-dtype",
            "error",
            f"the observation {when} has dtype {obs.dtype} but the observation space has dtype "
            f"{space.dtype}; return obs.astype(np.{space.dtype}), or declare the space with "
            f"dtype=np.{obs.dtype}.",
        )
    if not np.issubdtype(obs.dtype, np.number):
        return
    if not np.isfinite(obs).all():
        found.add(
            "obs-finite",
            "error",
            f"the observation {when} contains NaN or inf "
            f"({_short(obs)}); observations must be finite: check the dynamics for a "
            f"division by zero, an overflow or an unclipped velocity.",
        )
        return
    outside = (obs < space.low) | (obs > space.high)
    if outside.any():
        i = np.unravel_index(int(np.flatnonzero(outside)[0]), obs.shape)
        index = i[0] if len(i) == 1 else i
        found.add(
            "obs-bounds",
            "warning",
            f"the observation {when} lies outside the observation space's bounds (element "
            f"{index} is {obs[i]}, bounds [{space.low[i]}, {space.high[i]}]); widen the bounds "
            f"or clip the observation, since normalizers and other tools trust them.",
        )


def _check_reward(reward: Any, t: int, found: _Findings) -> None:
    """The reward of step `t` is one real, finite number."""
    is_real = isinstance(reward, (int, float, np.integer, np.floating, np.bool_)) or (
        isinstance(reward, np.ndarray) and np.issubdtype(reward.dtype, np.number)
    )
    if isinstance(reward, np.ndarray) and reward.ndim > 0:
        found.add(
            "reward-shape",
            "error",
            f"step() returned a reward of type numpy array with shape {reward.shape} (at step "
            f"{t}); the reward must be one real number per step (a Python float or a numpy "
            f"scalar): return float(...) of the reward, or sum the reward's parts.",
        )
    elif not is_real or np.iscomplexobj(reward):
        found.add(
            "reward-type",
            "error",
            f"step() returned a reward of type "
            f"{type(reward).__name__} ({_short(reward)}) at step {t}; the reward must be "
            f"one real number (a Python float or a numpy scalar).",
        )
    elif not np.isfinite(reward):
        found.add(
            "reward-finite",
            "error",
            f"step() returned a non-finite reward ({reward}) at step {t}; rewards must be finite.",
        )


def _check_flag(value: Any, name: str, t: int, found: _Findings) -> bool:
    """`terminated` / `truncated` of step `t` is a bool; False if it cannot be read as one."""
    if isinstance(value, (bool, np.bool_)):
        return True
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        found.add(
            f"{name}-type",
            "warning",
            f"step() returned {name}={value!r} of type "
            f"{type(value).__name__}; gymnasium's API wants a bool: return bool(...).",
        )
        return True
    found.add(
        f"{name}-type",
        "error",
        f"step() returned {name}={_short(value)} of type "
        f"{type(value).__name__} at step {t}; it must be a bool.",
    )
    return False


def _check_info(info: Any, where: str, found: _Findings) -> None:
    if not isinstance(info, dict):
        found.add(
            f"info-{where}",
            "error",
            f"the gymnasium env's {where} returned info of type "
            f"{type(info).__name__}; info must be a dict (return {{}} if empty).",
        )


def _step_exception(env: gymnasium.Env, action: Any, t: int, e: Exception) -> str:
    """The message for an exception from step(): names a wrong number of returned values."""
    if isinstance(e, ValueError) and "values to unpack" in str(e):
        try:  # a gymnasium wrapper failed to unpack the result: ask the env itself
            return _step_arity_message(env.unwrapped.step(action))
        except Exception:
            pass
    return f"the gymnasium env's step() raised at step {t}: {_sentence(_describe(e))}"


def _step_arity_message(out: Any) -> str:
    got = f"{len(out)} values" if isinstance(out, tuple) else _short(out)
    message = (
        f"the gymnasium env's step() returned {got}; it must return 5: (observation, reward, "
        f"terminated, truncated, info)."
    )
    if isinstance(out, tuple) and len(out) == 4:
        message += (
            " A 4-tuple (obs, reward, done, info) is the old gym API: split done into terminated "
            "(the task ended) and truncated (a time limit cut the episode short)."
        )
    return message


def _max_episode_steps(env: gymnasium.Env) -> int:
    """The time limit `make_env` will use for `env` (its `resolve_gym_id` always sets one)."""
    if env.spec is not None and env.spec.max_episode_steps is not None:
        return int(env.spec.max_episode_steps)
    return time_limit_of(env) or 1000


# --- 2. the VecEnv ------------------------------------------------------------------------------
class _Trajectory(NamedTuple):
    """What a VecEnv returned: its first `states (N, S)` and, for reset() and each step, a
    fingerprint of every field of `FIELDS` (`(T + 1)` tuples; reset()'s has the states only)."""

    start: torch.Tensor
    fingerprints: list[tuple[int, ...]]


FIELDS = ("states", "rewards", "terminated", "truncated", "final_states")


def _fingerprint(x: torch.Tensor) -> int:
    """Equal for equal shapes, dtypes and values (NaN included: the same bits)."""
    return hash((tuple(x.shape), str(x.dtype), x.detach().cpu().contiguous().numpy().tobytes()))


def _check_vec_env(
    env_id: str,
    backend: str,
    num_envs: int,
    seed: int,
    steps: int | None,
    found: _Findings,
    env_kwargs: dict | None = None,
) -> None:
    """Check the `VecEnv` of `make_env`: types, time limit, auto-reset, seeding."""
    call = f"make_env('{env_id}', {num_envs}, 'cpu', '{backend}', seed={seed})"
    env = _make_vec(env_id, backend, num_envs, seed, call, found, env_kwargs)
    if env is None:
        return
    try:
        spec = env.spec
        if not _check_spec(spec, num_envs, found):
            return
        num_steps = default_steps(spec.max_step) if steps is None else steps
        actions = _random_actions(spec, num_envs, num_steps, seed)
        first = _vec_trajectory(env, seed, actions, found)
    finally:
        _close(env, found)
    if first is None:
        return

    env = _make_vec(env_id, backend, num_envs, seed, call, found, env_kwargs)
    if env is None:
        return
    try:
        second = _vec_trajectory(env, seed, actions, None)
        if second is None:
            raise RuntimeError("reset() or step() raised (see the message above, if any)")
        other_start = env.reset(seed=seed + num_envs)[0]
    except Exception as e:
        found.add(
            "vec-seeding-raised",
            "error",
            f"made again and replayed to check its seeding, the VecEnv raised "
            f"{_sentence(_describe(e))}",
        )
        return
    finally:
        _close(env, found)
    advice = _TORCH_SEEDING_ADVICE if is_torch_native(env_id, backend) else _SEEDING_ADVICE
    _compare_trajectories(first, second, seed, advice, found)
    start = first.start
    if _same_tensor(start, other_start):
        found.add(
            "vec-seed-ignored",
            "warning",
            f"reset(seed={seed}) and "
            f"reset(seed={seed + num_envs}) of the VecEnv return the same states: it may "
            f"ignore the seed (harmless if every episode starts from a fixed state).",
        )
    elif num_envs > 1 and bool((start == start[0]).all()):
        found.add(
            "vec-same-start",
            "warning",
            f"all {num_envs} sub-envs start from the same "
            f"state: they appear to be seeded identically, so they gather the same "
            f"experience; seed sub-env i with seed + i.",
        )


def _make_vec(
    env_id: str,
    backend: str,
    num_envs: int,
    seed: int,
    call: str,
    found: _Findings,
    env_kwargs: dict | None = None,
) -> VecEnv | None:
    try:
        return make_env(env_id, num_envs, "cpu", backend, seed, env_kwargs=env_kwargs)
    except Exception as e:
        found.add("vec-make", "error", f"{call} raised {_sentence(_describe(e))}")
        return None


def _check_spec(spec: Any, num_envs: int, found: _Findings) -> bool:
    """The VecEnv's `spec` is an `EnvSpec` that agents can be built from."""
    if not isinstance(spec, EnvSpec):
        found.add(
            "spec",
            "error",
            f"the VecEnv's spec is a {type(spec).__name__}, not an "
            f"EnvSpec (see xiaoyarl/envs/base.py).",
        )
        return False
    wrong = []
    if spec.num_envs != num_envs:
        wrong.append(f"num_envs is {spec.num_envs}, not {num_envs}")
    for field in ("state_dim", "action_dim", "max_step"):
        if not (isinstance(getattr(spec, field), int) and getattr(spec, field) >= 1):
            wrong.append(f"{field} is {getattr(spec, field)!r}, not a positive int")
    if math.prod(spec.obs_shape) != spec.state_dim:
        wrong.append(f"state_dim {spec.state_dim} is not the number of values of obs_shape "
                     f"{spec.obs_shape} ({math.prod(spec.obs_shape)})")  # fmt: skip
    if not spec.if_discrete:
        low, high = spec.action_low, spec.action_high
        if low is None or high is None or not (len(low) == len(high) == spec.action_dim):
            wrong.append(f"action_low/high must hold action_dim = {spec.action_dim} bounds each")
        elif not all(
            np.isfinite(lo) and np.isfinite(hi) and lo < hi
            for lo, hi in zip(low, high, strict=True)
        ):
            wrong.append(f"action bounds {low}..{high} must be finite with low < high")
    for w in wrong:
        found.add(f"spec:{w}", "error", f"the VecEnv's spec is wrong: {w}.")
    return not wrong


def _random_actions(spec: EnvSpec, num_envs: int, num_steps: int, seed: int) -> torch.Tensor:
    """Uniform random actions `(num_steps, num_envs[, action_dim])` in xiaoyarl's convention
    (hybrid: the discrete choices, then the continuous values)."""
    generator = torch.Generator().manual_seed(seed)
    if spec.action_nvec is not None:  # each component uniform among its own choices
        parts = [torch.randint(k, (num_steps, num_envs), generator=generator)
                 for k in spec.action_nvec]  # fmt: skip
        choices = torch.stack(parts, dim=-1)
        if spec.if_discrete:
            return choices
        shape = (num_steps, num_envs, spec.action_dim)  # hybrid: the continuous values after
        return torch.cat([choices.float(), torch.rand(shape, generator=generator) * 2.0 - 1.0], -1)
    if spec.if_discrete:
        return torch.randint(spec.action_dim, (num_steps, num_envs), generator=generator)
    shape = (num_steps, num_envs, spec.action_dim)
    return torch.rand(shape, generator=generator) * 2.0 - 1.0


def _vec_trajectory(
    env: VecEnv, seed: int, actions: torch.Tensor, found: _Findings | None
) -> _Trajectory | None:
    """Reset with `seed`, step through `actions`; check everything when `found` is given.

    Returns None when the env raised or returned data too malformed to go on with.
    """
    spec = env.spec
    n, s, max_step = spec.num_envs, spec.obs_shape, spec.max_step
    try:
        state, info = env.reset(seed=seed)
    except Exception as e:
        if found is not None:
            found.add(
                "vec-reset-raised",
                "error",
                f"the VecEnv's reset(seed={seed}) raised {_sentence(_describe(e))}",
            )
        return None
    if found is not None:
        if not _check_tensor(state, "the state from reset()", (n, *s), spec.obs_dtype, found):
            return None
        _check_vec_info_type(info, "reset()", found)
        _check_finite(state, "the state from reset()", found)

    start = state.clone()
    fingerprints: list[tuple[int, ...]] = [(_fingerprint(state),)]
    length = torch.zeros(n, dtype=torch.int64)
    episodes: list[tuple[int, bool, bool]] = []
    done_events = not_reset = 0
    for t, action in enumerate(actions, start=1):
        try:
            out = env.step(action)
        except Exception as e:
            if found is not None:
                found.add(
                    "vec-step-raised",
                    "error",
                    f"the VecEnv's step() raised at step {t}: {_sentence(_describe(e))}",
                )
            return None
        if found is not None and not _check_step_types(out, spec, t, found):
            return None
        state, reward, terminated, truncated, info = out
        final = info["final_state"]
        fingerprints.append(tuple(_fingerprint(x) for x in (state, reward, terminated,
                                                              truncated, final)))  # fmt: skip
        if found is None:
            continue

        length += 1
        done = terminated | truncated
        for tensor, what in ((state, "state"), (reward, "reward"), (final, "final_state")):
            _check_finite(tensor, f"the {what} from step() {t}", found)
        same = (final == state).flatten(1).all(1)  # (n,)
        _check_step_semantics(t, length, done, terminated, truncated, same, max_step, found)
        done_events += int(done.sum())
        not_reset += int((done & same).sum())
        for i in done.nonzero().flatten().tolist():
            episodes.append((int(length[i]), bool(terminated[i]), bool(truncated[i])))
        length[done] = 0

    if found is not None:
        if done_events and not_reset == done_events:
            found.add(
                "vec-no-reset",
                "error",
                f"after every one of the {done_events} episode ends, the state returned by "
                f"step() equals info['final_state']: the sub-env was not reset, or final_state "
                f"holds the new state. On a done step, state must be the first observation of "
                f"the next episode and final_state the last one of the episode that ended.",
            )
        _check_time_limit(episodes, max_step, "the VecEnv", found)
    return _Trajectory(start, fingerprints)


def _check_step_types(out: Any, spec: EnvSpec, t: int, found: _Findings) -> bool:
    """Types, dtypes, shapes and device of what the VecEnv's step() returned."""
    n, s = spec.num_envs, spec.obs_shape
    if not (isinstance(out, tuple) and len(out) == 5):
        found.add(
            "vec-step-api",
            "error",
            f"the VecEnv's step() returned {_short(out)}; it must "
            f"return (state, reward, terminated, truncated, info).",
        )
        return False
    state, reward, terminated, truncated, info = out
    ok = _check_tensor(state, "the state from step()", (n, *s), spec.obs_dtype, found)
    ok = _check_tensor(reward, "the reward from step()", (n,), torch.float32, found) and ok
    ok = _check_tensor(terminated, "terminated from step()", (n,), torch.bool, found) and ok
    ok = _check_tensor(truncated, "truncated from step()", (n,), torch.bool, found) and ok
    if not _check_vec_info_type(info, "step()", found):
        return False
    if "final_state" not in info:
        found.add(
            "vec-final-missing",
            "error",
            "the VecEnv's step() info has no 'final_state': "
            "it must hold the (num_envs, state_dim) observations reached in the step "
            "before any auto-reset, so agents can bootstrap through truncation.",
        )
        return False
    final = info["final_state"]
    ok = (
        _check_tensor(final, "info['final_state'] from step()", (n, *s), spec.obs_dtype, found)
        and ok
    )
    return ok


def _check_vec_info_type(info: Any, where: str, found: _Findings) -> bool:
    if isinstance(info, dict):
        return True
    found.add(
        f"vec-info-{where}",
        "error",
        f"the VecEnv's {where} returned info of type {type(info).__name__}; it must be a dict.",
    )
    return False


def _check_tensor(
    x: Any, what: str, shape: tuple[int, ...], dtype: torch.dtype, found: _Findings
) -> bool:
    """`x` is a torch tensor of `shape` and `dtype` on the CPU (the device asked for)."""
    if not isinstance(x, torch.Tensor):
        found.add(
            f"tensor-type:{what}",
            "error",
            f"{what} is a {type(x).__name__}, not a "
            f"torch.Tensor: VecEnvs return torch tensors (see xiaoyarl/envs/base.py).",
        )
        return False
    ok = True
    if tuple(x.shape) != shape:
        found.add(
            f"tensor-shape:{what}", "error", f"{what} has shape {tuple(x.shape)}, expected {shape}."
        )
        ok = False
    if x.dtype != dtype:
        found.add(f"tensor-dtype:{what}", "error", f"{what} has dtype {x.dtype}, expected {dtype}.")
        ok = False
    if x.device != torch.device("cpu"):
        found.add(
            f"tensor-device:{what}",
            "error",
            f"{what} is on {x.device}, but the env was "
            f"made for device 'cpu'; return tensors on the env's device.",
        )
        ok = False
    return ok


def _check_finite(x: torch.Tensor, what: str, found: _Findings) -> None:
    if x.is_floating_point() and not bool(torch.isfinite(x).all()):
        found.add(
            f"nonfinite:{what.split(' from ')[0]}",
            "error",
            f"{what} contains NaN or inf; the env's values must be finite.",
        )


def _check_step_semantics(
    t: int,
    length: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    same: torch.Tensor,
    max_step: int,
    found: _Findings,
) -> None:
    """Time limit and `final_state` of step `t`; all `(num_envs,)`, `length` counts this step.

    `same` marks the sub-envs whose returned state equals `info["final_state"]`.
    """
    i = _first(~done & (length >= max_step))
    if i is not None:
        found.add(
            "vec-trunc-missing",
            "error",
            f"sub-env {i} reached spec.max_step = {max_step} steps at step {t} with neither "
            f"terminated nor truncated set, so its episode ran past the time limit. Set "
            f"truncated=True exactly when an episode reaches max_step (or fix spec.max_step / "
            f"the registration's max_episode_steps).",
        )
    i = _first(truncated & ~terminated & (length < max_step))
    if i is not None:
        found.add(
            "vec-trunc-early",
            "warning",
            f"sub-env {i} reported truncated=True after {int(length[i])} steps (step {t}), "
            f"before spec.max_step = {max_step}. If the env has a shorter time limit, register "
            f"it with max_episode_steps = that limit so spec.max_step is true; if it truncates "
            f"for another reason (e.g. leaving the arena), this is harmless.",
        )
    i = _first(~done & ~same)
    if i is not None:
        found.add(
            "vec-final-mismatch",
            "error",
            f"where no episode ended, info['final_state'] must equal the returned state, but for "
            f"sub-env {i} at step {t} it differs; final_state is the observation reached in the "
            f"step before any auto-reset.",
        )


def _first(mask: torch.Tensor) -> int | None:
    """Index of the first True in a bool `(num_envs,)` mask, or None."""
    index = mask.nonzero()
    return int(index[0, 0]) if index.numel() else None


def _compare_trajectories(
    first: _Trajectory, second: _Trajectory, seed: int, advice: str, found: _Findings
) -> None:
    """Two runs with the same seed and actions must return identical data."""
    for t, (a, b) in enumerate(zip(first.fingerprints, second.fingerprints, strict=True)):
        differs = [name for name, x, y in zip(FIELDS, a, b, strict=False) if x != y]
        if differs:
            where = "the states from reset()" if t == 0 else f"step {t} ({', '.join(differs)})"
            found.add(
                "vec-seeding",
                "error",
                f"the VecEnv is not deterministic given its seed: two envs made with seed={seed} "
                f"and stepped with the same actions differ in {where}. {advice}.",
            )
            return


def _check_time_limit(
    episodes: list[tuple[int, bool, bool]], limit: int, who: str, found: _Findings
) -> None:
    """Flag a time limit reported as a termination: episodes at the limit all `terminated`."""
    at_limit = [e for e in episodes if e[0] == limit]
    if not at_limit or not all(terminated for _, terminated, _ in at_limit):
        return
    message = (
        f"{who}: every episode that reached the time limit ({limit} steps; {len(at_limit)} "
        f"episode(s)) ended with terminated=True. A time limit must be reported as truncated, "
        f"with terminated False: otherwise agents treat the cut-off state as terminal and do not "
        f"bootstrap from it. Return terminated=False there and let max_episode_steps truncate."
    )
    found.add(f"time-limit:{who}", "error" if len(at_limit) >= 2 else "warning", message)


# --- helpers ------------------------------------------------------------------------------------
def _same_tensor(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    """Equal values, shapes and dtypes (NaN equal to NaN, so NaN is reported only once)."""
    if a is None or b is None:
        return a is b
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return torch.equal(a, b)


def _same_array(a: Any, b: Any) -> bool:
    a, b = (x.item() if isinstance(x, np.ndarray) and x.dtype == object and x.ndim == 0 else x
            for x in (a, b))  # fmt: skip
    if isinstance(a, dict) or isinstance(b, dict):  # Dict observations: key by key
        same_keys = isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys()
        return same_keys and all(_same_array(a[k], b[k]) for k in a)
    if isinstance(a, tuple) or isinstance(b, tuple):  # Tuple observations: part by part
        same_parts = isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)
        return same_parts and all(_same_array(x, y) for x, y in zip(a, b, strict=True))
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if np.issubdtype(a.dtype, np.number) and np.issubdtype(b.dtype, np.number):
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(np.array_equal(a, b))


def _describe(e: BaseException) -> str:
    """`TypeName: message` of an exception (only the message of xiaoyarl's own clear errors)."""
    return str(e) if isinstance(e, XiaoyaError) else f"{type(e).__name__}: {e}"


def _sentence(text: str) -> str:
    """`text` ending with a full stop (added unless it ends with punctuation already)."""
    text = text.rstrip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _short(x: Any) -> str:
    """A short repr of a value for a message."""
    if isinstance(x, np.ndarray):
        return np.array2string(x, threshold=8, edgeitems=2, precision=4)
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


def _close(env: Any, found: _Findings) -> None:
    try:
        env.close()
    except Exception as e:
        found.add("close-raised", "warning", f"closing the env raised {_sentence(_describe(e))}")
