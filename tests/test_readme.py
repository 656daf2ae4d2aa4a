"""The README's Python examples run, on a tiny budget, so the documentation cannot rot."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_python_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, tmp_path, monkeypatch):
    code = re.sub(r"max_steps=[\d_]+", "max_steps=2048", BLOCKS[index])  # the tiny budget
    code = re.sub(r"num_envs=4096", "num_envs=64", code).replace("(4096,", "(64,")
    code = code.replace("torch.rand(4096,", "torch.rand(64,")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"README.md python block {index}", "exec"), {"__name__": "__readme__"})
    if "train_agent" in code:
        assert (tmp_path / "runs" / "quickstart" / "actor.pt").is_file()
