"""Config: defaults, validation messages, --set parsing, YAML round trip."""

import dataclasses

import pytest
import torch

from xiaoyarl import Config, ConfigError
from xiaoyarl.agents import ALGORITHMS
from xiaoyarl.agents.settings import (
    check_config,
    config_from_saved,
    fields_read,
    load_saved_config,
    resolve_config,
    resolve_run,
)
from xiaoyarl.config import option
from xiaoyarl.config_io import (
    apply_overrides,
    field_choices,
    field_docs,
    load_config,
    save_config,
    set_field,
    validate_config,
)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("learning_rate", -1e-3, ["learning_rate", "-0.001", "(0, 1)"]),
        ("gamma", 1.5, ["gamma", "1.5", "(0, 1]"]),
        ("gamma", 0.0, ["gamma", "(0, 1]"]),
        ("algo", "ppoo", ["unknown algorithm", "ppoo", "did you mean 'ppo'"]),
        ("num_envs", 0, ["num_envs", "positive integer"]),
        ("net_dims", [64, 0], ["net_dims", "positive"]),
        ("ratio_clip", 2.0, ["ratio_clip", "(0, 1)"]),
        ("device", "gpu", ["device", "auto, cpu, cuda"]),
        ("backend", "jax", ["backend", "auto, torch, gymnasium"]),
        ("eval_episodes", 0, ["eval_episodes", "positive integer"]),
        ("lambda_gae_adv", -0.1, ["lambda_gae_adv", "[0, 1]"]),
        ("weight_decay", -0.1, ["weight_decay", "-0.1", ">= 0", "0: Adam"]),
    ],
)
def test_validate_rejects_bad_values_naming_field_value_and_allowed(field, value, words):
    config = Config()
    setattr(config, field, value)
    with pytest.raises(ConfigError) as err:
        check_config(config)
    for word in words:
        assert word in str(err.value)


def test_batch_larger_than_rollout_is_rejected():
    config = Config(num_envs=4, horizon_len=8, batch_size=64)
    with pytest.raises(
        ConfigError, match=r"batch_size=64 is larger than one rollout .*4 \* 8 = 32"
    ):
        check_config(config)


def test_resolve_fills_automatic_defaults_per_backend_and_algo():
    torch_ppo = resolve_config(Config(algo="ppo"), batched=True)
    gym_ppo = resolve_config(Config(algo="ppo"), batched=False)
    a2c = resolve_config(Config(algo="a2c"), batched=True)
    assert torch_ppo.num_envs == 16 and gym_ppo.num_envs == 8
    assert resolve_config(Config(algo="ppo"), batched=True, device_type="cuda").num_envs == 1024
    for c in (torch_ppo, gym_ppo):
        assert c.num_envs * c.horizon_len >= 1024
        assert c.batch_size == c.num_envs * c.horizon_len // 4
    assert a2c.repeat_times == 1.0 and a2c.batch_size == a2c.num_envs * a2c.horizon_len
    assert resolve_config(Config(learning_rate=1e-3), True).learning_rate == 1e-3  # explicit wins


def test_set_parses_and_converts_types():
    config = Config()
    apply_overrides(
        config,
        ["gamma=0.98", "num_envs=16", "net_dims=[32, 32]", "state_norm=false",
         "max_steps=1e5", "target_return=null", "env_id=Pendulum-v1"]
    )  # fmt: skip
    assert config.gamma == 0.98 and config.num_envs == 16 and config.net_dims == [32, 32]
    assert config.state_norm is False and config.max_steps == 100_000
    assert config.target_return is None and config.env_id == "Pendulum-v1"
    set_field(config, "net_dims", "128,64")
    assert config.net_dims == [128, 64]


