"""The README's examples run, on a tiny budget, so the documentation cannot rot: every Python
block, and the commands of its "Tools for a finished run" block on a freshly trained run."""

import re
import shlex
from pathlib import Path

import pytest
from helpers import TINY, cli

README = Path(__file__).resolve().parent.parent / "README.md"
TEXT = README.read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)
TOOLS = re.search(r"### Tools for a finished run\n\n```bash\n(.*?)```", TEXT, flags=re.S)


def test_readme_has_python_examples():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, tmp_path, monkeypatch):
    code = re.sub(r"max_steps=[\d_]+", "max_steps=2048", BLOCKS[index])  # the tiny budget
    code = re.sub(r"num_envs=4096", "num_envs=64", code).replace("(4096,", "(64,")
    code = code.replace("torch.rand(4096,", "torch.rand(64,")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"README.md python block {index}", "exec"), {"__name__": "__readme__"})
    if "train_agent" in code:
        assert list((tmp_path / "runs").glob("*/actor.pt"))


def test_readme_tools_for_a_finished_run(tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("pygame")
    commands = [line.split("#")[0].strip() for line in TOOLS.group(1).splitlines()]
    commands = [shlex.split(c)[1:] for c in commands if c]  # without the leading `xiaoyarl`
    assert [c[0] for c in commands] == ["eval", "plot", "plot", "record", "export", "check-env"]
    for seed in ("0", "1"):
        trained = cli("train", "ppo", "CartPole-v1", *TINY, "--max-steps", "512", "--eval-every",
                      "256", "--seed", seed, "--cwd", f"runs/CartPole-v1_ppo_{seed}",
                      cwd=tmp_path)  # fmt: skip
        assert trained.returncode == 0, trained.stderr
    for args in commands:
        done = cli(*args, cwd=tmp_path)
        assert done.returncode == 0, (args, done.stderr)
    run = tmp_path / "runs" / "CartPole-v1_ppo_0"
    for name in ("policy.gif", "policy.onnx", "learning_curve.png"):
        assert (run / name).is_file(), name
    assert (tmp_path / "seeds.png").stat().st_size > 0


def test_readme_tuning_commands_run_on_a_tiny_budget(tmp_path):
    """The commands of the README's "Tuning" block, in order, with tiny budgets."""
    pytest.importorskip("optuna")
    block = re.search(r"### Tuning[^\n]*\n\n((?:    .*\n)+)", TEXT).group(1)
    lines = [line.split("#")[0].strip() for line in block.splitlines()]
    commands = [shlex.split(line)[1:] for line in lines if line.startswith("xiaoyarl")]
    assert [c[0] for c in commands] == ["tune", "train", "train"]
    tiny = {"--trials": "2", "--max-steps": "1024", "--eval-every": "512"}
    for args in commands:
        args = [tiny.get(prev, a) for prev, a in zip(["", *args[:-1]], args, strict=True)]
        if "--max-steps" not in args:
            args += ["--max-steps", "1024"]
        done = cli(*args, "--eval-episodes", "2", cwd=tmp_path, timeout=600)
        assert done.returncode == 0, (args, done.stderr)
    assert (tmp_path / "runs" / "tune_Pendulum-v1_ppo" / "best.yaml").is_file()
