"""The settings a run trains with, resolved once at its start (`resolve_run`): each algorithm's
checks and automatic defaults on top of the field-by-field checks of `validate_config`, the
device, the backend and the threads. The defaults themselves belong to the agents
(`AgentPPO.defaults`, `AgentA2C.defaults`, `AgentDQN.defaults`, `AgentActorCritic.defaults`); this
module finds the agent of `config.algo` and applies them, so that the config knows no
algorithm."""

from __future__ import annotations

import dataclasses
import difflib
import math
from pathlib import Path

import torch

from xiaoyarl.agents import ALGORITHMS
from xiaoyarl.agents.actor_critic import AgentActorCritic
from xiaoyarl.agents.base import AgentBase
from xiaoyarl.agents.hterm import FIELDS as H_TERM_FIELDS
from xiaoyarl.config import REPLACED_FIELDS, Config
from xiaoyarl.config_io import (
    apply_overrides,
    config_from_dict,
    default_run_dir,
    load_config,
    read_yaml,
    set_field,
    validate_config,
)
from xiaoyarl.envs import is_batched, is_torch_native
from xiaoyarl.envs.multi import MULTI_AGENT_ENVS, is_multi_agent
from xiaoyarl.errors import ConfigError


def agent_of(config: Config) -> type[AgentBase]:
    """The agent class of `config.algo` (its continuous-action one where it has both: both
    read the same settings); a `ConfigError` with the closest names for an unknown algorithm."""
    if config.algo not in ALGORITHMS:
        name = str(config.algo)
        close = [name.lower()] if name.lower() in ALGORITHMS else difflib.get_close_matches(
            name.lower(), list(ALGORITHMS), n=1)  # fmt: skip
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ConfigError(
            f"unknown algorithm '{config.algo}'{hint}; choose one of: "
            f"{', '.join(sorted(ALGORITHMS))}."
        )
    return agent_of_name(config.algo)


def agent_of_name(algo: str) -> type[AgentBase]:
    """The agent class of the registered algorithm `algo` (its continuous-action one where it
    has both: both read the same settings and declare the same)."""
    continuous, discrete = ALGORITHMS[algo]
    agent = continuous or discrete
    assert agent is not None, "every algorithm has an agent for one kind of action at least"
    return agent


def check_config(config: Config) -> Config:
    """`validate_config(config)`, then what depends on the algorithm (what its agent class
    declares, and its own `check`): a message naming the field, the value and what is allowed.
    Returns `config`."""
    return _check_algorithm(validate_config(config))


