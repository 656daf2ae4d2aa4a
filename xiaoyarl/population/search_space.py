"""Hyper-parameter search spaces of a population: how members sample their Config fields, and
how evolution perturbs them.

A search space is a mapping of Config field -> distribution, written in YAML:

    learning_rate: {log_uniform: [1.0e-6, 1.0e-1]}
    lambda_entropy: {uniform: [0.0, 0.01]}
    gamma: {choice: [0.95, 0.98, 0.99]}
    horizon_len: 128            # fixed: every member gets this value

Explore (population-based training, Jaderberg et al. 2017): a numeric value is multiplied by
one of the perturbation factors (0.8 or 1.2) and kept within its bounds; an integer is rounded,
but moves at least one step in the factor's direction (1 -> 2 up, 2 -> 1 down), except at a
bound, where it stays; a choice moves to a neighbouring option; with `resample_probability` a
value is drawn afresh instead. Fields that fix the shape of the networks or buffers
(`STRUCTURAL`) are sampled once per member and copied with the weights, never perturbed.
"""

from __future__ import annotations

import math
import random
import typing
from dataclasses import dataclass
from pathlib import Path

import yaml

from xiaoyarl.config import Config
from xiaoyarl.config_io import field_types, set_field
from xiaoyarl.errors import ConfigError

KINDS = ("fixed", "choice", "uniform", "log_uniform")
# fields a member keeps for life: they shape its networks, buffers or envs
STRUCTURAL = {
    "algo", "env_id", "env_kwargs", "backend", "net_dims", "num_critics", "state_norm",
    "reward_norm", "num_envs", "buffer_size", "per", "h_term", "h_term_capacity", "runner",
    "num_workers", "device", "vector_mode",
}  # fmt: skip
# fields the population sets itself
RESERVED = {"seed", "cwd", "max_steps", "stop_at_target", "target_return"}


@dataclass(frozen=True)
class Param:
    """One field's distribution: `kind` in KINDS and its `args` (the value; the options; or the
    low and high bounds)."""

    field: str
    kind: str
    args: tuple

    @property
    def perturbable(self) -> bool:
        return self.kind != "fixed" and self.field not in STRUCTURAL

    def sample(self, rng: random.Random) -> object:
        if self.kind == "fixed":
            return self.args[0]
        if self.kind == "choice":
            return rng.choice(self.args)
        low, high = self.args
        if self.kind == "uniform":
            return self._typed(rng.uniform(low, high))
        return self._typed(math.exp(rng.uniform(math.log(low), math.log(high))))

    def perturb(self, value: object, rng: random.Random, factors: tuple[float, ...],
                resample_probability: float) -> object:  # fmt: skip
        """A neighbour of `value` (see the module's docstring)."""
        if not self.perturbable:
            return value
        if rng.random() < resample_probability:
            return self.sample(rng)
        if self.kind == "choice":
            options = list(self.args)
            i = options.index(value) if value in options else rng.randrange(len(options))
            return options[min(max(i + rng.choice((-1, 1)), 0), len(options) - 1)]
        low, high = self.args
        factor = rng.choice(factors)
        if not field_is_int(self.field):
            # a uniform or log-uniform field holds a number
            return float(min(max(typing.cast(float, value) * factor, low), high))
        value = typing.cast(int, value)  # an integer field holds an int
        # round(2 * 0.8) == 2: an integer moves at least one step in the factor's direction
        moved = round(value * factor)
        if factor > 1:
            moved = max(moved, value + 1)
        elif factor < 1:
            moved = min(moved, value - 1)
        return min(max(moved, math.ceil(low)), math.floor(high))  # at a bound it stays

    def _typed(self, value: float) -> object:
        return round(value) if field_is_int(self.field) else float(value)


def field_is_int(name: str) -> bool:
    """Whether Config field `name` takes integers (its sampled values are rounded)."""
    kind = field_types()[name]
    return kind is int or int in typing.get_args(kind)


class SearchSpace:
    """Config field -> `Param`, checked against `Config` (see the module's docstring)."""

    def __init__(self, spec: dict | None = None, source: str = "search space") -> None:
        spec = spec or {}
        if not isinstance(spec, dict):
            raise ConfigError(f"{source}: expected a mapping of config field: distribution.")
        self.source = source
        self.params = {name: self._parse(name, value) for name, value in spec.items()}
        self.spec = spec

    @classmethod
    def load(cls, path: str | Path) -> SearchSpace:
        path = Path(path)
        try:
            spec = yaml.safe_load(path.read_text())
        except OSError as e:
            raise ConfigError(f"cannot read search space {path}: {e.strerror}.") from None
        except yaml.YAMLError as e:
            raise ConfigError(f"search space {path} is not valid YAML: {e}") from None
        return cls(spec, source=str(path))

    def _parse(self, name: str, value: object) -> Param:
        where = f"{self.source}: {name}"
        if name in RESERVED:
            raise ConfigError(f"{where}: the population sets {name} itself; leave it out of "
                              f"the search space (set it on the command line).")  # fmt: skip
        if name not in Config.field_names():
            set_field(Config(), name, None, source=self.source)  # raises: unknown field, with hints
        if not isinstance(value, dict):
            param = Param(name, "fixed", (value,))
        elif len(value) != 1 or next(iter(value)) not in KINDS:
            raise ConfigError(
                f"{where}: expected a value, or one of {{choice: [..]}}, {{uniform: [low, "
                f"high]}}, {{log_uniform: [low, high]}}, {{fixed: value}}; got {value!r}."
            )
        else:
            kind, args = next(iter(value.items()))
            args = (args,) if kind == "fixed" else args
            if kind == "choice" and (not isinstance(args, list) or not args):
                raise ConfigError(f"{where}: choice needs a non-empty list of options.")
            if kind in ("uniform", "log_uniform"):
                ok = (
                    isinstance(args, list)
                    and len(args) == 2
                    and all(isinstance(a, int | float) for a in args)
                    and args[0] < args[1]
                )
                if not ok or (kind == "log_uniform" and args[0] <= 0):
                    raise ConfigError(
                        f"{where}: {kind} needs [low, high] with low < high"
                        f"{' and low > 0' if kind == 'log_uniform' else ''}; got {args!r}."
                    )
            param = Param(name, kind, tuple(args))
        for option in param.args if param.kind in ("fixed", "choice") else ():
            set_field(Config(), name, option, source=where)  # each value must fit the field's type
        return param

    def sample(self, rng: random.Random) -> dict:
        return {name: p.sample(rng) for name, p in self.params.items()}

    def perturb(self, values: dict, rng: random.Random, factors: tuple[float, ...],
                resample_probability: float) -> dict:  # fmt: skip
        return {name: self.params[name].perturb(values[name], rng, factors, resample_probability)
                if name in self.params else v for name, v in values.items()}  # fmt: skip

    def numeric_log_scale(self) -> dict[str, bool]:
        """The searched numeric fields (for plots), each with whether its scale is logarithmic."""
        return {n: p.kind == "log_uniform" for n, p in self.params.items()
                if p.kind in ("uniform", "log_uniform")}  # fmt: skip

    def structural(self) -> list[str]:
        return [n for n, p in self.params.items() if n in STRUCTURAL and p.kind != "fixed"]
