"""Every preset file (`xiaoyarl/configs/`, `xiaoyarl/presets.py`) is named in the presets' tables,
says where its values come from, and is a valid config for every (algorithm, env id) that takes
it; the tuner's search spaces (`configs/tune/`) are not presets."""

from __future__ import annotations

import pytest

from xiaoyarl.agents.settings import check_config
from xiaoyarl.config_io import config_from_preset, load_config
from xiaoyarl.presets import ALGO_PRESETS, CONFIG_DIR, ID_PRESETS, PRESETS, TASKS, preset_path

NAMED = {*PRESETS.values(), *ALGO_PRESETS.values(), *ID_PRESETS.values()}
FILES = sorted(p.relative_to(CONFIG_DIR).as_posix() for p in CONFIG_DIR.glob("*/*.yaml")
               if p.parent.name != "tune")  # fmt: skip
# a preset's opening comment names its provenance: measured here (BENCHMARKS.md), found by a
# search (`xiaoyarl tune`), or a publication's settings (a paper's, RL Zoo's files)
PROVENANCE = ("BENCHMARKS.md", "xiaoyarl tune", "et al.", "paper", "RL Zoo")


def test_every_preset_file_is_named_and_every_named_file_exists():
    assert set(FILES) == NAMED


@pytest.mark.parametrize("name", FILES)
def test_every_preset_names_its_provenance_and_loads(name):
    path = CONFIG_DIR / name
    header = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    assert len(header) >= 3, f"{name}: a preset explains its values in an opening comment"
    assert any(word in "\n".join(header) for word in PROVENANCE), f"{name}: no provenance"
    load_config(path)  # every value fits its Config field


def pairs() -> list[tuple[str, str, dict | None]]:
    """(algorithm, env id, env kwargs) of every pair a task preset applies to."""
    found = []
    for algo, task in {*PRESETS, *((a, t) for a, _, t in ID_PRESETS)}:
        for env_id, kinds in TASKS.items():
            for continuous, kind in enumerate(kinds):
                if kind == task:
                    found.append((algo, env_id, {"continuous_actions": True} if continuous
                                  else None))  # fmt: skip
    return sorted(found, key=str)


@pytest.mark.parametrize(("algo", "env_id", "kwargs"), pairs())
def test_every_task_preset_is_a_valid_config_of_its_pairs(algo, env_id, kwargs):
    assert preset_path(algo, env_id, kwargs) is not None
    config = config_from_preset(algo, env_id, kwargs)
    assert (config.algo, config.env_id) == (algo, env_id)
    check_config(config)


@pytest.mark.parametrize("algo", sorted(ALGO_PRESETS))
def test_every_algorithm_preset_is_a_valid_config(algo):
    config = config_from_preset(algo, "Pendulum-v1")
    check_config(config)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_population_and_tune_start_from_the_task_preset_like_train(tmp_path, cli):
    """`xiaoyarl population` and `xiaoyarl tune` take the pair's task preset as `train` does
    (said at start; --no-preset keeps the defaults); the searched fields are the search's."""
    import yaml

    tiny = ["--max-steps", "3200", "--eval-every", "3200", "--eval-episodes", "2"]
    done = cli("population", "mappo", "SpreadDiscrete-v0", "--members", "1", *tiny,
               "--cwd", str(tmp_path / "pop"), timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "task preset" in done.stdout and "spread_mappo.yaml" in done.stdout
    saved = yaml.safe_load(next((tmp_path / "pop" / "members").glob("*/config.yaml")).read_text())
    assert saved["gamma"] == 0.95 and saved["num_envs"] == 128  # the preset's
    space = tmp_path / "space.yaml"
    space.write_text("learning_rate: {choice: [0.001]}\n")
    for name, extra, gamma in (("tune", (), 0.95), ("tune_defaults", ("--no-preset",), 0.99)):
        done = cli("tune", "mappo", "SpreadDiscrete-v0", "--trials", "1", "--space", str(space),
                   *tiny, *extra, "--cwd", str(tmp_path / name), timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert ("task preset" in done.stdout) == (not extra)
        trial = yaml.safe_load((tmp_path / name / "trials" / "0000" / "config.yaml").read_text())
        assert trial["gamma"] == gamma and trial["learning_rate"] == 0.001