def _check_algorithm(config: Config) -> Config:
    """`check_config`'s checks that depend on the algorithm, of a config whose fields are each
    valid."""
    agent = agent_of(config)
    if config.h_term and not agent.takes_h_term:
        takes = sorted(name for name in ALGORITHMS if agent_of_name(name).takes_h_term)
        raise ConfigError(
            f"invalid config: h_term=True does not apply to {config.algo}: the H-term adds to "
            f"the objective of a policy network's log-probabilities; it is available for "
            f"{', '.join(takes)}. Remove the setting."
        )
    noises = agent.explore_noises if issubclass(agent, AgentActorCritic) else ("gaussian",)
    if config.explore_noise not in noises:
        raise ConfigError(
            f"invalid config: explore_noise={config.explore_noise!r} does not apply to "
            f"{config.algo}, which explores with {' or '.join(noises)} (gsde: a squashed "
            f"Gaussian policy's; ou: a deterministic actor's); choose one of those or remove "
            f"the setting."
        )
    agent.check(config)
    if config.recurrent and config.h_term:
        raise ConfigError(
            f"invalid config: recurrent={config.recurrent!r} trains without the H-term for now; "
            f"remove h_term."
        )
    if config.reward_norm and agent.if_off_policy and "reward_norm" not in agent.config_fields:
        raise ConfigError(
            f"invalid config: reward_norm=True does not apply to {config.algo}: reward "
            f"normalisation is part of the on-policy agents (ppo, a2c). Remove the setting."
        )
    if agent.if_off_policy and config.repeat_times is not None:
        raise ConfigError(
            f"invalid config: repeat_times={config.repeat_times:g} is the epochs over each "
            f"rollout of the on-policy agents; {config.algo} learns from a replay buffer, and its "
            f"gradient steps per env step are replay_ratio: write replay_ratio="
            f"{config.repeat_times:g} instead (runs saved before the split resume as they are)."
        )
    if (agent.if_off_policy and config.num_envs and config.horizon_len and config.replay_ratio
            and 0 < config.replay_ratio * config.num_envs * config.horizon_len < 1):  # fmt: skip
        per_rollout = config.replay_ratio * config.num_envs * config.horizon_len
        raise ConfigError(
            f"invalid config: replay_ratio={config.replay_ratio} gradient steps per env step "
            f"make {per_rollout:g} per rollout of num_envs * horizon_len = {config.num_envs} * "
            f"{config.horizon_len} steps, and a rollout takes at least one; raise horizon_len to "
            f"{math.ceil(1 / (config.replay_ratio * config.num_envs) - 1e-9)} (or leave it "
            f"automatic) for the ratio asked."
        )
    if (not agent.if_off_policy and config.num_envs is not None
            and config.horizon_len is not None and config.batch_size is not None):  # fmt: skip
        rollout = config.num_envs * config.horizon_len
        if config.batch_size > rollout:
            raise ConfigError(
                f"invalid config: batch_size={config.batch_size} is larger than one rollout "
                f"(num_envs * horizon_len = {config.num_envs} * {config.horizon_len} = "
                f"{rollout}); lower batch_size or raise horizon_len / num_envs."
            )
    return config


def resolve_config(config: Config, batched: bool, device_type: str = "cpu") -> Config:
    """A copy of `config` with every `None` default filled in by its algorithm's agent for this
    backend and device type ("cpu" or "cuda"), checked. `batched`: the env steps its sub-envs
    as one tensor program (torch-native, or MuJoCo Playground's JAX), so it gets the batched
    defaults."""
    resolved = _check_algorithm(_filled(validate_config(config), batched, device_type))
    return _env_needs(config, resolved)


def _filled(config: Config, batched: bool, device_type: str) -> Config:
    """`resolve_config`'s copy before its check: each field's own check comes first (the
    defaults are computed from the fields), what depends on the algorithm is checked once, on
    the values the run trains with, and what an adapted env needs comes last (`_env_needs`)."""
    agent = agent_of(config)
    resolved = dataclasses.replace(config)
    for name, value in agent.defaults(resolved, batched, device_type).items():
        if getattr(resolved, name) is None:
            setattr(resolved, name, value)
    if agent.if_off_policy and config.horizon_len is None:
        # an automatic horizon long enough for one gradient step per rollout, so that a ratio
        # below one step per rollout (e.g. 0.25 with one sub-env) is taken as asked
        assert resolved.replay_ratio is not None and resolved.num_envs is not None
        per_step = resolved.replay_ratio * resolved.num_envs
        if 0 < per_step and per_step * resolved.horizon_len < 1:  # type: ignore[operator]
            resolved.horizon_len = math.ceil(1 / per_step - 1e-9)
    return resolved


def _env_needs(config: Config, resolved: Config) -> Config:
    """`resolved` (of `config`) with the least values an adapted (not torch-native) env needs of
    the settings `config` left automatic, e.g. an Atari game's evaluation cadence."""
    if not is_torch_native(config.env_id, config.backend):
        from xiaoyarl.envs.gym import least_settings

        for name, least in least_settings(config.env_id, config.env_kwargs).items():
            if getattr(config, name) is None:
                setattr(resolved, name, max(getattr(resolved, name), least))
    return resolved


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """What a run trains with, resolved once at its start by `resolve_run`: the config with
    nothing automatic left, and the machine's side of it."""

    config: Config
    device: torch.device
    backend: str  # "torch", "gymnasium", "envpool", "playground" or "pettingzoo"
    threads: int  # torch's CPU threads
    run_dir: Path  # where the run writes: `cwd`, or `default_run_dir`
    ignored: list[str]  # fields set away from their default that the algorithm never reads
    follow_budget: list[str]  # automatic fields a resumed run takes from its checkpoint


