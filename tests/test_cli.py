"""The command line: every bad input gets one clear paragraph, exit 2, and no checkpoint."""

import csv
import json
import textwrap

import pytest

from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.config_io import field_choices, field_docs

BAD_ENV_MODULE = textwrap.dedent(
    """
    import gymnasium as gym
    import numpy as np


    class Bad(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, mode="nan"):
            self.mode, self.t = mode, 0

        def _obs(self):
            if self.mode == "nan" and self.t >= 5:
                return np.full(3, np.nan, np.float32)
            if self.mode == "shape":
                return np.zeros(4, np.float32)
            return np.zeros(3, np.float32)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            return self._obs(), {}

        def step(self, action):
            self.t += 1
            return self._obs(), 1.0, False, False, {}


    gym.register("NanObs-v0", entry_point=Bad, kwargs={"mode": "nan"}, max_episode_steps=50)
    gym.register("WrongShape-v0", entry_point=Bad, kwargs={"mode": "shape"}, max_episode_steps=50)
    """
)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["train", "pp0", "CartPole-v1"], ["unknown algorithm 'pp0'", "did you mean 'ppo'", "a2c"]),
        (["train", "ppo", "CartPol-v1"], ["unknown environment", "CartPole-v1"]),
        (["train", "ppo", "MinAtar/breakout-v1"], ["Did you mean 'MinAtar/Breakout-v1'?"]),
        (["train", "ppo", "cartpole-v1", "--backend", "gymnasium"], ["Did you mean 'CartPole-v1'"]),
        (["train", "ppo", "nomodule_xyz:Env-v0"], ["nomodule_xyz"]),
        (["train", "ppo", "CartPole-v1", "--set", "gamma"], ["name=value"]),
        (["train", "ppo", "CartPole-v1", "--set", "gamm=0.9"], ["unknown config field", "gamma"]),
        (["train", "ppo", "CartPole-v1", "--set", "gamma=2"], ["gamma=2.0", "(0, 1]"]),
        (["train", "ppo", "CartPole-v1", "--set", "learning_rate=-1"], ["learning_rate", "(0, 1)"]),
        (["train", "ppo", "CartPole-v1", "TINY", "--set", "batch_size=100000"], ["batch_size"]),
        (["train", "ppo", "CartPole-v1", "--backend", "torch", "--num-envs", "0"], ["num_envs"]),
        (["train", "ppo", "LunarLanderX-v3", "--backend", "torch"], ["no torch-native env"]),
        (["train", "ppo", "CartPole-v1", "--device", "cuda:7"], ["cuda"]),
        (["train", "ppo", "CartPole-v1", "--config", "missing.yaml"], ["cannot read config"]),
        (["train", "ppo", "bad_env_mod:NanObs-v0", "TINY"], ["NaN", "NanObs-v0"]),
        (["train", "ppo", "bad_env_mod:WrongShape-v0", "TINY"], ["shape", "WrongShape-v0"]),
        (["eval", "no/such/run"], ["does not exist"]),
        (
            ["train", "ppo", "CartPole-v1", "--set", "env_kwargs={foo: 1}"],
            ["takes no argument 'foo'"],
        ),
        (
            ["train", "ppo", "MinAtar/Breakout-v1", "--set", "env_kwargs={sticky_action_prb: 0.0}"],
            ["Did you mean 'sticky_action_prob'?"],
        ),
        (["train", "dqn", "Pendulum-v1"], ["'dqn' cannot act in Pendulum-v1", "sac", "td3"]),
        (["train", "sac", "CartPole-v1"], ["'sac' cannot act", "sac_discrete", "d3qn"]),
        (
            ["train", "sac", "Pendulum-v1", "--set", "buffer_size=1000000000000"],
            ["buffer_size=1,000,000,000,000", "GiB"],
        ),
    ],
)
def test_bad_input_gets_one_clear_error_and_nothing_to_resume(
    tmp_path, args, words, cli, tiny, monkeypatch
):
    args = [arg for word in args for arg in (tiny if word == "TINY" else [word])]  # TINY: `tiny`
    (tmp_path / "bad_env_mod.py").write_text(BAD_ENV_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))  # in this process: no new Python per case
    folder = ["--cwd", "run"] if args[0] == "train" else []
    result = cli(*args, *folder, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "xiaoyarl: error: " in result.stderr  # (gymnasium's own checker may warn before it)
    for word in words:
        assert word in result.stderr
    # nothing half-written for a later --resume (an env that fails in training keeps its folder)
    assert not (tmp_path / "run" / "checkpoint").exists()


def test_train_writes_run_folder_and_summary_json(tmp_path, cli, tiny):
    summary_path = tmp_path / "summary.json"
    result = cli("train", "ppo", "CartPole-v1", *tiny, "--max-steps", "1024", "--eval-every",
                 "512", "--cwd", str(tmp_path / "run"),
                 "--summary-json", str(summary_path))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "sps | eval" in result.stdout  # progress lines
    summary = json.loads(summary_path.read_text())
    for key in ("algo", "env", "backend", "seed", "solved", "steps_to_target",
                "seconds_to_target", "total_steps", "train_seconds", "final_eval_mean",
                "final_eval_std", "steps_per_second"):  # fmt: skip
        assert key in summary
    assert summary["algo"] == "ppo" and summary["backend"] == "torch"
    assert summary["total_steps"] == 1024 and summary["steps_per_second"] > 0
    run = tmp_path / "run"
    for name in ("config.yaml", "actor.pt", "recorder.csv", "learning_curve.png"):
        assert (run / name).is_file(), name
    assert (run / "checkpoint" / "state.pt").is_file()
    rows = (run / "recorder.csv").read_text().splitlines()
    assert rows[0].startswith("step,time,eval_mean,eval_std") and len(rows) == 3

    (run / "learning_curve.png").unlink()
    plotted = cli("plot", str(run))
    assert plotted.returncode == 0 and (run / "learning_curve.png").is_file()


def test_quiet_and_target_return_from_the_command_line(tmp_path, cli, tiny):
    result = cli("train", "a2c", "CartPole-v1", *tiny, "--max-steps", "2048", "--eval-every",
                 "256", "--target-return", "5", "--quiet", "--cwd", str(tmp_path / "r"),
                 "--summary-json", str(tmp_path / "s.json"))  # fmt: skip
    assert result.returncode == 0 and result.stdout == ""
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["solved"] and summary["steps_to_target"] == 256  # any policy scores >= 5
    assert summary["seconds_to_target"] > 0 and summary["stop_reason"] == "target"


def test_list_shows_algorithms_envs_and_fields(cli):
    result = cli("list", "--fields")
    assert result.returncode == 0
    words = ("ppo", "a2c", "qmix", "mappo", "CartPole-v1", "Pendulum-v1", "Acrobot-v1",
             "SpreadDiscrete-v0", "TwoStepGame-v0", "gamma", "horizon_len", "discount factor",
             "{auto, torch, gymnasium, envpool, playground}", "{single, parallel}")  # fmt: skip
    for word in words:
        assert word in result.stdout


def test_config_file_and_gymnasium_backend(tmp_path, cli):
    (tmp_path / "c.yaml").write_text("num_envs: 2\nhorizon_len: 32\nnet_dims: [16]\n")
    result = cli("train", "ppo", "CartPole-v1", "--backend", "gymnasium", "--config",
                 str(tmp_path / "c.yaml"), "--max-steps", "128", "--eval-episodes", "2",
                 "--cwd", str(tmp_path / "run"), "--threads", "1")  # fmt: skip
    assert result.returncode == 0, result.stderr
    saved = (tmp_path / "run" / "config.yaml").read_text()
    assert "backend: gymnasium" in saved and "num_envs: 2" in saved and "- 16" in saved


def test_playground_backend_without_the_extra_or_task_gets_a_clear_error(tmp_path, cli):
    """`--backend playground`: without the extra the error names what to install; with it, an
    unknown task is named. Either way nothing is written."""
    import importlib.util

    result = cli("train", "ppo", "NoSuchTask", "--backend", "playground", "--cwd", "run",
                 cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    if importlib.util.find_spec("mujoco_playground") is None:
        assert "pip install -e '.[playground]'" in result.stderr
    else:
        assert "no task 'NoSuchTask'" in result.stderr
    assert not (tmp_path / "run").exists()


def test_resume_of_a_spent_budget_says_nothing_was_trained_and_how_to_go_on(tmp_path, cli, tiny):
    run = str(tmp_path / "run")
    first = cli("train", "ppo", "CartPole-v1", *tiny, "--max-steps", "512", "--eval-every", "256",
                "--cwd", run)  # fmt: skip
    assert first.returncode == 0, first.stderr
    again = cli("train", "ppo", "CartPole-v1", "--resume", run)
    assert again.returncode == 0, again.stderr
    out = again.stdout + again.stderr
    assert "resumed from step 512" in out
    for words in ("budget of 512 env steps", "already spent", "nothing was trained",
                  "--max-steps"):  # fmt: skip
        assert words in out, out
    more = cli("train", "--resume", run, "--max-steps", "768")  # its config.yaml says the rest
    assert more.returncode == 0 and "nothing was trained" not in more.stdout + more.stderr
    assert "after 768 steps" in more.stdout
    nothing = cli("train", "--resume", str(tmp_path / "none"))
    assert nothing.returncode == 2 and "no run there (its config.yaml is missing)" in nothing.stderr
    bare = cli("train")
    assert bare.returncode == 2 and "name the algorithm and the env" in bare.stderr


def test_resume_of_a_solved_run_says_the_target_was_reached_and_how_to_train_on(
    tmp_path, cli, tiny
):
    run = str(tmp_path / "run")
    first = cli("train", "a2c", "CartPole-v1", *tiny, "--max-steps", "2048", "--eval-every",
                "256", "--target-return", "5", "--cwd", run)  # fmt: skip
    assert first.returncode == 0 and "target 5 reached at step 256" in first.stdout
    again = cli("train", "a2c", "CartPole-v1", "--resume", run)
    assert again.returncode == 0, again.stderr
    out = again.stdout + again.stderr
    for words in ("target 5 was already reached at step 256", "--target-return none"):
        assert words in out, out


def _two_tiny_runs(root):
    """Two seeds of a tiny PPO CartPole run, trained in this process."""
    import torch

    from xiaoyarl import Config, train_agent

    runs = []
    threads = torch.get_num_threads()
    for seed in (0, 1):
        run = root / f"CartPole-v1_ppo_{seed}"
        train_agent(Config(algo="ppo", env_id="CartPole-v1", seed=seed, num_envs=16,
                           horizon_len=16, max_steps=768, eval_every=256, eval_episodes=2,
                           threads=1, cwd=str(run)), log=None)  # fmt: skip
        runs.append(run)
    torch.set_num_threads(threads)
    return runs


def test_plot_draws_several_runs_on_one_figure(tmp_path, cli):
    """`xiaoyarl plot RUN RUN --out FILE`: every run's evaluations (mean, std band) and its
    training-episode returns, labelled by run, on one figure; one run keeps its own curve."""
    from xiaoyarl.train.plots import comparison_figure

    runs = _two_tiny_runs(tmp_path)
    fig = comparison_figure(runs)
    labels = [line.get_label() for ax in fig.axes for line in ax.get_lines()]
    for run in runs:
        assert labels.count(run.name) == 2, labels  # its evaluations and its training episodes
    evals, train = fig.axes
    assert len(evals.collections) >= 2  # a std band per run
    assert "training" in train.get_ylabel() and "evaluation" in evals.get_ylabel()
    out = tmp_path / "both.png"
    result = cli("plot", *map(str, runs), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert out.is_file() and out.stat().st_size > 1000 and str(out) in result.stdout
    one = cli("plot", str(runs[0]))  # one run: its learning_curve.png, as before
    assert one.returncode == 0 and str(runs[0] / "learning_curve.png") in one.stdout


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["train", "ppo", "CartPole-v1", "--set", "gamma", "0.9"], "--set gamma=0.9"),
        (["train", "ppo", "CartPole-v1", "--set", "gamma=0.9", "--set", "net_dims", "[8]"],
         "--set net_dims=[8]"),
        (["population", "ppo", "CartPole-v1", "--set", "gamma", "0.9"], "--set gamma=0.9"),
    ],
)  # fmt: skip
def test_set_without_an_equals_sign_suggests_key_equals_value(args, hint, capsys):
    from xiaoyarl.cli import main

    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"--set takes key=value: did you mean {hint}?" in err, err
    assert "unrecognized arguments" not in err


