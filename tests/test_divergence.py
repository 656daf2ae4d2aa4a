"""The divergence guard (`train/divergence.py`, `on_divergence`): what it flags, and a run that
diverges stops (or warns) with a message that says what to change."""

from __future__ import annotations

import json
import re

import pytest
import torch

from xiaoyarl.train.checkpoint import load_plain
from xiaoyarl.train.divergence import DivergenceGuard

CPU = torch.device("cpu")


def logs(**values: float) -> dict[str, torch.Tensor]:
    return {k: torch.tensor(v) for k, v in values.items()}


def test_healthy_values_within_what_the_rewards_allow_are_not_flagged():
    guard = DivergenceGuard(gamma=0.99, max_step=500, device=CPU)
    rewards = torch.ones(8, 4)  # CartPole: returns up to 100 at gamma 0.99
    for _ in range(100):  # Q-values at the true bound, losses at its square, other scalars large
        assert guard.observe(logs(q_value=100.0, critic_loss=1e4, entropy=1e9), rewards) is None


def test_a_value_beyond_ten_times_the_return_bound_is_flagged_with_its_name():
    guard = DivergenceGuard(gamma=0.99, max_step=500, device=CPU)
    rewards = torch.full((8, 4), -1.5)  # the navigation task's scale: |return| <= 150
    assert guard.observe(logs(q_value=-1400.0, critic_loss=2e6), rewards) is None
    found = guard.observe(logs(q_value=-1.5e11, critic_loss=2e6), rewards)
    assert found is not None and found.startswith("q_value = -1.5e+11")
    assert "|r| <= 1.5" in found and "gamma 0.99" in found


def test_soft_values_carry_the_entropy_bonus_the_temperature_gives():
    """Discrete SAC on CartPole: r = 1, gamma 0.99, alpha 1 and the entropy of two actions near
    log 2 make soft values up to (1 + log 2) / 0.01 = 169; ten times that is healthy, where the
    rewards alone would allow only 1,000 (the healthy run this once stopped at 1,030)."""
    guard = DivergenceGuard(gamma=0.99, max_step=500, device=CPU)
    rewards = torch.ones(8, 4)
    assert guard.observe(logs(alpha=1.0, entropy=0.69, q_value=900.0), rewards) is None
    for _ in range(50):  # alpha falls later on: the values keep what earlier targets carried
        assert guard.observe(logs(alpha=0.01, entropy=0.6, q_value=1_500.0), rewards) is None
    found = guard.observe(logs(alpha=0.01, entropy=0.6, q_value=1_800.0), rewards)
    assert found is not None and "entropy bonus alpha * H <= 0.69" in found
    # without the temperature's logs the rewards alone bound the values, as before
    assert "q_value" in DivergenceGuard(0.99, 500, CPU).observe(logs(q_value=1_030.0), rewards)


def test_a_temperature_that_runs_away_is_flagged_and_lifts_no_bound():
    """SAC at learning rate 0.9: alpha swings to 1e5, and an entropy bonus that large would
    lift the values' bound out of reach; the bonus is held to a hundred times the larger of the
    largest reward and its first value (a healthy discrete SAC on CartPole reaches ten)."""
    guard = DivergenceGuard(gamma=0.99, max_step=200, device=CPU)
    rewards = torch.full((8, 1), -16.0)  # Pendulum's scale
    assert guard.observe(logs(alpha=1.0, entropy=0.7, q_value=-500.0), rewards) is None
    assert guard.observe(logs(alpha=273.0, entropy=0.68, q_value=-500.0), rewards) is None
    found = guard.observe(logs(alpha=3000.0, entropy=0.68, q_value=-500.0), rewards)
    assert found is not None and found.startswith("alpha * entropy = 2.04e+03, beyond 1.6e+03")
    capped = DivergenceGuard(gamma=0.99, max_step=200, device=CPU)
    capped.observe(logs(alpha=1.0, entropy=0.7), rewards)  # the starting temperature
    capped.observe(logs(alpha=1e6, entropy=0.7), rewards)
    value, _ = capped.bounds()
    assert float(value) == pytest.approx(10 * 100 * (16 + 1600))  # bonus counted up to 1,600