@pytest.mark.parametrize(
    ("pair", "words"),
    [
        ("gamma", ["name=value", "gamma"]),
        ("=3", ["name=value"]),
        ("gama=0.9", ["unknown config field 'gama'", "gamma"]),
        ("num_envs=lots", ["num_envs", "integer"]),
        ("num_envs=2.5", ["num_envs", "integer"]),
        ("state_norm=maybe", ["state_norm", "boolean"]),
        ("net_dims=[a,b]", ["net_dims", "list of integers"]),
        ("gamma=null", ["gamma cannot be empty"]),
        ("critic_atoms=null", ["critic_atoms cannot be empty; it needs an integer"]),
    ],
)
def test_malformed_set_is_rejected_clearly(pair, words):
    with pytest.raises(ConfigError) as err:
        apply_overrides(Config(), [pair])
    for word in words:
        assert word in str(err.value)


def test_yaml_round_trip(tmp_path):
    config = Config(algo="a2c", env_id="Pendulum-v1", net_dims=[8, 8], gamma=0.9, num_envs=3)
    save_config(config, tmp_path / "c.yaml")
    assert load_config(tmp_path / "c.yaml") == config


def test_bad_yaml_files(tmp_path):
    (tmp_path / "bad.yaml").write_text("gamma: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(tmp_path / "bad.yaml")
    (tmp_path / "unknown.yaml").write_text("gamma: 0.9\nlearnig_rate: 0.1\n")
    with pytest.raises(ConfigError, match="unknown config field 'learnig_rate'.*learning_rate"):
        load_config(tmp_path / "unknown.yaml")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize("algo", ["ddpg", "td3"])
def test_h_term_on_ddpg_and_td3_needs_exploration_noise(algo):
    """Their H-term density is N(actor(s), explore_noise_std^2): log 0 without noise."""
    config = Config(algo=algo, env_id="Pendulum-v1", h_term=True, explore_noise_std=0.0)
    with pytest.raises(ConfigError) as err:
        check_config(config)
    for word in ["explore_noise_std=0.0", "h_term", "set explore_noise_std > 0 or h_term off"]:
        assert word in str(err.value)
    check_config(Config(algo=algo, env_id="Pendulum-v1", explore_noise_std=0.0))  # no H-term: fine
    check_config(Config(algo="sac", env_id="Pendulum-v1", h_term=True, explore_noise_std=0.0))


def test_h_term_without_exploration_noise_is_refused_on_the_command_line(tmp_path, cli):
    refused = cli("train", "td3", "Pendulum-v1", "--set", "h_term=true", "--set",
                  "explore_noise_std=0", "--cwd", str(tmp_path / "r"))  # fmt: skip
    assert refused.returncode == 2 and "explore_noise_std=0.0" in refused.stderr
    assert not (tmp_path / "r").exists()


def test_an_algorithm_named_in_other_letter_cases_gets_its_name_suggested():
    """The CLI takes `PPO`; a Python Config, which takes the name as it is, says which one."""
    from xiaoyarl.agents.settings import agent_of

    with pytest.raises(ConfigError, match=r"unknown algorithm 'PPO' \(did you mean 'ppo'\?\)"):
        agent_of(Config(algo="PPO"))


def test_python_config_refuses_an_unknown_keyword_naming_the_closest_field():
    with pytest.raises(ConfigError, match=r"unknown config field 'learningrate'.*learning_rate"):
        Config(learningrate=1e-3)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("gamma", "fast", ["gamma='fast'", "number"]),
        ("batch_size", 256.5, ["batch_size=256.5", "integer"]),
        ("state_norm", 1, ["state_norm=1", "boolean"]),
        ("net_dims", [64, "wide"], ["net_dims", "list of integers"]),
    ],
)
def test_python_config_of_a_wrong_type_is_refused_when_validated_naming_field_value_and_type(
    field, value, words
):
    config = Config(**{field: value})  # plain data: checked by validate_config (train_agent's)
    with pytest.raises(ConfigError) as err:
        validate_config(config)
    for word in words:
        assert word in str(err.value)