def test_a_field_given_by_its_flag_and_by_set_is_refused(capsys):
    """`--set max_steps=1e5` silently won over `--max-steps 2000`: one of the two is a mistake."""
    from xiaoyarl.cli import main

    for args, words in (
        (["--max-steps", "2000", "--set", "max_steps=1e5"],
         "--max-steps 2000 and --set max_steps=1e5 both set max_steps; give one of them."),
        (["--target-return", "none", "--set", "target_return=10"],
         "--target-return none and --set target_return=10 both set target_return"),
    ):  # fmt: skip
        assert main(["train", "ppo", "CartPole-v1", *args]) == 2
        assert words in capsys.readouterr().err


def test_a_run_that_does_not_stop_at_its_target_confirms_nothing(tmp_path, cli, tiny):
    """`--target-return none` / stop_at_target=false: nothing stops at the target, so the 50
    confirmation episodes were spent for nothing; the first evaluation at it is still noted."""
    summary = tmp_path / "summary.json"
    run = cli("train", "ppo", "CartPole-v1", *tiny, "--cwd", str(tmp_path / "r"), "--max-steps",
              "512", "--eval-every", "256", "--set", "stop_at_target=false", "--set",
              "target_return=5", "--summary-json", str(summary))  # fmt: skip
    assert run.returncode == 0, run.stderr
    result = json.loads(summary.read_text())
    assert result["stop_reason"] == "max_steps" and result["total_steps"] == 512
    assert result["solved"] and result["steps_to_target"] == 256  # CartPole's returns pass 5
    rows = list(csv.DictReader((tmp_path / "r" / "recorder.csv").open()))
    assert len(rows) == 2 and not any(row.get("confirm_mean") for row in rows)
    assert "confirm" not in run.stdout


