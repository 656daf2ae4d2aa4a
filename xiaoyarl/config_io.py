"""Reading, writing, converting and checking a `Config` (`xiaoyarl/config.py`, plain data).

Config files and `--set` values are YAML: `load_config` reads a file, `set_field` and
`apply_overrides` set fields from strings, each value converted to its field's type or refused
with a message naming the field, the value and the type. `validate_config` converts every field
the same way, then checks each field on its own (what depends on the algorithm is
`agents/settings.py`'s `check_config`). `agents/settings.py`'s
`config_from_saved` reads what a run saved, keeping the meaning of fields that changed since.

The conversion (`_convert`, about 60 lines over the fields' type hints) is our own rather than
pydantic's or attrs' validators, for three reasons: the six kinds a field can be (bool, int,
float, str, a list of ints, a mapping, each optional) need no more; the values come from YAML
and from `--set` text, whose rules a validation library does not know (YAML 1.1 reads `1e5` as
text, `--set net_dims=64,64` is a list, a folder named `yes` stays a string); and every refusal
is one line naming the source, the field, the value and the type, which the command line prints
as it is. A dependency with a compiled core (pydantic's) for this would add install weight to
every user for no check we lack.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import math
import numbers
import re
import types
import typing
from pathlib import Path

import numpy as np
import yaml

from xiaoyarl.config import Config, unknown_field_error
from xiaoyarl.errors import ConfigError
from xiaoyarl.presets import preset_path

_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Config)}


def config_from_dict(values: dict, source: str = "config") -> Config:
    """Build a Config from a mapping, converting and checking every value's type."""
    if not isinstance(values, dict):
        raise ConfigError(f"{source}: expected a mapping of field: value, got {values!r}.")
    config = Config()
    for name, value in values.items():
        set_field(config, name, value, source=source)
    return config


def config_from_preset(algo: str, env_id: str, env_kwargs: dict | None = None) -> Config:
    """A Config for `algo` on `env_id` (with `env_kwargs`) that starts from the preset of the
    pair's task (`xiaoyarl/presets.py`), or from the defaults when the pair has none."""
    path = preset_path(algo, env_id, env_kwargs)
    config = load_config(path) if path is not None else Config()
    config.algo, config.env_id = algo.lower(), env_id
    if env_kwargs is not None:
        config.env_kwargs = dict(env_kwargs)
    return config


def preset_differences(config: Config) -> tuple[Path, list[str]] | None:
    """The preset of `config`'s algorithm and task, and the fields it sets that `config` holds
    other values in (empty: the run follows it); None when the pair has no preset."""
    path = preset_path(config.algo, config.env_id, config.env_kwargs)
    if path is None:
        return None
    named = read_yaml(path)
    preset = config_from_dict(named, source=str(path))
    return path, [name for name in named if getattr(config, name) != getattr(preset, name)]


def load_config(path: str | Path) -> Config:
    """A config file (a preset, a user's file): the fields it names, defaults for the rest."""
    return config_from_dict(read_yaml(Path(path)), source=str(path))


def default_run_dir(config: Config) -> Path:
    """`runs/<env>_<algo>_<seed>`, the run folder when `cwd` is not given."""
    env = re.sub(r"[^A-Za-z0-9_.-]+", "_", config.env_id)
    return Path("runs") / f"{env}_{config.algo}_{config.seed}"