def test_python_config_values_are_converted_as_the_command_line_does_when_checked():
    """A number given as text, an integer given as a whole float, a tuple for a list: converted
    by the checks train_agent runs first (`check_config`, which calls `validate_config`)."""
    config = Config(gamma="0.9", batch_size=256.0, net_dims=(32, 32), cwd="yes")
    assert check_config(config) is config
    assert config.gamma == 0.9 and isinstance(config.gamma, float)
    assert config.batch_size == 256 and isinstance(config.batch_size, int)
    assert config.net_dims == [32, 32] and config.cwd == "yes"  # a folder name stays as given


def test_validate_checks_the_type_of_a_field_assigned_later(tmp_path):
    from xiaoyarl import train_agent

    config = Config(env_id="CartPole-v1", cwd=str(tmp_path / "run"))
    config.gamma = "fast"
    with pytest.raises(ConfigError, match="gamma='fast' is not a valid number"):
        train_agent(config, log=None)
    assert not (tmp_path / "run").exists()  # refused before the run folder is written
    config.gamma = 0.99
    config.batch_size = 64.0
    assert check_config(config).batch_size == 64 and isinstance(config.batch_size, int)


@pytest.mark.parametrize(("field", "value"), [("value_loss", "l1"), ("huber_delta", 0.0)])
def test_mappo_value_loss_settings_are_checked(field, value):
    with pytest.raises(ConfigError, match=f"{field}="):
        check_config(Config(algo="mappo", env_id="SpreadDiscrete-v0", **{field: value}))


def test_a_mappo_run_saved_before_its_value_loss_fields_resumes_with_the_loss_it_had(tmp_path):
    """A MAPPO run written before value_clip/value_loss existed trained on the squared error: its
    saved config means that, while a config file (a preset) gets today's defaults."""
    import yaml

    from xiaoyarl.agents.settings import RunSettings
    from xiaoyarl.errors import CheckpointError
    from xiaoyarl.train.checkpoint import CHECKPOINT_FORMAT, open_checkpoint, save_atomic

    values = Config(algo="mappo", env_id="SpreadDiscrete-v0").to_dict()
    for name in ("value_norm", "value_clip", "value_loss", "huber_delta"):
        del values[name]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(values))
    saved = load_saved_config(path)
    assert saved.value_clip is False and saved.value_loss == "mse" and saved.value_norm is True
    assert load_config(path).value_clip is None  # a config file: automatic (on for MAPPO)
    save_atomic({"format": CHECKPOINT_FORMAT, "config": values}, tmp_path / "checkpoint/state.pt")

    def settings(config):
        return RunSettings(config, torch.device("cpu"), "torch", 1, tmp_path, [], [])

    assert open_checkpoint(settings(saved), tmp_path, resume=True)  # the same settings: resumable
    with pytest.raises(CheckpointError, match="value_clip: checkpoint False, now True"):
        now = Config(algo="mappo", env_id="SpreadDiscrete-v0", value_norm=True, value_clip=True)
        open_checkpoint(settings(now), tmp_path, resume=True)


def test_runs_saved_when_the_value_loss_fields_were_mappos_own_keep_their_critic_loss():
    """Until 2026-11-26 value_clip and value_loss (on, huber) were read by MAPPO alone: a PPO
    run saved then trained on the plain squared error, and resumes so; other algorithms' saved
    values mean nothing (automatic)."""
    old = {k: v for k, v in Config(algo="ppo").to_dict().items() if k != "value_norm"}
    old.update(value_clip=True, value_loss="huber")  # what those configs hold
    saved = config_from_saved(old)
    assert (saved.value_norm, saved.value_clip, saved.value_loss) == (False, False, "mse")
    dqn = config_from_saved({**old, "algo": "dqn"})
    assert (dqn.value_clip, dqn.value_loss) == (None, None)
    mappo = config_from_saved({**old, "algo": "mappo"})  # saved after MAPPO's loss fields came
    assert (mappo.value_norm, mappo.value_clip, mappo.value_loss) == (True, True, "huber")