def resolve_run(config: Config, ranks: tuple[int, int, int] | None = None) -> RunSettings:
    """The settings of a run of `config` (checked: a `ConfigError` names what is wrong before
    anything is built). `ranks`: (rank, world size, local rank) of one of several learners."""
    validate_config(config)
    run_dir = Path(config.cwd) if config.cwd else default_run_dir(config)
    multi_agent = is_multi_agent(config.env_id)
    torch_native = is_torch_native(config.env_id, config.backend) or (
        config.env_id in MULTI_AGENT_ENVS
    )
    device = resolve_device(config.device)
    if ranks is not None:
        if config.runner == "parallel":
            raise ConfigError(
                "several learners (torchrun, --learners) and runner=parallel cannot be combined: "
                "each learner rank steps its own envs; use runner=single."
            )
        if device.type == "cuda":
            device = torch.device("cuda", ranks[2])  # one GPU per rank of this machine
    batched = torch_native or is_batched(config.env_id, config.backend)
    resolved = _check_algorithm(_filled(config, batched, device.type))
    # of what was asked: the threads, the settings it ignores, those a resume takes from its
    # checkpoint
    threads, ignored = choose_threads(config.threads), ignored_fields(config)
    follow_budget = budget_fields(config)
    backend = "torch" if torch_native else "gymnasium"
    if config.backend in ("envpool", "torch", "playground"):
        backend = config.backend  # make_env refuses a torch backend without a torch-native env
    if multi_agent and not torch_native:
        backend = "pettingzoo"
    resolved = _env_needs(config, resolved)
    if backend == "gymnasium":  # an Atari game's preprocessing, written in its config.yaml
        from xiaoyarl.envs.gym import atari_env_kwargs

        resolved.env_kwargs = atari_env_kwargs(config.env_id, config.env_kwargs)
    return RunSettings(resolved, device, backend, threads, run_dir, ignored, follow_budget)


