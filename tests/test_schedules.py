"""Schedules of the learning rate, PPO's clip range and the entropy bonus (`train/schedules.py`):
the formulas, the values every update of a run sees, the run's saved config, and refusals.
(Bit-exact resume of scheduled runs: `test_checkpoint.py`.)"""

from __future__ import annotations

import math

import pytest
import torch
import yaml

from xiaoyarl import Callback, Config, make_env, train_agent
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.config_io import config_from_dict
from xiaoyarl.errors import ConfigError
from xiaoyarl.run import agent_class
from xiaoyarl.train.schedules import Schedules, schedule_fraction, scheduled, scheduled_values


@pytest.mark.parametrize(
    ("kind", "progress", "end", "expected"),
    [
        ("constant", 0.7, 0.0, 1.0),
        ("linear", 0.0, 0.0, 1.0),
        ("linear", 0.25, 0.0, 0.75),
        ("linear", 0.5, 0.1, 0.55),
        ("linear", 1.0, 0.1, 0.1),
        ("linear", 3.0, 0.1, 0.1),  # past the schedule: it stays at its end
        ("cosine", 0.0, 0.0, 1.0),
        ("cosine", 0.5, 0.0, 0.5),
        ("cosine", 0.5, 0.2, 0.6),
        ("cosine", 1.0, 0.2, 0.2),
        ("cosine", 0.25, 0.0, (1 + math.cos(math.pi / 4)) / 2),
    ],
)
def test_schedule_fraction(kind, progress, end, expected):
    assert schedule_fraction(kind, progress, end) == pytest.approx(expected)


def test_scheduled_values_follow_the_env_steps_over_schedule_steps_or_max_steps():
    config = Config(algo="ppo", learning_rate=1e-3, ratio_clip=0.2, lambda_entropy=0.01,
                    learning_rate_schedule="linear", lambda_entropy_schedule="cosine",
                    max_steps=1000)  # fmt: skip
    assert scheduled(config) == ["learning_rate", "lambda_entropy"]
    values = scheduled_values(config, 250)
    assert values == pytest.approx(
        {"learning_rate": 7.5e-4, "lambda_entropy": 0.01 * (1 + math.cos(math.pi / 4)) / 2}
    )
    config.schedule_steps = 500  # over its own span, not the budget
    assert scheduled_values(config, 250)["learning_rate"] == pytest.approx(5e-4)
    assert scheduled_values(config, 900)["learning_rate"] == 0.0
    assert scheduled(Config()) == []


class Record(Callback):
    """What every update of a run was given: (env steps after its rollout, lr of each optimizer,
    the clip range and entropy bonus the agent's losses read)."""

    def __init__(self):
        self.seen = []

    def on_update(self, loop, logs):
        lrs = sorted({g["lr"] for o in loop.agent.optimizers.values() for g in o.param_groups})
        cfg = loop.agent.config
        self.seen.append((loop.total_steps, lrs, cfg.ratio_clip, cfg.lambda_entropy))


def test_a_ppo_run_updates_with_the_scheduled_values_and_saves_the_start_values(tmp_path):
    config = config_from_dict({
        "algo": "ppo", "env_id": "Pendulum-v1", "num_envs": 8, "horizon_len": 16, "threads": 1,
        "max_steps": 1024, "eval_every": 512, "eval_episodes": 2, "cwd": str(tmp_path),
        "learning_rate": 1e-3, "learning_rate_schedule": "linear", "ratio_clip": 0.3,
        "ratio_clip_schedule": "cosine", "lambda_entropy": 0.02,
        "lambda_entropy_schedule": "linear", "schedule_end": 0.1,
    })  # fmt: skip
    record = Record()
    train_agent(config, log=None, callbacks=[record])
    assert len(record.seen) == 1024 // 128
    for steps, lrs, clip, entropy in record.seen:
        p = steps / 1024
        assert lrs == [pytest.approx(1e-3 * (1 - 0.9 * p))]
        assert clip == pytest.approx(0.3 * (0.1 + 0.9 * (1 + math.cos(math.pi * p)) / 2))
        assert entropy == pytest.approx(0.02 * (1 - 0.9 * p))
    assert record.seen[-1][1] == [pytest.approx(1e-4)]  # the last update: the end value
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert (saved["learning_rate"], saved["ratio_clip"], saved["lambda_entropy"]) == (
        1e-3, 0.3, 0.02)  # fmt: skip
    assert saved["learning_rate_schedule"] == "linear"