def test_runs_saved_when_repeat_times_meant_both_resume_with_their_replay_ratio(tmp_path):
    """Until 2026-11-29 an off-policy agent's gradient steps per env step were `repeat_times`: a
    run saved then reads it as its `replay_ratio` and resumes; a config written today that gives
    an off-policy agent `repeat_times` is refused with the name to use, and on-policy agents
    keep `repeat_times` as their epochs."""
    import yaml

    from xiaoyarl.agents.settings import RunSettings
    from xiaoyarl.train.checkpoint import CHECKPOINT_FORMAT, open_checkpoint, save_atomic

    values = {k: v for k, v in resolve_config(Config(algo="sac", env_id="Pendulum-v1"),
                                              batched=False).to_dict().items()
              if k != "replay_ratio"}  # fmt: skip
    values["repeat_times"] = 0.25
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(values))
    saved = load_saved_config(path)
    assert (saved.replay_ratio, saved.repeat_times) == (0.25, None)
    save_atomic({"format": CHECKPOINT_FORMAT, "config": values}, tmp_path / "checkpoint/state.pt")
    settings = RunSettings(saved, torch.device("cpu"), "torch", 1, tmp_path, [], [])
    assert open_checkpoint(settings, tmp_path, resume=True)
    with pytest.raises(ConfigError, match="write replay_ratio=0.25 instead"):
        check_config(load_config(path))  # a config file: today's meaning
    ppo = config_from_saved({**Config(algo="ppo").to_dict(), "repeat_times": 10})
    assert (ppo.repeat_times, ppo.replay_ratio) == (10, None)
    assert resolve_config(Config(algo="dqn", replay_ratio=2.0), batched=False).replay_ratio == 2.0


def test_runs_saved_with_agent_rnn_resume_as_recurrent_agents(tmp_path):
    """Until 2026-11-29 VDN's and QMIX's recurrent agents were `agent_rnn: true`, a GRU as wide
    as the last of `net_dims`: a run saved then reads as `recurrent: gru` with that width and
    the layers before it, and resumes; a config written today that names `agent_rnn` is refused
    with what to write instead."""
    import yaml

    from xiaoyarl.agents.settings import RunSettings
    from xiaoyarl.train.checkpoint import CHECKPOINT_FORMAT, open_checkpoint, save_atomic

    values = resolve_config(Config(algo="qmix", env_id="SpreadDiscrete-v0"), batched=True).to_dict()
    assert values["net_dims"] == [64, 64] and values["recurrent"] is None
    values.update(agent_rnn=True, td_lambda=0.6)  # as such a run saved them
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(values))
    saved = load_saved_config(path)
    assert (saved.recurrent, saved.recurrent_dim, saved.net_dims) == ("gru", 64, [64])
    check_config(saved)
    save_atomic({"format": CHECKPOINT_FORMAT, "config": values}, tmp_path / "checkpoint/state.pt")
    settings = RunSettings(saved, torch.device("cpu"), "torch", 1, tmp_path, [], [])
    assert open_checkpoint(settings, tmp_path, resume=True)
    with pytest.raises(ConfigError, match="'agent_rnn' was replaced: .* `recurrent: gru`"):
        load_config(path)  # a config file: today's fields
    with pytest.raises(ConfigError, match="'agent_rnn' was replaced"):
        Config(algo="qmix", agent_rnn=True)
    feed_forward = config_from_saved({**values, "agent_rnn": False, "td_lambda": 0.0})
    assert (feed_forward.recurrent, feed_forward.net_dims) == (None, [64, 64])


def test_numpy_scalars_are_taken_as_python_values():
    import numpy as np

    config = Config(state_norm=np.bool_(True), batch_size=np.int64(64), gamma=np.float32(0.5))
    validate_config(config)
    assert config.state_norm is True and config.batch_size == 64 and config.gamma == 0.5
    assert type(config.batch_size) is int and type(config.gamma) is float