def test_the_start_up_names_the_config_file_a_run_starts_from(tmp_path, cli, tiny):
    """As it names a preset; a run from `--config best.yaml` did not say so."""
    best = tmp_path / "best.yaml"
    best.write_text("gamma: 0.95\n")
    run = cli("train", "ppo", "CartPole-v1", *tiny, "--config", str(best), "--max-steps", "256",
              "--cwd", str(tmp_path / "r"))  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert f"settings: {best}, then the command line" in run.stdout


def test_every_argument_of_every_command_says_what_it_is():
    """`record --help` and `eval --help` showed options without a word of help."""
    import argparse

    from xiaoyarl.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    silent = [f"{name} {action.option_strings or action.dest}"
              for name, parser in commands.choices.items() for action in parser._actions
              if action.help is None and not isinstance(action, argparse._HelpAction)]  # fmt: skip
    assert silent == []


def test_list_fields_names_the_automatic_values_per_algorithm(capsys):
    """Fields that default to null say what they become for each algorithm (and backend or
    device where it matters), computed by `Config.resolve` rather than copied."""
    from xiaoyarl import Config
    from xiaoyarl.cli import main

    assert main(["list", "--fields"]) == 0
    out = capsys.readouterr().out
    assert "_auto_defaults" not in out

    def block(field):
        lines = out[out.index(f"\n  {field} ") :].splitlines()[1:]
        return "\n".join([lines[0]] + [line for line in lines[1:] if line.startswith("      ")])

    fields = {name: ("ppo", "sac", "a2c", "dqn") for name in ("learning_rate", "batch_size",
                                                              "horizon_len")}  # fmt: skip
    fields |= {"repeat_times": ("ppo", "a2c", "pqn"), "replay_ratio": ("sac", "dqn", "redq")}
    for field, algos in fields.items():
        text = block(field)
        for algo in algos:
            values = {getattr(resolve_config(Config(algo=algo), batched, device), field)
                      for batched in (True, False) for device in ("cpu", "cuda")}  # fmt: skip
            line = next((line for line in text.splitlines()
                         if algo in line.split(":")[0].replace(",", " ").split()), "")  # fmt: skip
            for value in values:
                assert f"{value:g}" in line, (field, algo, value, text)
    assert "torch-native" in block("horizon_len") and "gymnasium" in block("horizon_len")


