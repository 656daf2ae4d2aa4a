"""`Config`: every hyper-parameter of a run, with its default, help text and allowed values.

Plain data: reading, writing, converting and checking a Config is `xiaoyarl/config_io.py`'s
(`load_config`, `save_config`, `set_field`, `apply_overrides`, `validate_config`, ...).
Field names follow ElegantRL's vocabulary (`gamma`, `learning_rate`, `num_envs`, `horizon_len`,
`batch_size`, `repeat_times`, `net_dims`, `clip_grad_norm`, ...); `repeat_times` is the
on-policy epochs, and off-policy agents take `replay_ratio` (gradient steps per env step). A few
fields default to `None`, meaning "chosen from the algorithm and the env backend": each agent
gives those values (`AgentPPO.defaults`, ...) and `agents/settings.py` applies them
(`resolve_config`), with the checks that depend on the algorithm (`check_config`).
`validate_config` checks each field on its own; the config knows no algorithm.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
from dataclasses import dataclass
from typing import Any, TypeVar

from xiaoyarl.errors import ConfigError

BACKENDS = ("auto", "torch", "gymnasium", "envpool", "playground")
SCHEDULES = ("constant", "linear", "cosine")


def option(default: Any, help: str, choices: tuple | None = None) -> Any:
    """A Config field: its default, its help text (`xiaoyarl list --fields`) and, for a field that
    takes one of a fixed set of values, those values (`validate_config` allows no other)."""
    metadata = {"help": help, "choices": choices}
    if isinstance(default, list | dict):  # each Config gets its own copy
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


# fields a setting of today replaced: what to write instead
REPLACED_FIELDS = {
    "agent_rnn": "recurrent agent networks of vdn and qmix are `recurrent: gru` (or lstm), as "
    "for ppo and a2c: net_dims are the layers before it and recurrent_dim its width (agent_rnn "
    "with net_dims [64, 64] is recurrent gru, net_dims [64], recurrent_dim 64). Runs saved with "
    "agent_rnn resume as they are.",
}


def unknown_field_error(name: str, names: list[str], source: str) -> ConfigError:
    """The error for a field name that is not one of `names`, with the closest ones (or what
    replaced it)."""
    if name in REPLACED_FIELDS:
        return ConfigError(f"{source}: the field '{name}' was replaced: {REPLACED_FIELDS[name]}")
    close = difflib.get_close_matches(name, names, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return ConfigError(f"{source}: unknown config field '{name}'.{hint} Run `xiaoyarl list "
                       f"--fields` to see every field.")  # fmt: skip


_T = TypeVar("_T")


def _refuse_unknown_keywords(cls: type[_T]) -> type[_T]:
    """`Config(learningrate=...)` raises the ConfigError `--set` gives (the field's name and the
    closest ones), not the dataclass's TypeError."""
    init = cls.__init__

    @functools.wraps(init)
    def checked_init(self, *args: object, **kwargs: object) -> None:
        names = self.field_names()
        for name in set(kwargs) - set(names):
            raise unknown_field_error(name, names, type(self).__name__)
        init(self, *args, **kwargs)

    # replacing the dataclass's __init__ is what this decorator is for
    cls.__init__ = checked_init  # type: ignore[method-assign]
    return cls