def save_config(config: Config, path: str | Path) -> None:
    """Write `config` to `path` as YAML, atomically (a temporary file, then renamed)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
    tmp.replace(path)


def set_field(config: Config, name: str, value: object, source: str = "--set") -> None:
    """Set field `name` from a Python value or a string (parsed as YAML), checking its type."""
    if name not in config.field_names():
        raise unknown_field_error(name, config.field_names(), source)
    setattr(config, name, _convert(name, value, field_types()[name], source))


def apply_overrides(config: Config, pairs: list[str]) -> None:
    """Apply `name=value` strings (from `--set`)."""
    for pair in pairs:
        if "=" not in pair or not pair.split("=", 1)[0].strip():
            raise ConfigError(
                f"--set expects name=value (for example --set gamma=0.98), got '{pair}'."
            )
        name, value = pair.split("=", 1)
        set_field(config, name.strip(), value.strip())


def validate_config(config: Config) -> Config:
    """Reject bad values with a message naming the field, the value and what is allowed.
    Every value is first converted to its field's type (or refused) as `--set` and YAML files
    do: an integer given as a whole float, a number given as text, a tuple for a list. Returns
    `config`."""
    _convert_fields(config, "invalid config")

    def bad(name: str, allowed: str) -> None:
        raise ConfigError(
            f"invalid config: {name}={getattr(config, name)!r}; {name} must be {allowed}."
        )

    if not config.algo or not isinstance(config.algo, str):
        bad("algo", "an algorithm name such as 'ppo' (see `xiaoyarl list`)")
    if not config.env_id or not isinstance(config.env_id, str):
        bad("env_id", "a built-in env name or a gymnasium id such as 'CartPole-v1'")
    for name, allowed in field_choices(type(config)).items():
        automatic = getattr(config, name) is None and _DEFAULTS[name] is None
        if getattr(config, name) not in allowed and not automatic:
            bad(name, f"one of {', '.join(map(str, allowed))}")
    if config.num_workers < 1:
        bad("num_workers", "a positive integer")
    if config.restart_workers < 0:
        bad("restart_workers", "a non-negative integer")
    if not (math.isfinite(config.worker_timeout) and config.worker_timeout > 0):
        bad("worker_timeout", "a positive number of seconds")
    if config.encoder not in ("auto", "mlp", "nature", "impala", "minatar") and not re.fullmatch(
        r"[\w.]+:\w+", str(config.encoder)
    ):
        bad("encoder", "auto, mlp, nature, impala, minatar, or your own class as 'module:Class'")
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?|mps", str(config.device)):
        bad("device", "auto, cpu, cuda or cuda:N")
    for name in ("num_envs", "threads", "horizon_len", "batch_size", "num_critics"):
        value = getattr(config, name)
        if value is not None and value < 1:
            bad(name, "a positive integer (or null for the automatic choice)")
    for name in ("eval_every", "explore_decay_steps"):
        if getattr(config, name) is not None and getattr(config, name) < 1:
            bad(name, "a positive integer (or null for the automatic choice)")
    for name in ("max_steps", "eval_episodes", "checkpoint_every",
                 "buffer_size", "target_update_every", "policy_delay", "redq_subset",
                 "per_beta_steps", "h_term_k", "h_term_start",
                 "h_term_capacity", "mixer_embed_dim", "hypernet_dim",
                 "recurrent_dim", "n_step", "sequence_len"):  # fmt: skip
        if getattr(config, name) < 1:
            bad(name, "a positive integer")
    if config.seed < 0:
        bad("seed", "a non-negative integer")
    for name in ("learning_starts", "burn_in"):
        if getattr(config, name) < 0:
            bad(name, "a non-negative integer")
    for name in ("soft_update_tau", "per_beta"):
        if not 0 < getattr(config, name) <= 1:
            bad(name, "in (0, 1]")
    for name in ("per_alpha", "explore_rate", "q_lambda", "td_lambda"):
        if not 0 <= getattr(config, name) <= 1:
            bad(name, "in [0, 1]")
    for name in ("explore_noise_std", "policy_noise_std", "policy_noise_clip", "alpha_init"):
        if not (math.isfinite(getattr(config, name)) and getattr(config, name) >= 0):
            bad(name, "a finite number >= 0")
    if config.alpha_init <= 0:
        bad("alpha_init", "a number > 0")
    high = config.explore_noise_std_max
    if high is not None and not (math.isfinite(high) and high >= config.explore_noise_std):
        bad("explore_noise_std_max", f"a finite number >= explore_noise_std "
            f"({config.explore_noise_std}), or null for one std for every sub-env")  # fmt: skip
    if config.critic_atoms == 1 or config.critic_atoms < 0:
        bad("critic_atoms", "0 (a value per critic) or at least 2 (C51 uses 51 atoms, FastTD3 101)")
    if config.critic_atoms and config.crossq:
        bad("crossq", "false with critic_atoms (CrossQ's critics give one value each)")
    if config.critic_atoms:
        for name in ("critic_v_min", "critic_v_max"):
            value = getattr(config, name)
            if value is None or not math.isfinite(value):
                bad(name, "a finite number with critic_atoms: the critics' atoms spread over "
                    "[critic_v_min, critic_v_max], which should hold every return the task "
                    "can give (e.g. -1700 and 0 for Pendulum-v1)")  # fmt: skip
        if config.critic_v_min >= config.critic_v_max:  # type: ignore[operator]
            bad("critic_v_max", f"greater than critic_v_min ({config.critic_v_min})")
    if not (math.isfinite(config.hypernet_init_gain) and config.hypernet_init_gain > 0):
        bad("hypernet_init_gain", "a finite number > 0, e.g. 0.001")
    if not (math.isfinite(config.huber_delta) and config.huber_delta > 0):
        bad("huber_delta", "a finite number > 0, e.g. 10.0")
    for name in ("h_term_gamma", "h_term_lambda"):
        if not (math.isfinite(getattr(config, name)) and getattr(config, name) >= 0):
            bad(name, "a finite number >= 0")
    if not 0 <= config.h_term_drop < 1:
        bad("h_term_drop", "in [0, 1)")
    if config.net_dims is not None and any(d < 1 for d in config.net_dims):
        bad("net_dims", "a list of positive layer widths, e.g. [64, 64] ([]: output layers on "
            "the inputs or an image encoder's features)")  # fmt: skip
    lr = config.learning_rate
    if lr is not None and not (math.isfinite(lr) and 0 < lr < 1):
        bad("learning_rate", "a number in (0, 1), e.g. 3e-4")
    if not 0 < config.gamma <= 1:
        bad("gamma", "in (0, 1]")
    if not 0 <= config.lambda_gae_adv <= 1:
        bad("lambda_gae_adv", "in [0, 1]")
    if not 0 < config.ratio_clip < 1:
        bad("ratio_clip", "in (0, 1)")
    for name in ("lambda_entropy",):
        if not (math.isfinite(getattr(config, name)) and getattr(config, name) >= 0):
            bad(name, "a finite number >= 0")
    if not (math.isfinite(config.clip_grad_norm) and config.clip_grad_norm > 0):
        bad("clip_grad_norm", "a finite number > 0")
    if not (math.isfinite(config.weight_decay) and config.weight_decay >= 0):
        bad("weight_decay", "a finite number >= 0 (0: Adam, no decay)")
    if not 0 <= config.schedule_end <= 1:
        bad("schedule_end", "in [0, 1] (the fraction of its start a scheduled value ends at)")
    if config.schedule_steps is not None and config.schedule_steps < 1:
        bad("schedule_steps", "a positive number of env steps (or null for max_steps)")
    for name in ("repeat_times", "replay_ratio"):
        value = getattr(config, name)
        if value is not None and not (math.isfinite(value) and 0 < value <= 1000):
            bad(name, "a number in (0, 1000]")
    if config.confirm_episodes < 0:
        bad("confirm_episodes", "a non-negative integer (0: no confirming evaluation)")
    if config.state_norm_clip is not None and not config.state_norm_clip > 0:
        bad("state_norm_clip", "a number > 0 (or null for no clamp)")
    if config.target_return is not None and not math.isfinite(config.target_return):
        bad("target_return", "a finite number (or null for the env's own target)")
    for name in ("tensorboard", "wandb"):  # refused before a run starts, not when it logs
        if getattr(config, name) and importlib.util.find_spec(name) is None:
            raise ConfigError(f"{name}=true needs the {name} package: "
                              f"pip install -e '.[{name}]' (or pip install {name}).")  # fmt: skip
    return config


def read_yaml(path: Path) -> dict:
    """The mapping a YAML file holds ({} for an empty one), or a ConfigError saying why not."""
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}.") from None
    try:
        return yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {path} is not valid YAML: {e}") from None


# --- value conversion for --set, YAML, config_from_dict and validate_config --------------------
# Help and choices are plain field metadata (`option`), not tyro or simple-parsing: either would
# take over the CLI and --set parsing.
def field_docs(cls: type[Config] = Config) -> dict[str, str]:
    """Each field's help text, as its `option` gives it."""
    return {f.name: f.metadata["help"] for f in dataclasses.fields(cls)}