def test_every_field_has_help_and_validate_allows_only_its_choices():
    """Each field's help and allowed values are its metadata (`option`); `validate_config`
    refuses any value outside a field's choices, naming the field, the value and every allowed
    value."""
    for field in dataclasses.fields(Config):
        assert isinstance(field.metadata["help"], str) and field.metadata["help"].strip(), field
    choices = field_choices()
    assert {"backend", "vector_mode", "runner", "value_loss", "target_q_reduce",
            "hypernet_layers"} <= set(choices)  # fmt: skip
    for name, allowed in choices.items():
        for value in allowed:
            validate_config(Config(**{name: value}))
        wrong = "nonsense" if isinstance(allowed[0], str) else 7
        with pytest.raises(ConfigError) as err:
            validate_config(Config(**{name: wrong}))
        for word in (f"{name}={wrong!r}", f"one of {', '.join(map(str, allowed))}"):
            assert word in str(err.value)


def test_choices_declared_on_a_field_are_checked_without_code_of_their_own():
    @dataclasses.dataclass
    class WithMode(Config):
        mode: str = option("a", "a field added for this test", ("a", "b"))

    assert field_docs(WithMode)["mode"] == "a field added for this test"
    validate_config(WithMode(mode="b"))
    with pytest.raises(ConfigError, match=r"mode='c'; mode must be one of a, b\."):
        validate_config(WithMode(mode="c"))


def test_values_an_agent_gives_itself_are_not_reported_as_ignored_settings():
    """A resumed run's saved config holds its resolved values: DDPG's own reward_norm: false
    drew "reward_norm=False is ignored by ddpg" on every resume. A value set by hand still
    is reported."""
    from xiaoyarl.agents.settings import ignored_fields

    resolved = resolve_config(Config(algo="ddpg", env_id="Pendulum-v1"), batched=True)
    assert resolved.reward_norm is False and ignored_fields(resolved) == []
    assert ignored_fields(Config(algo="ddpg", env_id="Pendulum-v1", reward_norm=True)) == [
        "reward_norm"
    ]


# Fields whose None means "the algorithm chooses": every run reads the first, the second where
# its algorithm reads them (`fields_read`).
AUTOMATIC = ("num_envs", "eval_every", "net_dims", "learning_rate", "state_norm", "horizon_len",
             "batch_size")  # fmt: skip
AUTOMATIC_OF_SOME = ("repeat_times", "replay_ratio", "reward_norm", "value_norm", "value_clip",
                     "value_loss", "explore_decay_steps", "num_critics")  # fmt: skip


@pytest.mark.parametrize("algo", sorted(ALGORITHMS))
def test_a_resolved_run_leaves_nothing_automatic(algo, tmp_path):
    """`resolve_run` settles every setting a run of `algo` reads that was left automatic, and
    the machine's side (device, backend, threads, run folder): nothing is filled in later."""
    continuous, discrete = ALGORITHMS[algo]
    agent = continuous or discrete
    env = "CartPole-v1" if continuous is None else "Pendulum-v1"
    if agent.if_multi_agent:
        env = "SpreadDiscrete-v0" if continuous is None else "SpreadContinuous-v0"
    config = Config(algo=algo, env_id=env, cwd=str(tmp_path / "run"))
    assert all(getattr(config, name) is None for name in AUTOMATIC)
    settings = resolve_run(config)
    read = fields_read(algo)
    left = [name for name in (*AUTOMATIC, *(n for n in AUTOMATIC_OF_SOME if n in read))
            if getattr(settings.config, name) is None]  # fmt: skip
    assert not left, f"{algo}: {left} left automatic"
    assert settings.threads >= 1 and settings.device.type == "cpu"
    assert settings.backend == "torch" and settings.run_dir == tmp_path / "run"
