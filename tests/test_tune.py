"""`xiaoyarl tune` (`xiaoyarl/tune/study.py`): a study's table, plots and preset; resume after
SIGKILL; two workers sharing one study; the population engine; spaces and refusals. Tiny
budgets: these test the machinery, not what a search finds (BENCHMARKS.md, "Tuning")."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from xiaoyarl.agents.registry import ALGORITHMS
from xiaoyarl.agents.settings import check_config, fields_read
from xiaoyarl.config import Config
from xiaoyarl.config_io import load_config
from xiaoyarl.population.search_space import SearchSpace
from xiaoyarl.tune.study import check_space, default_space, tuned_algorithms

optuna = pytest.importorskip("optuna")

SPACE = {"learning_rate": {"log_uniform": [1.0e-4, 3.0e-3]},
         "horizon_len": {"choice": [8, 16]},
         "net_dims": {"choice": [[16], [32, 32]]},
         "lambda_entropy": 0.001}  # fmt: skip
# --no-preset: the tiny space and budget are the test's, whatever preset the pair may have
TINY = [
    "--num-envs",
    "8",
    "--eval-every",
    "256",
    "--eval-episodes",
    "2",
    "--threads",
    "1",
    "--no-preset",
]


def tune_args(tmp_path, folder="study", *extra):
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(SPACE))
    return ["tune", "ppo", "Pendulum-v1", "--space", str(space), "--cwd",
            str(tmp_path / folder), *TINY, *extra]  # fmt: skip


def read_trials(folder):
    with open(folder / "trials.csv") as f:
        return list(csv.DictReader(f))


def test_a_study_writes_its_table_plots_and_a_preset_that_trains(tmp_path, cli):
    run = cli(*tune_args(tmp_path, "study", "--trials", "3", "--max-steps", "768"), timeout=300)
    assert run.returncode == 0, run.stderr
    folder = tmp_path / "study"
    rows = read_trials(folder)
    assert [r["state"] for r in rows] == ["COMPLETE"] * 3
    for row in rows:
        assert row["horizon_len"] in ("8", "16") and row["net_dims"] in ("[16]", "[32, 32]")
        assert 1e-4 <= float(row["learning_rate"]) <= 3e-3
        assert (folder / "trials" / f"{int(row['number']):04d}" / "recorder.csv").is_file()
    best = max(rows, key=lambda r: float(r["value"]))
    for png in ("optimization_history.png", "param_importances.png"):
        assert (folder / png).stat().st_size > 1000
    text = (folder / "best.yaml").read_text()
    assert "found by `xiaoyarl tune ppo Pendulum-v1" in text and "768 env steps" in text
    assert f"trial {best['number']} of 3" in text
    preset = load_config(folder / "best.yaml")
    assert preset.learning_rate == pytest.approx(float(best["learning_rate"]))
    assert preset.net_dims == yaml.safe_load(best["net_dims"]) and preset.lambda_entropy == 0.001
    assert preset.num_envs == 8  # the command line's own settings come along ...
    assert preset.max_steps == Config().max_steps  # ... but not how the trials ran
    check_config(preset)
    assert "best: trial" in run.stdout


@pytest.mark.distributed
@pytest.mark.timeout(600)
def test_a_study_killed_with_sigkill_resumes_and_retries_the_dead_trial(tmp_path, cli):
    args = tune_args(tmp_path, "study", "--trials", "3", "--max-steps", "4096", "--heartbeat", "1",
                     "--pruner", "none")  # fmt: skip
    folder = tmp_path / "study"
    proc = subprocess.Popen([sys.executable, "-m", "xiaoyarl", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.time() + 120
        while not (folder / "trials" / "0001" / "checkpoint").exists():  # trial 1 is training
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.time() < deadline, "trial 1 never started"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    time.sleep(2.5)  # the dead trial's heartbeat grows stale (twice --heartbeat)
    run = cli("tune", "--resume", str(folder), timeout=300)
    assert run.returncode == 0, run.stderr
    rows = read_trials(folder)
    states = {int(r["number"]): r["state"] for r in rows}
    assert states[0] == "COMPLETE" and states[1] == "FAIL"  # killed, then failed as stale
    assert sum(s == "COMPLETE" for s in states.values()) == 3
    study = optuna.load_study(study_name="xiaoyarl", storage=f"sqlite:///{folder / 'study.db'}")
    retried = [t for t in study.trials if t.system_attrs.get("failed_trial") == 1]
    assert len(retried) == 1 and retried[0].params == study.trials[1].params  # same values
    assert (folder / "best.yaml").is_file()


@pytest.mark.distributed
@pytest.mark.timeout(600)
def test_two_workers_share_one_study(tmp_path, cli):
    run = cli(*tune_args(tmp_path, "study", "--trials", "4", "--max-steps", "512", "--jobs", "2"),
              timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    rows = read_trials(tmp_path / "study")
    complete = [r for r in rows if r["state"] == "COMPLETE"]
    assert len(complete) >= 4  # a worker may finish one trial past the count
    assert len({r["worker"] for r in complete}) == 2, "both workers ran trials"
    assert len({r["learning_rate"] for r in complete}) == len(complete)  # no two drew alike


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_population_engine_searches_the_same_space(tmp_path, cli):
    run = cli(*tune_args(tmp_path, "study", "--engine", "pbt", "--members", "2", "--max-steps",
                         "512"), timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    folder = tmp_path / "study"
    assert (folder / "population" / "population.csv").is_file()
    preset = load_config(folder / "best.yaml")
    assert 1e-4 <= preset.learning_rate <= 3e-3 and preset.horizon_len in (8, 16)
    assert "(pbt)" in (folder / "best.yaml").read_text()


@pytest.mark.parametrize("algo", tuned_algorithms())
def test_every_default_space_fits_config(algo):
    space = SearchSpace(default_space(algo), source=algo)  # each value checked against Config
    check_space(space)
    assert "learning_rate" in space.params


def test_every_algorithm_has_a_default_space_of_settings_it_reads():
    assert tuned_algorithms() == sorted(ALGORITHMS)
    for algo in ALGORITHMS:
        general = {"learning_rate", "batch_size", "gamma", "net_dims", "horizon_len",
                   "clip_grad_norm", "learning_rate_schedule"}  # fmt: skip
        unread = set(default_space(algo)) - fields_read(algo) - general
        assert not unread, (algo, unread)


def test_refusals_name_what_to_do(tmp_path, cli):
    space = tmp_path / "bad.yaml"
    space.write_text("max_steps: {choice: [1000, 2000]}\n")
    run = cli("tune", "ppo", "CartPole-v1", "--space", str(space), "--cwd", str(tmp_path / "b"))
    assert run.returncode == 2 and "max_steps" in run.stderr
    run = cli("tune", "--resume", str(tmp_path / "nothing"))
    assert run.returncode == 2 and "no study there" in run.stderr
    os.makedirs(tmp_path / "c")
    (tmp_path / "c" / "tune.yaml").write_text("{}\n")
    run = cli("tune", "ppo", "CartPole-v1", "--cwd", str(tmp_path / "c"))
    assert run.returncode == 2 and "already holds a study" in run.stderr


@pytest.mark.distributed
@pytest.mark.timeout(600)
def test_sigterm_to_a_study_with_workers_stops_them_all(tmp_path):
    args = tune_args(tmp_path, "study", "--trials", "4", "--max-steps", "100000", "--jobs", "2")
    proc = subprocess.Popen([sys.executable, "-m", "xiaoyarl", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    folder = tmp_path / "study" / "trials"
    deadline = time.time() + 120
    while len(list(folder.glob("*/recorder.csv"))) < 2:  # both workers are training
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.1)
    pattern = f"--join {tmp_path / 'study'}"
    workers = subprocess.run(["pgrep", "-f", "--", pattern], capture_output=True,
                             text=True).stdout.split()  # fmt: skip
    assert len(workers) == 2
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) != 0
    for pid in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid), 0)  # gone
    study = optuna.load_study(
        study_name="xiaoyarl", storage=f"sqlite:///{tmp_path / 'study/study.db'}"
    )
    assert {t.state.name for t in study.trials} == {"FAIL"}  # stopped, not left running


def test_a_trial_of_several_seeds_trains_each_and_takes_their_mean(tmp_path, cli):
    run = cli(*tune_args(tmp_path, "study", "--trials", "1", "--max-steps", "512", "--seed", "5",
                         "--trial-seeds", "2"), timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    trial = tmp_path / "study" / "trials" / "0000"
    means = []
    for seed in (5, 6):
        assert yaml.safe_load((trial / f"seed_{seed}" / "config.yaml").read_text())["seed"] == seed
        with open(trial / f"seed_{seed}" / "recorder.csv") as f:
            evals = [float(r["eval_mean"]) for r in csv.DictReader(f)]
        means.append(sum(evals) / len(evals))
    (row,) = read_trials(tmp_path / "study")
    assert float(row["value"]) == pytest.approx(sum(means) / 2, rel=1e-5)


def test_the_time_objective_is_the_seconds_to_the_target(tmp_path, cli):
    """`--objective time`: a trial stops at its confirmed target and its value is minus the
    seconds to it (training and evaluation), as the run's summary reports them."""
    args = ["--trials", "1", "--max-steps", "4096", "--objective", "time", "--target-return",
            "-1500"]  # fmt: skip
    run = cli(*tune_args(tmp_path, "study", *args), timeout=300)
    assert run.returncode == 0, run.stderr
    (row,) = read_trials(tmp_path / "study")
    config = load_config(tmp_path / "study" / "trials" / "0000" / "config.yaml")
    assert config.stop_at_target and config.confirm_episodes == 50
    with open(tmp_path / "study" / "trials" / "0000" / "recorder.csv") as f:
        rows = list(csv.DictReader(f))
    reached = [r for r in rows if r["confirm_mean"] and float(r["confirm_mean"]) >= -1500]
    assert reached, "Pendulum's first evaluations of a random policy score above -1500"
    assert int(reached[0]["step"]) == int(rows[-1]["step"])  # the trial ended there
    assert -float(row["value"]) == pytest.approx(float(reached[0]["time"]), abs=0.5)