# The flags every command that starts runs takes, spelled alike (#28: one CLI grammar).
RUN_FLAGS = ("--cwd", "--backend", "--device", "--threads", "--seed", "--set", "--config",
             "--resume", "--summary-json", "--quiet")  # fmt: skip


def tiny_population(tiny: list[str]) -> list[str]:
    """A tiny vmapped population of two PPO members (`tiny`: the tiny run's options)."""
    return ["population", "ppo", "CartPole-v1", "--members", "2", "--population-backend", "vmap",
            "--max-steps", "1024", "--generation-steps", "1024", "--select-fraction", "0",
            "--target-return", "none", *tiny]  # fmt: skip


def _options(command: str) -> dict:
    """`xiaoyarl COMMAND`'s options: option string -> its argparse action."""
    import argparse

    from xiaoyarl.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {s: a for a in commands.choices[command]._actions for s in a.option_strings}


def test_train_and_population_take_the_run_flags_alike(capsys):
    """`population` takes each run flag of `train` with the same spelling, type, default and
    metavar, and its --help lists them (not the old --out)."""
    import re

    from xiaoyarl.cli import main

    train, population = _options("train"), _options("population")
    for flag in RUN_FLAGS:
        assert flag in train and flag in population, flag
        a, b = train[flag], population[flag]
        assert type(a) is type(b) and a.help and b.help, flag
        for what in ("dest", "type", "default", "nargs", "const", "choices", "metavar"):
            assert getattr(a, what) == getattr(b, what), (flag, what)
    with pytest.raises(SystemExit):
        main(["population", "--help"])
    shown = set(re.findall(r"--[a-z][a-z-]*", capsys.readouterr().out))
    assert set(RUN_FLAGS) <= shown, set(RUN_FLAGS) - shown
    assert "--out" not in shown  # still accepted for a release, no longer offered


