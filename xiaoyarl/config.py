"""`Config`: every hyper-parameter of a run, with its default, validation and YAML round trip.

Field names follow ElegantRL's vocabulary (`gamma`, `learning_rate`, `num_envs`, `horizon_len`,
`batch_size`, `repeat_times`, `net_dims`, `clip_grad_norm`, ...). A few fields default to
`None`, meaning "chosen from the algorithm and the env backend": each agent gives those values
(`AgentPPO.defaults`, ...) and `agents/settings.py` applies them (`resolve_config`), with the
checks that depend on the algorithm (`check_config`). `Config.validate` checks each field on its
own; the config knows no algorithm.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import math
import numbers
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from xiaoyarl.errors import ConfigError

BACKENDS = ("auto", "torch", "gymnasium", "envpool", "playground")


def option(default: typing.Any, help: str, choices: tuple | None = None) -> typing.Any:
    """A Config field: its default, its help text (`xiaoyarl list --fields`) and, for a field that
    takes one of a fixed set of values, those values (`Config.validate` allows no other)."""
    metadata = {"help": help, "choices": choices}
    if isinstance(default, list | dict):  # each Config gets its own copy
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


_T = typing.TypeVar("_T")


def _refuse_unknown_keywords(cls: type[_T]) -> type[_T]:
    """`Config(learningrate=...)` raises the ConfigError `--set` gives (the field's name and the
    closest ones), not the dataclass's TypeError."""
    init = cls.__init__

    @functools.wraps(init)
    def checked_init(self, *args: object, **kwargs: object) -> None:
        names = self.field_names()
        for name in kwargs:
            if name not in names:
                raise _unknown_field(name, names, type(self).__name__)
        init(self, *args, **kwargs)

    # replacing the dataclass's __init__ is what this decorator is for
    cls.__init__ = checked_init  # type: ignore[method-assign]
    return cls