def test_seed_values_of_the_time_objective():
    from xiaoyarl.tune.study import MISSED_TARGET_FACTOR, seed_value

    solved = {"solved": True, "seconds_to_target": 12.5, "train_seconds": 9.0, "eval_seconds": 3,
              "stop_reason": "target"}  # fmt: skip
    missed = {"solved": False, "seconds_to_target": None, "train_seconds": 20.0, "eval_seconds": 2,
              "stop_reason": "max_steps"}  # fmt: skip
    assert seed_value("time", None, solved) == -12.5
    # train_seconds holds the evaluations' seconds already: counted once
    assert seed_value("time", None, missed) == -MISSED_TARGET_FACTOR * 20.0
    # a run that blew up at once ranks below every miss, however slow
    diverged = {**missed, "train_seconds": 0.2, "eval_seconds": 0.0, "stop_reason": "diverged"}
    slowest_miss = {**missed, "train_seconds": 1e9}
    assert seed_value("time", None, diverged) < seed_value("time", None, slowest_miss)


def test_the_time_objective_needs_a_target(tmp_path, cli):
    run = cli("tune", "ppo", "StockTrading-v0", "--objective", "time", "--cwd",
              str(tmp_path / "s"))  # fmt: skip
    assert run.returncode == 2 and "--target-return R" in run.stderr
    run = cli(*tune_args(tmp_path, "p", "--engine", "pbt", "--objective", "time"))
    assert run.returncode == 2 and "optuna engine" in run.stderr


def test_a_pruned_trials_value_is_its_objectives_only_where_the_objective_is_the_mean():
    """Optuna keeps a pruned trial's last report (the mean of its evaluations so far): a value
    in the units of the `mean` objective only; under `time` and `final` the table leaves it out
    and says where the trial stopped and its mean evaluation there."""
    import optuna
    from optuna.trial import TrialState

    from xiaoyarl.tune.study import trial_line, trial_value

    study = optuna.create_study(direction="maximize")
    study.add_trial(optuna.trial.create_trial(value=-3.5, params={}, distributions={}))
    pruned = optuna.trial.create_trial(
        state=TrialState.PRUNED, value=120.0, params={}, distributions={},
        intermediate_values={20_000: 120.0}, user_attrs={"pruned_at": 20_000, "mean_eval": 120.0},
    )  # fmt: skip
    assert trial_value(pruned, "mean") == 120.0
    assert trial_value(pruned, "time") is None and trial_value(pruned, "final") is None
    assert trial_value(study.trials[0], "time") == -3.5
    line = trial_line(pruned, study, "time")
    assert ": pruned at step 20,000 (mean evaluation 120.00) |" in line, line
    assert "best -3.50" in line
