"""`recorder.csv` keeps every column the README promises, whichever evaluation comes first."""

import csv

import torch

from xiaoyarl.envs.base import EnvSpec
from xiaoyarl.train.evaluator import Evaluator
from xiaoyarl.train.loggers import append_csv_row


class _OneStepEnv:
    """A stub VecEnv whose one-step episodes all pay `value["reward"]`."""

    def __init__(self, num_envs, value):
        self.spec = EnvSpec("OneStep", num_envs, 1, 2, True, 1, None)
        self.device = torch.device("cpu")
        self.value = value

    def reset(self, seed=None):
        return torch.zeros(self.spec.num_envs, 1), {}

    def step(self, action):
        n = self.spec.num_envs
        done = torch.ones(n, dtype=torch.bool)
        reward = torch.full((n,), self.value["reward"])
        return torch.zeros(n, 1), reward, done, ~done, {"final_state": torch.zeros(n, 1)}

    def close(self):
        pass


def _rows(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


def test_confirmation_columns_are_kept_when_the_first_evaluation_had_none(tmp_path):
    """The first evaluation misses the target (no confirmation), the second reaches it: its
    confirmation is in recorder.csv, with an empty cell in the first row."""
    value = {"reward": 1.0}
    evaluator = Evaluator(_OneStepEnv(4, value), tmp_path, 5.0, 0, "t",
                          make_confirm_env=lambda: _OneStepEnv(8, value))  # fmt: skip

    def policy(state):
        return torch.zeros(state.shape[0], dtype=torch.int64)

    first = evaluator.evaluate(policy, dict, 100, 1.0, {"critic_loss": 0.5})
    value["reward"] = 6.0
    second = evaluator.evaluate(policy, dict, 200, 2.0, {"critic_loss": 0.25})
    assert first.confirmed is None and second.confirmed is True
    fields, rows = _rows(tmp_path / "recorder.csv")
    for name in ("step", "time", "eval_mean", "eval_std", "confirm_mean", "confirm_std",
                 "critic_loss"):  # fmt: skip
        assert name in fields, fields
    assert [r["confirm_mean"] for r in rows] == ["", "6"]
    assert [r["confirm_std"] for r in rows] == ["", "0"]
    assert [r["critic_loss"] for r in rows] == ["0.5", "0.25"]


def test_a_column_that_appears_later_widens_the_header(tmp_path):
    """Off-policy agents log no losses before `learning_starts`: the first evaluation's row has
    none, and the losses of every later one must still be written (old rows get empty cells)."""
    path = tmp_path / "recorder.csv"
    append_csv_row(path, {"step": 100, "time": 1.0, "eval_mean": 1.0, "eval_std": 0.0},
                   ["step", "time", "eval_mean", "eval_std"])  # fmt: skip
    append_csv_row(path, {"step": 200, "time": 2.0, "eval_mean": 2.0, "eval_std": 0.5,
                          "critic_loss": 0.125, "actor_loss": -3.0},
                   ["step", "time", "eval_mean", "eval_std"])  # fmt: skip
    fields, rows = _rows(path)
    assert fields == ["step", "time", "eval_mean", "eval_std", "actor_loss", "critic_loss"]
    assert [r["step"] for r in rows] == ["100", "200"]
    assert [r["critic_loss"] for r in rows] == ["", "0.125"]
    assert [r["actor_loss"] for r in rows] == ["", "-3"]
    assert not list(tmp_path.glob(".*tmp*"))  # the rewrite leaves no temporary file