def test_losses_are_held_to_the_square_and_non_finite_ones_always_flagged():
    guard = DivergenceGuard(gamma=0.9, max_step=200, device=CPU)
    rewards = torch.full((4, 2), 2.0)  # returns up to 20: values to 200, losses to 40,000
    assert guard.observe(logs(critic_loss=39_000.0), rewards) is None
    assert "critic_loss" in guard.observe(logs(critic_loss=41_000.0), rewards)
    other = DivergenceGuard(gamma=0.9, max_step=200, device=CPU)
    assert other.observe(logs(h_term=float("nan")), rewards) is None  # not computed yet
    assert "not finite" in other.observe(logs(critic_loss=float("nan")), rewards)
    assert "not finite" in DivergenceGuard(0.9, 200, CPU).observe(logs(entropy=float("inf")),
                                                                   rewards)  # fmt: skip
    # gamma 1: the time limit bounds the return instead
    undiscounted = DivergenceGuard(gamma=1.0, max_step=200, device=CPU)
    assert undiscounted.observe(logs(q_value=1_900.0), torch.ones(1, 1)) is None  # 10 x 200
    assert "q_value" in undiscounted.observe(logs(q_value=2_100.0), torch.ones(1, 1))


def test_on_an_accelerator_the_flag_is_read_back_every_50_updates_naming_the_first():
    guard = DivergenceGuard(gamma=0.99, max_step=500, device=CPU)
    guard.check_every = 50  # as on a GPU
    rewards = torch.ones(8, 4)
    found = [guard.observe(logs(q_value=5e4 if i == 3 else 1.0), rewards) for i in range(50)]
    assert found[:49] == [None] * 49
    assert found[49] is not None and found[49].startswith("q_value = 5e+04")


def train(cli, tmp_path, *extra):
    summary = tmp_path / "summary.json"
    run = cli("train", "sac", "Pendulum-v1", "--seed", "0", "--quiet", "--cwd", str(tmp_path / "r"),
              "--set", "learning_rate=0.9", "--set", "clip_grad_norm=1e6", "--set",
              "checkpoint_every=500", "--summary-json", str(summary), *extra,
              timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(summary.read_text()), run.stderr


def test_a_diverging_run_stops_and_keeps_its_last_checkpoint(tmp_path, cli):
    summary, stderr = train(cli, tmp_path, "--max-steps", "20000")
    assert summary["stop_reason"] == "diverged"
    assert summary["total_steps"] < 5000  # within a few hundred updates of the first
    assert stderr.count("the run diverged at step") == 1
    # at learning rate 0.9 the temperature runs away first (or the critic's loss)
    assert re.search(r"(alpha \* entropy|critic_loss) = ", stderr), stderr
    assert "lower learning_rate" in stderr and "Stopping" in stderr
    saved = load_plain(tmp_path / "r" / "checkpoint" / "state.pt")
    assert saved["counters"]["total_steps"] < summary["total_steps"]  # from before it diverged
    assert (tmp_path / "r" / "config.yaml").is_file()


def test_on_divergence_warn_trains_on_with_one_warning(tmp_path, cli):
    summary, stderr = train(cli, tmp_path, "--max-steps", "1500", "--set", "on_divergence=warn")
    assert summary["stop_reason"] == "max_steps" and summary["total_steps"] >= 1500
    assert stderr.count("the run diverged at step") == 1 and "Training goes on" in stderr


def test_the_warning_names_the_task_preset_a_run_does_not_follow(tmp_path, cli):
    """QMIX on the navigation task without its preset: the warning names the preset file and
    the fields the run holds other values in (here gamma among them), as what to change."""
    summary = tmp_path / "summary.json"
    run = cli("train", "qmix", "SpreadDiscrete-v0", "--no-preset", "--seed", "0", "--quiet",
              "--cwd", str(tmp_path / "r"), "--max-steps", "5000", "--set",
              "learning_rate=0.9", "--set", "clip_grad_norm=1e6", "--summary-json",
              str(summary), timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(summary.read_text())["stop_reason"] == "diverged"
    assert "spread_value_decomposition.yaml" in run.stderr
    assert re.search(r"sets other values for: [^(]*\bgamma\b", run.stderr)


def test_preset_differences_lists_the_fields_a_config_holds_other_values_in():
    from xiaoyarl.config_io import config_from_preset, preset_differences

    config = config_from_preset("qmix", "mpe2:simple_spread_v3")
    path, fields = preset_differences(config)
    assert path.name == "spread_qmix_mpe2.yaml" and fields == []
    config.gamma, config.learning_rate = 0.99, 0.001
    assert preset_differences(config)[1] == ["learning_rate", "gamma"]  # the file's order
    assert preset_differences(config_from_preset("ppo", "CartPole-v1")) is None