def test_an_off_policy_run_schedules_every_optimizer(tmp_path):
    config = Config(algo="sac", env_id="Pendulum-v1", num_envs=4, max_steps=512, threads=1,
                    eval_every=512, eval_episodes=2, learning_starts=128, batch_size=32,
                    net_dims=[32], learning_rate=1e-3, learning_rate_schedule="linear",
                    cwd=str(tmp_path))  # fmt: skip
    record = Record()
    train_agent(config, log=None, callbacks=[record])
    steps, lrs, _, _ = record.seen[-1]
    assert lrs == [pytest.approx(1e-3 * (1 - steps / 512))]


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"learning_rate_schedule": "exponential"}, "learning_rate_schedule"),
        ({"schedule_end": 1.5}, "schedule_end"),
        ({"schedule_steps": 0}, "schedule_steps"),
    ],
)
def test_bad_schedules_are_refused_naming_the_field(fields, named):
    with pytest.raises(ConfigError, match=named):
        train_agent(Config(**fields), log=None)


def test_a_schedule_of_a_field_the_algorithm_does_not_read_is_warned_about(capsys, tmp_path):
    config = Config(algo="a2c", env_id="CartPole-v1", max_steps=64, num_envs=8, horizon_len=8,
                    eval_every=64, eval_episodes=2, threads=1, cwd=str(tmp_path),
                    ratio_clip_schedule="linear")  # fmt: skip
    train_agent(config, log=None)
    assert "ratio_clip_schedule='linear' is ignored by a2c" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["constant", "linear"])
def test_a_population_member_decays_over_its_whole_budget_not_per_generation(tmp_path, kind):
    from xiaoyarl.population.schemes import Population, PopulationConfig

    config = Config(algo="ppo", env_id="Pendulum-v1", max_steps=100_000,
                    learning_rate_schedule=kind)  # fmt: skip
    population = Population.create_or_join(tmp_path, config, PopulationConfig(members=2),
                                           resume=False, joining=False)  # fmt: skip
    member = population.member_config("m0", seed=1, hparams={}, max_steps=20_000)  # generation 1
    assert member.max_steps == 20_000
    assert member.schedule_steps == (100_000 if kind == "linear" else None)


def test_vmapped_populations_refuse_schedules():
    from xiaoyarl.population.schemes import check_vmap_population

    with pytest.raises(ConfigError, match="schedules"):
        check_vmap_population(Config(algo="ppo", learning_rate_schedule="linear"), {})
    with pytest.raises(ConfigError, match="ratio_clip_schedule"):  # not one it varies
        check_vmap_population(Config(algo="ppo"), {"ratio_clip_schedule": {"choice": ["linear"]}})


@pytest.mark.parametrize("optimizer", ["adam", "radam"])
def test_a_learning_rate_held_as_a_tensor_is_set_in_place_saved_as_a_number_and_kept(optimizer):
    """The tensor learning rate of an update captured as a CUDA graph (core/graphs.py): the
    schedule fills it in place, a checkpoint holds a number, a restore keeps the tensor."""
    config = resolve_config(Config(algo="dqn", env_id="CartPole-v1", num_envs=2, max_steps=1000,
                                   optimizer=optimizer, learning_rate_schedule="linear"),
                            batched=True)  # fmt: skip
    spec = make_env("CartPole-v1", 2).spec
    agent = agent_class("dqn", spec)(spec, config, torch.device("cpu"))
    groups = [g for opt in agent.optimizers.values() for g in opt.param_groups]
    rates = [torch.tensor(float(g["lr"])) for g in groups]
    for group, rate in zip(groups, rates, strict=True):
        group["lr"] = rate  # as capture_updates does on a CUDA device
    Schedules(config, agent).apply(250)
    assert all(g["lr"] is rate for g, rate in zip(groups, rates, strict=True))
    assert all(math.isclose(rate.item(), config.learning_rate * 0.75, rel_tol=1e-6)
               for rate in rates)  # fmt: skip
    state = agent.state_dict()
    saved = [g["lr"] for opt in state["optimizers"].values() for g in opt["param_groups"]]
    assert all(type(lr) is float for lr in saved), saved
    Schedules(config, agent).apply(500)
    agent.load_state_dict(state)
    assert all(g["lr"] is rate for g, rate in zip(groups, rates, strict=True))
    assert all(math.isclose(rate.item(), config.learning_rate * 0.75, rel_tol=1e-6)
               for rate in rates)  # fmt: skip