@_refuse_unknown_keywords
@dataclass
class Config:
    """Every knob of a training run. Defaults work across tasks; none is tuned to one benchmark.

    Values are stored as given: `validate_config` (which `train_agent` runs first) converts each
    to its field's type as `--set` does (a number given as text, a tuple for a list) or refuses
    it, naming the field, the value and the type."""

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
    worker_timeout: float = option(60.0, "parallel: seconds before a rollout counts as hung")

    # --- budget, evaluation, checkpoints ---
    max_steps: int = option(2_000_000, "env steps (summed over sub-envs) before training stops")
    target_return: float | None = option(None, "the return that counts as solved; None: the env's")
    stop_at_target: bool = option(True, "stop once the target is reached (and confirmed); false: "
        "train the whole max_steps, unconfirmed (CLI: `--target-return none`)")  # fmt: skip
    eval_every: int | None = option(None, "env steps between evals; None: 2k off-policy, "
        "on-policy 20k (or 8 rollouts where larger); Atari at least 25k")  # fmt: skip
    eval_episodes: int = option(10, "episodes per evaluation, run as parallel sub-envs")
    eval_deterministic: bool = option(True, "evaluate the best action; false: sample as explored")
    confirm_episodes: int = option(50, "an evaluation at the target counts only if this many "
        "fresh episodes confirm it (0: no confirmation)")  # fmt: skip
    checkpoint_every: int = option(200_000, "env steps between full training-state checkpoints")
    on_divergence: str = option("stop", "a run whose losses or values stop being finite or "
        "outgrow its rewards: stop (stop_reason diverged) or warn", ("stop", "warn"))  # fmt: skip
    cwd: str | None = option(None, "run folder; None: runs/<env>_<algo>_<seed>")
    tensorboard: bool = option(False, "also write TensorBoard events (`tensorboard` extra)")
    wandb: bool = option(False, "also log to W&B (`wandb` extra; WANDB_MODE=offline works)")
    wandb_project: str = option("xiaoyarl", "the W&B project runs are logged to")

    # --- networks and optimisation ---
    net_dims: list[int] | None = option(None, "hidden widths; None: automatic per algorithm")
    learning_rate: float | None = option(None, "Adam's step size; None: automatic per algorithm")
    learning_rate_schedule: str = option("constant", "decay to schedule_end x lr", SCHEDULES)
    schedule_end: float = option(0.0, "a scheduled value ends at this fraction of its start ...")
    schedule_steps: int | None = option(None, "... after this many env steps; None: max_steps")
    encoder: str = option("auto", "auto (by obs shape), mlp, nature, impala, minatar, module:Class")
    share_encoder: bool = option(True, "ppo, a2c: actor and critic share an image encoder")
    recurrent: str | None = option(None, "an LSTM or GRU policy (ppo, a2c, pqn, mappo, "
        "pqn_vdn; the replay algorithms: R2D2's replayed sequences); recurrent agent networks "
        "(vdn, qmix: a DRQN; maddpg, matd3: the actor; whole episodes replayed)",
        ("lstm", "gru"))  # fmt: skip
    recurrent_dim: int = option(128, "with recurrent: units of the LSTM or GRU (vdn, qmix: "
        "after the net_dims layers; the QMIX paper: [64] and 64)")  # fmt: skip
    sequence_len: int = option(16, "replay algorithms with recurrent: steps of each replayed "
        "sequence trained on (batch_size // sequence_len a batch; R2D2: 40 to 80)")  # fmt: skip
    burn_in: int = option(8, "replay algorithms with recurrent: steps before each replayed "
        "sequence run without gradients, from the stored hidden state (R2D2: 40)")  # fmt: skip
    clip_grad_norm: float = option(0.5, "max global gradient norm per network")
    weight_decay: float = option(0.0, "decoupled weight decay of every optimizer (AdamW); 0: Adam")
    optimizer: str = option("adam", "the networks' optimizer (radam: PQN's)", ("adam", "radam"))
    gamma: float = option(0.99, "discount factor")
    state_norm: bool | None = option(None, "running mean/std of observations; None: on-policy only")
    state_norm_clip: float | None = option(10.0, "+-bound on normalised observations; null: none")
    reward_norm: bool | None = option(None, "ppo, a2c: rewards / running std of return (None: on); "
        "vdn, qmix: standardised by running mean and std, as EPyMARL (None: off)")  # fmt: skip

    # --- rollout and update schedule ---
    horizon_len: int | None = option(None, "steps per sub-env per rollout; None: automatic")
    batch_size: int | None = option(None, "transitions per gradient step; None: automatic")
    repeat_times: float | None = option(None, "on-policy: epochs over each rollout; None: auto")
    replay_ratio: float | None = option(None, "off-policy: gradient steps per env step (the "
        "update-to-data ratio); None: automatic")  # fmt: skip

    # --- on-policy (PPO / A2C) ---
    ratio_clip: float = option(0.2, "PPO clip range epsilon")
    lambda_gae_adv: float = option(0.95, "GAE lambda")
    lambda_entropy: float = option(0.0, "entropy bonus coefficient")
    ratio_clip_schedule: str = option("constant", "decay to schedule_end x it", SCHEDULES)
    lambda_entropy_schedule: str = option("constant", "decay to schedule_end x it", SCHEDULES)

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
    n_step: int = option(1, "n-step returns (1: one-step TD targets); single-agent off-policy")
    layer_norm: bool = option(False, "LayerNorm before each hidden ReLU of the critics / Q-nets")
    per: bool = option(False, "prioritized experience replay (proportional)")
    per_alpha: float = option(0.6, "how much prioritization is used (0: uniform)")
    per_beta: float = option(0.4, "initial importance-sampling exponent, annealed to 1 ...")
    per_beta_steps: int = option(100_000, "... linearly over these env steps (not max_steps's)")
    explore_rate: float = option(0.05, "DQN, PQN: final epsilon of epsilon-greedy (starts at 1)")
    explore_decay_steps: int | None = option(None, "env steps of epsilon's decay; None: automatic")
    q_lambda: float = option(0.65, "PQN: lambda of its Q(lambda) returns (0: one-step targets)")
    world_model: dict | None = option(None, "tdmpc2, dreamerv3: settings over their defaults")
    explore_noise_std: float = option(0.1, "DDPG / TD3: Gaussian exploration noise (actions: +-1)")
    explore_noise_std_max: float | None = option(None, "DDPG / TD3: each sub-env its own noise "
        "std, drawn from [explore_noise_std, this] as its episode starts (FastTD3)")  # fmt: skip
    explore_noise: str = option("gaussian", "DDPG/TD3: Gaussian at each step, or ou: Ornstein-"
        "Uhlenbeck; SAC: gsde, state-dependent", choices=("gaussian", "ou", "gsde"))  # fmt: skip
    policy_noise_std: float = option(0.2, "TD3: target policy smoothing noise ...")
    policy_noise_clip: float = option(0.5, "... clipped to +-this")
    policy_delay: int = option(2, "TD3: critic updates per actor update")
    alpha_init: float = option(1.0, "SAC: initial entropy temperature (learned)")
    alpha_auto: bool = option(True, "SAC: learn alpha for the target entropy; false: alpha_init")
    num_critics: int | None = option(None, "critics; None: 1 DDPG/MADDPG, 2 TD3/SAC/MATD3, 10 REDQ")
    redq_subset: int = option(2, "REDQ: M critics in the target's minimum")
    critic_atoms: int = option(0, "DQN family, DDPG / TD3 / SAC / REDQ: C51 distributional "
        "critics, this many atoms over [critic_v_min, critic_v_max] (0: values)")  # fmt: skip
    critic_v_min: float | None = option(None, "the least return the critics' atoms stand for")
    critic_v_max: float | None = option(None, "the greatest one (set both with critic_atoms)")
    crossq: bool = option(False, "DDPG / TD3 / SAC / REDQ: CrossQ's critics: batch renormalised, "
        "(s, a) and (s', a') in one pass, no target networks (Bhatt et al. 2024)")  # fmt: skip
    target_q_reduce: str = option("min", "DDPG / TD3 / SAC: the target critics' values combined "
        "by their min (the papers' clipped double Q) or their mean (an averaged ensemble; raise "
        "num_critics for more members)", ("min", "mean"))  # fmt: skip

    # --- value decomposition (vdn, qmix; agents/multi/value_decomposition.py) ---
    td_lambda: float = option(0.0, "VDN / QMIX with recurrent: lambda of TD(lambda) targets over "
        "the replayed episodes (0: one-step, as PyMARL; PyMARL2 and JaxMARL: 0.6)")  # fmt: skip
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

    @classmethod
    def field_names(cls) -> list[str]:
        """The names of every field, in their order."""
        return [f.name for f in dataclasses.fields(cls)]

    def to_dict(self) -> dict:
        """Every field and its value, as plain data (what config.yaml holds)."""
        return dataclasses.asdict(self)