def field_choices(cls: type[Config] = Config) -> dict[str, tuple]:
    """The values allowed, for each field that takes one of a fixed set."""
    return {f.name: f.metadata["choices"] for f in dataclasses.fields(cls)
            if f.metadata["choices"]}  # fmt: skip


@functools.cache
def field_types() -> dict[str, object]:
    """Each Config field's type hint, by name (the types `--set` values are converted to)."""
    return typing.get_type_hints(Config)


def _convert_fields(config: Config, source: str) -> None:
    """Convert every value to its field's type as `--set` and YAML files do (an integer given as
    a whole float, a number given as text, a tuple for a list); a value that does not fit raises
    a ConfigError naming the field, the value and the type."""
    for name, kind in field_types().items():
        setattr(config, name, _convert(name, getattr(config, name), kind, source))


def _convert(name: str, value: typing.Any, kind: object, source: str) -> object:
    """Convert `value` (a Python value, or a string parsed as YAML unless the field holds text)
    to the type of field `name`. `value` may be anything: where it does not convert, `int`,
    `float` or iterating it raise the TypeError or ValueError caught below."""
    is_union = typing.get_origin(kind) in (typing.Union, types.UnionType)
    args = typing.get_args(kind) if is_union else ()
    optional = type(None) in args
    base = next(a for a in args if a is not type(None)) if args else kind
    if isinstance(value, str) and base is not str:  # a folder named "yes" stays "yes"
        try:
            value = yaml.safe_load(value) if value.strip() else None
        except yaml.YAMLError:
            pass
    if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
        if optional:
            return None
        kind = _describe(base)
        article = "an" if kind[0] in "aeiou" else "a"
        raise ConfigError(f"{source}: {name} cannot be empty; it needs {article} {kind}.")
    try:
        if base is bool:
            if isinstance(value, bool | np.bool_):
                return bool(value)
            raise ValueError
        if base in (int, float) and isinstance(value, str):
            value = float(value.replace("_", ""))  # YAML 1.1 reads 1e5 as a string
        if base is int:
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, numbers.Integral):
                return int(value)
            if isinstance(value, numbers.Real) and float(value).is_integer():
                return int(typing.cast(typing.SupportsInt, value))  # int() takes any Real
            raise ValueError
        if base is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if base is str:
            return str(value)
        if base is dict:
            if isinstance(value, dict) and all(isinstance(k, str) for k in value):
                return value
            raise ValueError
        if typing.get_origin(base) is list:
            if isinstance(value, str):
                value = [v for v in re.split(r"[,\s]+", value.strip("[]() ")) if v]
            if isinstance(value, int | float):
                value = [value]
            items = [int(v) if float(v).is_integer() else None for v in value]
            if None in items:
                raise ValueError
            return items
    except (TypeError, ValueError):
        pass
    raise ConfigError(f"{source}: {name}={value!r} is not a valid {_describe(base)}.")


def _describe(kind: object) -> str:
    if typing.get_origin(kind) is list:
        return "list of integers such as [64, 64]"
    if kind is dict:
        return "mapping of names to values such as {market: synthetic, seed: 3}"
    names: dict[object, str] = {bool: "boolean (true/false)", int: "integer", float: "number",
                                str: "string"}  # fmt: skip
    return names.get(kind, str(kind))