def test_train_options_of_config_fields_take_the_fields_help_and_choices():
    train, docs, choices = _options("train"), field_docs(), field_choices()
    for name in ("vector_mode", "runner", "num_workers", "restart_workers"):
        action = train[f"--{name.replace('_', '-')}"]
        assert action.help == docs[name] and action.choices == choices.get(name), name
    assert train["--backend"].choices == _options("check-env")["--backend"].choices
    assert train["--backend"].choices == choices["backend"]


def test_options_named_as_config_fields_set_those_fields(tmp_path):
    """Each option whose name is a Config field's sets it; a population's --cwd is its own folder,
    not its members' run folder."""
    from xiaoyarl.cli import _population_settings, _start_config, build_parser

    args = build_parser().parse_args(["train", "PPO", "Pendulum-v1", "--num-envs", "3", "--runner",
                                 "parallel", "--cwd", "r", "--target-return", "none"])  # fmt: skip
    config = _start_config(args)
    assert (config.algo, config.env_id, config.num_envs, config.runner, config.cwd) == (
        "ppo", "Pendulum-v1", 3, "parallel", "r")  # fmt: skip
    assert config.target_return is None and config.stop_at_target is False
    args = build_parser().parse_args(["population", "ppo", "Pendulum-v1", "--seed", "4", "--cwd",
                                 str(tmp_path / "pop")])  # fmt: skip
    config, _, folder = _population_settings(args)
    assert config.seed == 4 and config.cwd is None and folder == tmp_path / "pop"