def resolve_device(name: str) -> torch.device:
    """The run's one device: `auto` is cuda when available, else cpu."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"device '{name}' was requested but CUDA is not available to this torch "
            f"({torch.__version__}); use --device cpu (or auto)."
        )
    if device.type == "cuda" and device.index is not None:
        if device.index >= torch.cuda.device_count():
            raise ConfigError(
                f"device '{name}' does not exist: {torch.cuda.device_count()} GPU(s) visible."
            )
    return device


def choose_threads(threads: int | None) -> int:
    """Torch's CPU threads for this process: `threads`, or 1 when None (automatic).

    One thread is the fastest choice measured for every workload tried on a 2-core machine,
    alone and beside other processes (see BENCHMARKS.md, "CPU threads"): the networks of RL
    are small, so a second thread mostly spins, and beside another busy process torch's
    default of one thread per core makes training several times slower."""
    return threads if threads else 1


def budget_fields(config: Config) -> list[str]:
    """The fields left automatic whose value the agent derives from the budget, `max_steps`
    (PQN's epsilon decay, a tenth of it): a resumed run keeps its own, so that a larger budget
    given on resume trains on rather than stretching a schedule already under way. Read from
    the agent's `defaults`, which give them."""
    agent = agent_of(config)
    values = [agent.defaults(dataclasses.replace(config, max_steps=steps), False, "cpu")
              for steps in (1_000_000, 2_000_000)]  # fmt: skip
    return [name for name, value in values[0].items()
            if getattr(config, name) is None and values[1].get(name) != value]  # fmt: skip


def ignored_fields(config: Config) -> list[str]:
    """Fields set away from their default that `config.algo` (or its runner) never reads, e.g.
    `per` for PPO: each agent class lists the algorithm-specific fields it reads. A value its
    agent gives itself is no setting (a resumed run's saved config holds its resolved values,
    such as an off-policy agent's `reward_norm: false`)."""
    specific = set().union(*(fields_read(algo) for algo in ALGORITHMS))
    read = fields_read(config.algo)
    if config.runner != "parallel":
        specific |= {"num_workers", "restart_workers", "worker_timeout"}
    default = Config()
    own = agent_of(config).defaults(default, False, "cpu")
    unset = {name: (getattr(default, name), own.get(name, getattr(default, name)))
             for name in specific - read}  # fmt: skip
    return sorted(name for name, values in unset.items() if getattr(config, name) not in values)


def fields_read(algo: str) -> frozenset[str]:
    """The algorithm-specific Config fields `algo` reads: its agents' own (with the schedule of
    each that has one), and the H-term's where the H-term applies."""
    fields = frozenset().union(*(c.config_fields for c in ALGORITHMS[algo] if c is not None))
    fields |= {f"{name}_schedule" for name in fields if f"{name}_schedule" in Config.field_names()}
    return fields | H_TERM_FIELDS if agent_of_name(algo).takes_h_term else fields


def config_from_saved(values: dict, source: str = "config") -> Config:
    """The config a run was trained with, from what it saved (its config.yaml or its
    checkpoint's config): fields whose meaning changed since it was written take the values
    that reproduce that run (`saved_run_values`), not today's defaults."""
    if not isinstance(values, dict):
        raise ConfigError(f"{source}: expected a mapping of field: value, got {values!r}.")
    merged = {**values, **saved_run_values(values)}
    return config_from_dict({k: v for k, v in merged.items() if k not in REPLACED_FIELDS}, source)


def command_config(source: str | Path | None, given: dict, pairs: list[str],
                   saved: bool = False) -> Config:  # fmt: skip
    """A command's config: the config file `source` (a run's own config.yaml where `saved`, read
    as `load_saved_config` does; the defaults where None), then `given` (an option's value per
    field, each named as its option in an error) and the `--set` name=value `pairs`."""
    config = Config()
    if source is not None:
        config = load_saved_config(source) if saved else load_config(source)
    for name, value in given.items():
        set_field(config, name, value, source=f"--{name.replace('_', '-')}")
    apply_overrides(config, pairs)
    return config


def load_saved_config(path: str | Path) -> Config:
    """`config_from_saved` of a run's config.yaml."""
    return config_from_saved(read_yaml(Path(path)), source=str(path))


def saved_run_values(saved: dict) -> dict:
    """The values that reproduce what a run that saved the config `saved` computed, for fields
    that mean something else today; they replace the saved values.
    - Until 2026-11-29 (`replay_ratio` is written since) an off-policy agent's gradient steps
      per env step were its `repeat_times`.
    - Until 2026-11-29 (`agent_rnn` is no longer written) VDN's and QMIX's recurrent agents were
      `agent_rnn: true`, a GRU as wide as the last of `net_dims`; `recurrent_dim` was written
      for every run, read by recurrent PPO and A2C only.
    - Until 2026-11-26 (`value_norm` is written since) the value settings were MAPPO's own
      (normalised, and since 2026-11-25 clipped with the Huber loss, `value_clip` written),
      other agents that read them today (PPO, A2C) trained with the squared error on raw
      returns, and agents that do not read them have them automatic."""
    algo = saved.get("algo")
    if algo not in ALGORITHMS:
        return {}
    agent = agent_of_name(algo)
    values: dict = {}
    if agent.if_off_policy and "replay_ratio" not in saved:
        values.update(replay_ratio=saved.get("repeat_times"), repeat_times=None)
    if saved.get("agent_rnn") and saved.get("net_dims"):
        *body, width = saved["net_dims"]
        values.update(recurrent="gru", recurrent_dim=width, net_dims=body)
    if "value_norm" in saved:
        return values
    if "value_norm" not in agent.config_fields:
        return {**values, "value_clip": None, "value_loss": None}
    if not agent.if_multi_agent:
        return {**values, "value_norm": False, "value_clip": False, "value_loss": "mse"}
    if "value_clip" not in saved:
        return {**values, "value_norm": True, "value_clip": False, "value_loss": "mse"}
    return {**values, "value_norm": True}