@_refuse_unknown_keywords
@dataclass
class Config:
    """Every knob of a training run. Defaults work across tasks; none is tuned to one benchmark."""

    # --- what to train ---
    algo: str = option("ppo", "lower-case algorithm name, see `xiaoyarl list`")
    env_id: str = option("CartPole-v1", 'built-in torch env, gymnasium id, or "my_module:MyEnv-v0"')
    backend: str = option("auto", "env backend; auto: torch-native when one exists, playground: "
        "MuJoCo Playground's JAX tasks", BACKENDS)  # fmt: skip
    vector_mode: str = option("sync", "gymnasium backend: sub-envs in one process (sync) or one "
        "process each (async)", ("sync", "async"))  # fmt: skip
    env_kwargs: dict | None = option(None, "the env's keyword arguments (StockTrading-v0's market, "
        "gymnasium.make's kwargs) as a mapping: --set env_kwargs={market: synthetic}")  # fmt: skip
    num_envs: int | None = option(None, "sub-envs; None: automatic per algorithm and backend")
    seed: int = option(0, "derives every generator of the run (torch, envs, evaluation envs)")
    device: str = option("auto", "auto (cuda when available) | cpu | cuda | cuda:N")
    threads: int | None = option(None, "CPU threads per process; None: automatic (1, measured)")
    cuda_graph: bool = option(True, "on CUDA, replay each update (off-policy: gradient step) as "
        "a graph; ModSAC and updates whose choices repeat over 32+ steps stay eager")  # fmt: skip

    # --- runner ---
    runner: str = option("single", "one process (single) or worker / learner / evaluator "
        "processes (parallel)", ("single", "parallel"))  # fmt: skip
    num_workers: int = option(2, "parallel: worker processes, each stepping num_envs sub-envs")
    restart_workers: int = option(0, "parallel: crashed workers restarted before the run fails")
    worker_timeout: float = option(60.0, "parallel: seconds a rollout may take before a worker "
        "counts as hung")  # fmt: skip

    # --- budget, evaluation, checkpoints ---
    max_steps: int = option(2_000_000, "env steps (summed over sub-envs) before training stops")
    target_return: float | None = option(None, "the return that counts as solved; None: the env's")
    stop_at_target: bool = option(True, "stop once the target is reached (and confirmed); false: "
        "train the whole max_steps (`--target-return none` on the command line)")  # fmt: skip
    eval_every: int | None = option(None, "env steps between evals; None: 2k off-policy, "
        "on-policy 20k (or 8 rollouts where a rollout is larger)")  # fmt: skip
    eval_episodes: int = option(10, "episodes per evaluation, run as parallel sub-envs")
    confirm_episodes: int = option(50, "an evaluation at the target counts only if this many "
        "fresh episodes confirm it (0: no confirmation)")  # fmt: skip
    checkpoint_every: int = option(200_000, "env steps between full training-state checkpoints")
    cwd: str | None = option(None, "run folder; None: runs/<env>_<algo>_<seed>")
    tensorboard: bool = option(False, "also write TensorBoard events (`tensorboard` extra)")
    wandb: bool = option(False, "also log to W&B (`wandb` extra; WANDB_MODE=offline works)")
    wandb_project: str = option("xiaoyarl", "the W&B project runs are logged to")

    # --- networks and optimisation ---
    net_dims: list[int] | None = option(None, "hidden widths; None: [64, 64] on-policy and DQN "
        "family, [256, 256] other off-policy")  # fmt: skip
    learning_rate: float | None = option(None, "Adam's step size; None: automatic per algorithm")
    clip_grad_norm: float = option(0.5, "max global gradient norm per network")
    gamma: float = option(0.99, "discount factor")
    state_norm: bool | None = option(None, "running mean/std of observations; None: on-policy only")
    state_norm_clip: float | None = option(10.0, "+-bound on normalised observations; null: none")
    reward_norm: bool | None = option(None, "ppo, a2c: rewards / running std of return (None: on); "
        "vdn, qmix: standardised by running mean and std, as EPyMARL (None: off)")  # fmt: skip

    # --- rollout and update schedule ---
    horizon_len: int | None = option(None, "steps per sub-env per rollout; None: automatic")
    batch_size: int | None = option(None, "transitions per gradient step; None: automatic")
    repeat_times: float | None = option(None, "on-policy: epochs over each rollout; off-policy: "
        "gradient steps per env step (the update-to-data ratio). None: automatic")  # fmt: skip

    # --- on-policy (PPO / A2C) ---
    ratio_clip: float = option(0.2, "PPO clip range epsilon")
    lambda_gae_adv: float = option(0.95, "GAE lambda")
    lambda_entropy: float = option(0.0, "entropy bonus coefficient")

    # --- the critic of ppo, a2c, mappo (value normalisation and loss as MAPPO's paper code) ---
    value_norm: bool | None = option(None, "the critic learns returns standardised by their "
        "running mean and variance; None: mappo on, ppo and a2c off")  # fmt: skip
    value_clip: bool | None = option(None, "also clip the critic's output to +-ratio_clip "
        "around its output before the update, the larger loss taken; None: mappo only")  # fmt: skip
    value_loss: str | None = option(None, "critic loss: huber (squared within +-huber_delta, "
        "linear beyond) or mse; None: mappo huber, else mse", ("huber", "mse"))  # fmt: skip
    huber_delta: float = option(10.0, 'where the "huber" value loss turns linear')

    # --- off-policy (DQN family, DDPG, TD3, SAC, REDQ) ---
    buffer_size: int = option(1_000_000, "replay capacity in transitions (on the training device)")
    learning_starts: int = option(1_000, "env steps of uniformly random actions before learning")
    soft_update_tau: float = option(0.005, "target <- tau * online + (1 - tau) * target ...")
    target_update_every: int = option(1, "... every this many gradient steps (tau=1: hard update)")
    per: bool = option(False, "prioritized experience replay (proportional)")
    per_alpha: float = option(0.6, "how much prioritization is used (0: uniform)")
    per_beta: float = option(0.4, "initial importance-sampling exponent, annealed to 1 ...")
    per_beta_steps: int = option(100_000, "... linearly over this many env steps (fixed, so a "
        "resumed run with a larger max_steps anneals exactly as one run would)")  # fmt: skip
    explore_rate: float = option(0.05, "DQN: final epsilon of epsilon-greedy (starts at 1)")
    explore_decay_steps: int = option(10_000, "DQN: env steps over which epsilon decays linearly")
    explore_noise_std: float = option(0.1, "DDPG / TD3: Gaussian exploration noise (actions: +-1)")
    policy_noise_std: float = option(0.2, "TD3: target policy smoothing noise ...")
    policy_noise_clip: float = option(0.5, "... clipped to +-this")
    policy_delay: int = option(2, "TD3: critic updates per actor update")
    alpha_init: float = option(1.0, "SAC: initial entropy temperature (learned)")
    num_critics: int | None = option(None, "critics; None: 1 DDPG/MADDPG, 2 TD3/SAC/MATD3, 10 REDQ")
    redq_subset: int = option(2, "REDQ: M critics in the target's minimum")
    target_q_reduce: str = option("min", "DDPG / TD3 / SAC: the target critics' values combined "
        "by their min (the papers' clipped double Q) or their mean (an averaged ensemble; raise "
        "num_critics for more members)", ("min", "mean"))  # fmt: skip

    # --- value decomposition (vdn, qmix; agents/multi/value_decomposition.py) ---
    agent_rnn: bool = option(False, "VDN / QMIX: recurrent agent networks (a GRU cell of width "
        "net_dims[-1], as the QMIX paper's agents) for partial observability; each gradient step "
        "then replays batch_size // max_step whole episodes, not single transitions")  # fmt: skip
    mixer_embed_dim: int = option(32, "QMIX: width of the mixing network's hidden layer")
    hypernet_layers: int = option(2, "QMIX: layers of the hypernetworks (state -> mixing weights); "
        "2: with a ReLU between, as PyMARL; 1: linear, as the paper", (1, 2))  # fmt: skip
    hypernet_dim: int = option(64, "QMIX: width of that ReLU layer (hypernet_layers: 2)")
    # Small, as JaxMARL's QMIX settings (0.001 on every task): the mixer starts near Q_tot = 0, so
    # the team value is first carried by V(s) and the mixing weights grow only as far as the data
    # asks; with the usual gains (~1) the weights that multiply every agent's Q-value errors start
    # large and Q_tot drifted upwards on the navigation task (BENCHMARKS.md).
    hypernet_init_gain: float = option(0.001, "QMIX: gain of the orthogonal init of every "
        "hypernetwork layer; small, so the mixer starts near Q_tot = 0")  # fmt: skip

    # --- the H-term stability add-on (ppo, a2c, ddpg, td3, sac, modsac, redq; agents/hterm.py) ---
    h_term: bool = option(False, "add the H-term to the actor's objective")
    h_term_k: int = option(4, "K: consecutive steps per trajectory window")
    h_term_gamma: float = option(0.8, "gamma_h: discount over a window's steps")
    h_term_lambda: float = option(0.125, "lambda_h: weight of the H-term in the actor's loss")
    h_term_drop: float = option(0.125, "fraction of stored trajectories, lowest returns, left out")
    h_term_start: int = option(4096, "kept states needed before the H-term starts")
    h_term_capacity: int = option(65_536, "states of the most recent whole trajectories stored")

    def __post_init__(self) -> None:
        self._convert_fields(type(self).__name__)

    def _convert_fields(self, source: str) -> None:
        """Convert every value to its field's type as `--set` and YAML files do (an integer
        given as a whole float, a number given as text, a tuple for a list); a value that does
        not fit raises a ConfigError naming the field, the value and the type."""
        for name, kind in field_types().items():
            setattr(self, name, _convert(name, getattr(self, name), kind, source))

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    # Help and choices are plain field metadata (`option`), not tyro or simple-parsing: either would
    # take over the CLI and --set parsing.
    @classmethod
    def field_docs(cls) -> dict[str, str]:
        """Each field's help text, as its `option` gives it."""
        return {f.name: f.metadata["help"] for f in dataclasses.fields(cls)}

    @classmethod
    def field_choices(cls) -> dict[str, tuple]:
        """The values allowed, for each field that takes one of a fixed set."""
        return {f.name: f.metadata["choices"] for f in dataclasses.fields(cls)
                if f.metadata["choices"]}  # fmt: skip

    @classmethod
    def from_dict(cls, values: dict, source: str = "config") -> Config:
        """Build a Config from a mapping, converting and checking every value's type."""
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: expected a mapping of field: value, got {values!r}.")
        config = cls()
        for name, value in values.items():
            config.set(name, value, source=source)
        return config

    @classmethod
    def from_saved(cls, values: dict, source: str = "config") -> Config:
        """The config a run was trained with, from what it saved (its config.yaml or its
        checkpoint's config): fields whose meaning changed since it was written take the values
        that reproduce that run (`saved_run_values`), not today's defaults."""
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: expected a mapping of field: value, got {values!r}.")
        return cls.from_dict({**values, **saved_run_values(values)}, source=source)

    @classmethod
    def load_saved(cls, path: str | Path) -> Config:
        """`from_saved` of a run's config.yaml."""
        return cls.from_saved(_read_yaml(Path(path)), source=str(path))

    @classmethod
    def from_preset(cls, algo: str, env_id: str) -> Config:
        """A Config for `algo` on `env_id` that starts from the pair's task preset
        (`xiaoyarl/presets.py`), or from the defaults when the pair has none."""
        from xiaoyarl.presets import preset_path

        path = preset_path(algo, env_id)
        config = cls.load(path) if path is not None else cls()
        config.algo, config.env_id = algo.lower(), env_id
        return config

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def load(cls, path: str | Path) -> Config:
        """A config file (a preset, a user's file): the fields it names, defaults for the rest."""
        return cls.from_dict(_read_yaml(Path(path)), source=str(path))

    def save(self, path: str | Path) -> None:
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))
        tmp.replace(path)

    def set(self, name: str, value: object, source: str = "--set") -> None:
        """Set field `name` from a Python value or a string (parsed as YAML), checking its type."""
        if name not in self.field_names():
            raise _unknown_field(name, self.field_names(), source)
        setattr(self, name, _convert(name, value, field_types()[name], source))

    def apply_overrides(self, pairs: list[str]) -> None:
        """Apply `name=value` strings (from `--set`)."""
        for pair in pairs:
            if "=" not in pair or not pair.split("=", 1)[0].strip():
                raise ConfigError(
                    f"--set expects name=value (for example --set gamma=0.98), got '{pair}'."
                )
            name, value = pair.split("=", 1)
            self.set(name.strip(), value.strip())

    def validate(self) -> Config:
        """Reject bad values with a message naming the field, the value and what is allowed.
        Values assigned after construction are first converted to their field's type (or
        refused) as in `Config(...)`."""
        self._convert_fields("invalid config")

        def bad(name: str, allowed: str) -> None:
            raise ConfigError(
                f"invalid config: {name}={getattr(self, name)!r}; {name} must be {allowed}."
            )

        if not self.algo or not isinstance(self.algo, str):
            bad("algo", "an algorithm name such as 'ppo' (see `xiaoyarl list`)")
        if not self.env_id or not isinstance(self.env_id, str):
            bad("env_id", "a built-in env name or a gymnasium id such as 'CartPole-v1'")
        for name, allowed in self.field_choices().items():
            automatic = getattr(self, name) is None and _DEFAULTS[name] is None
            if getattr(self, name) not in allowed and not automatic:
                bad(name, f"one of {', '.join(map(str, allowed))}")
        if self.num_workers < 1:
            bad("num_workers", "a positive integer")
        if self.restart_workers < 0:
            bad("restart_workers", "a non-negative integer")
        if not (math.isfinite(self.worker_timeout) and self.worker_timeout > 0):
            bad("worker_timeout", "a positive number of seconds")
        if not re.fullmatch(r"auto|cpu|cuda(:\d+)?|mps", str(self.device)):
            bad("device", "auto, cpu, cuda or cuda:N")
        for name in ("num_envs", "threads", "horizon_len", "batch_size", "num_critics"):
            value = getattr(self, name)
            if value is not None and value < 1:
                bad(name, "a positive integer (or null for the automatic choice)")
        if self.eval_every is not None and self.eval_every < 1:
            bad("eval_every", "a positive integer (or null for the automatic choice)")
        for name in ("max_steps", "eval_episodes", "checkpoint_every",
                     "buffer_size", "target_update_every", "policy_delay", "redq_subset",
                     "explore_decay_steps", "per_beta_steps", "h_term_k", "h_term_start",
                     "h_term_capacity", "mixer_embed_dim", "hypernet_dim"):  # fmt: skip
            if getattr(self, name) < 1:
                bad(name, "a positive integer")
        if self.seed < 0:
            bad("seed", "a non-negative integer")
        if self.learning_starts < 0:
            bad("learning_starts", "a non-negative integer")
        for name in ("soft_update_tau", "per_beta"):
            if not 0 < getattr(self, name) <= 1:
                bad(name, "in (0, 1]")
        for name in ("per_alpha", "explore_rate"):
            if not 0 <= getattr(self, name) <= 1:
                bad(name, "in [0, 1]")
        for name in ("explore_noise_std", "policy_noise_std", "policy_noise_clip", "alpha_init"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                bad(name, "a finite number >= 0")
        if self.alpha_init <= 0:
            bad("alpha_init", "a number > 0")
        if self.agent_rnn and self.per:
            bad("per", "false with agent_rnn (recurrent agents replay whole episodes, uniformly)")
        if not (math.isfinite(self.hypernet_init_gain) and self.hypernet_init_gain > 0):
            bad("hypernet_init_gain", "a finite number > 0, e.g. 0.001")
        if not (math.isfinite(self.huber_delta) and self.huber_delta > 0):
            bad("huber_delta", "a finite number > 0, e.g. 10.0")
        for name in ("h_term_gamma", "h_term_lambda"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                bad(name, "a finite number >= 0")
        if not 0 <= self.h_term_drop < 1:
            bad("h_term_drop", "in [0, 1)")
        if self.net_dims is not None and (not self.net_dims or any(d < 1 for d in self.net_dims)):
            bad("net_dims", "a non-empty list of positive layer widths, e.g. [64, 64]")
        lr = self.learning_rate
        if lr is not None and not (math.isfinite(lr) and 0 < lr < 1):
            bad("learning_rate", "a number in (0, 1), e.g. 3e-4")
        if not 0 < self.gamma <= 1:
            bad("gamma", "in (0, 1]")
        if not 0 <= self.lambda_gae_adv <= 1:
            bad("lambda_gae_adv", "in [0, 1]")
        if not 0 < self.ratio_clip < 1:
            bad("ratio_clip", "in (0, 1)")
        for name in ("lambda_entropy",):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                bad(name, "a finite number >= 0")
        if not (math.isfinite(self.clip_grad_norm) and self.clip_grad_norm > 0):
            bad("clip_grad_norm", "a finite number > 0")
        if self.repeat_times is not None and not (0 < self.repeat_times <= 1000):
            bad("repeat_times", "a number in (0, 1000]")
        if self.confirm_episodes < 0:
            bad("confirm_episodes", "a non-negative integer (0: no confirming evaluation)")
        if self.state_norm_clip is not None and not self.state_norm_clip > 0:
            bad("state_norm_clip", "a number > 0 (or null for no clamp)")
        if self.target_return is not None and not math.isfinite(self.target_return):
            bad("target_return", "a finite number (or null for the env's own target)")
        return self


def saved_run_values(saved: dict) -> dict:
    """The values that reproduce what a run computed, for fields of its saved config that mean
    something else today: fields added later with new behaviour as their default (MAPPO's
    clipped Huber value loss came on 2026-11-25; earlier runs used the squared error), and
    `value_clip` and `value_loss`, which until 2026-11-26 were MAPPO's own (on and huber by
    default, read by no other algorithm) and since then are automatic per algorithm (with
    `value_norm`). They replace the saved values."""
    if "value_norm" in saved:  # written after that change
        return {}
    algo = saved.get("algo")
    if algo == "mappo":
        if "value_clip" not in saved:
            return {"value_norm": True, "value_clip": False, "value_loss": "mse"}
        return {"value_norm": True}
    if algo in ("ppo", "a2c"):
        return {"value_norm": False, "value_clip": False, "value_loss": "mse"}
    return {"value_clip": None, "value_loss": None}


_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Config)}


def _read_yaml(path: Path) -> dict:
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}.") from None
    try:
        return yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {path} is not valid YAML: {e}") from None


# --- value conversion for --set, YAML and from_dict ---------------------------------------------
def _unknown_field(name: str, names: list[str], source: str) -> ConfigError:
    close = difflib.get_close_matches(name, names, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return ConfigError(
        f"{source}: unknown config field '{name}'.{hint} "
        f"Run `xiaoyarl list --fields` to see every field."
    )


@functools.cache
def field_types() -> dict[str, object]:
    return typing.get_type_hints(Config)


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
        raise ConfigError(f"{source}: {name} cannot be empty; it needs a {_describe(base)}.")
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