def test_population_out_still_works_with_a_deprecation_note(tmp_path, cli, tiny):
    out = tmp_path / "pop"
    result = cli(*tiny_population(tiny), "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr[-2000:]
    note = "--out is deprecated and will be removed in the next release: use --cwd"
    lines = [line for line in result.stderr.splitlines() if "deprecated" in line]
    assert len(lines) == 1 and note in lines[0], result.stderr
    assert (out / "population.yaml").is_file() and (out / "members" / "member-01").is_dir()


def test_population_refuses_out_and_cwd_together(tmp_path, capsys, tiny):
    from xiaoyarl.cli import main

    a, b = tmp_path / "a", tmp_path / "b"
    assert main([*tiny_population(tiny), "--out", str(a), "--cwd", str(b)]) == 2
    err = capsys.readouterr().err
    assert "xiaoyarl: error: " in err and "--out" in err and "--cwd" in err, err
    assert not a.exists() and not b.exists()


def test_population_backend_and_run_flags_reach_every_member(tmp_path):
    """--backend (and the other run flags) set the members' config, as they set train's; the
    population's folder is --cwd and each member's run folder lies under it."""
    from xiaoyarl.cli import _population_settings, build_parser
    from xiaoyarl.population.schemes import Population

    folder = tmp_path / "pop"
    args = build_parser().parse_args(["population", "ppo", "CartPole-v1", "--backend", "gymnasium",
                                 "--device", "cpu", "--threads", "2", "--seed", "3", "--set",
                                 "gamma=0.9", "--cwd", str(folder)])  # fmt: skip
    config, pop, where = _population_settings(args)
    assert where == folder
    Population.create_or_join(where, config, pop, resume=False, joining=False)
    member = Population(folder).member_config("member-01", 3001, {}, 1024)
    assert (member.backend, member.device, member.threads, member.gamma) == (
        "gymnasium", "cpu", 2, 0.9)  # fmt: skip
    assert member.cwd == str(folder / "members" / "member-01")


def test_population_resume_names_its_folder_as_train_does(tmp_path):
    """`--resume DIR`, or `--resume` with --cwd (or the default folder of ALGO ENV), continue
    a population; --resume DIR with another --cwd is refused, as for train."""
    from xiaoyarl.cli import _population_settings, build_parser
    from xiaoyarl.errors import ConfigError
    from xiaoyarl.population.schemes import Population

    folder = tmp_path / "pop"
    args = build_parser().parse_args(["population", "ppo", "CartPole-v1", "--backend", "gymnasium",
                                 "--cwd", str(folder)])  # fmt: skip
    config, pop, where = _population_settings(args)
    Population.create_or_join(where, config, pop, resume=False, joining=False)
    for argv in (["--resume", str(folder)], ["--resume", "--cwd", str(folder)],
                 ["--resume", str(folder), "--cwd", str(folder)]):  # fmt: skip
        config, _, where = _population_settings(build_parser().parse_args(["population", *argv]))
        assert where == folder and config.backend == "gymnasium", argv
    elsewhere = ["population", "--resume", str(folder), "--cwd", str(tmp_path / "other")]
    with pytest.raises(ConfigError, match="two folders"):
        _population_settings(build_parser().parse_args(elsewhere))
    with pytest.raises(ConfigError, match="no population"):
        _population_settings(build_parser().parse_args(["population", "--resume", str(tmp_path)]))
