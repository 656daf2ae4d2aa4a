"""Tests of `GymVecEnv`'s messages: images, missing simulators, Atari, modules in the cwd."""

from __future__ import annotations

import importlib.util
import os
import sys
import textwrap

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces

from xiaoyarl.envs import make_env
from xiaoyarl.envs.gym import GymVecEnv, is_atari_id, is_image_space
from xiaoyarl.errors import EnvError

NS = "xiaoyarl_message_test"


class BoxObs(gymnasium.Env):
    """An env whose observation space is the Box given to the constructor."""

    action_space = spaces.Discrete(2)

    def __init__(self, shape=(4,), dtype=np.float32):
        self.observation_space = spaces.Box(0, 255, shape, dtype)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.low.copy(), {}

    def step(self, action):
        return self.observation_space.low.copy(), 0.0, False, False, {}


def fake_box2d_lander(**kwargs):
    """What gymnasium's LunarLander does without Box2D (its advice names another command)."""
    try:
        raise ModuleNotFoundError("No module named 'Box2D'", name="Box2D")
    except ModuleNotFoundError as e:
        raise gymnasium.error.DependencyNotInstalled(
            "Box2D is not installed, you can install it by run `pip install swig` followed by "
            '`pip install "gymnasium[box2d]"`'
        ) from e


def needs_weirdsim(**kwargs):
    raise ModuleNotFoundError("No module named 'weirdsim'", name="weirdsim")


@pytest.fixture(scope="module", autouse=True)
def registered_envs():
    ids = {
        f"{NS}/BoxObs-v0": BoxObs,
        f"{NS}/FakeLander-v0": fake_box2d_lander,
        f"{NS}/Weird-v0": needs_weirdsim,
    }
    for env_id, entry_point in ids.items():
        gymnasium.register(env_id, entry_point=entry_point, max_episode_steps=5)
    yield
    for env_id in ids:
        del gymnasium.registry[env_id]


# --- image observations -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("shape", "dtype"), [((8, 8, 3), np.uint8), ((16, 16), np.uint8), ((3, 8, 8), np.float32)]
)
def test_image_observations_keep_their_shape_and_dtype(shape, dtype):
    """Images cross to torch as they are: uint8 stays uint8 (the network scales it), the shape
    stays the image's (the encoder finds its channels)."""
    with GymVecEnv(
        f"{NS}/BoxObs-v0", num_envs=2, env_kwargs={"shape": shape, "dtype": dtype}
    ) as env:
        assert env.spec.obs_shape == shape and env.spec.state_dim == int(np.prod(shape))
        state, _ = env.reset(seed=0)
        next_state, reward, _, _, info = env.step(torch.zeros(2, dtype=torch.int64))
        expected = torch.uint8 if dtype == np.uint8 else torch.float32
        for x in (state, next_state, info["final_state"]):
            assert x.shape == (2, *shape) and x.dtype == expected
        assert env.spec.obs_dtype == expected and reward.dtype == torch.float32


@pytest.mark.parametrize(("shape", "dtype"), [((4,), np.uint8), ((3, 4), np.float32)])
def test_flat_and_2d_float_observations_are_not_images(shape, dtype):
    assert not is_image_space(spaces.Box(0, 1, shape, dtype))
    with GymVecEnv(f"{NS}/BoxObs-v0", env_kwargs={"shape": shape, "dtype": dtype}) as env:
        assert env.spec.state_dim == int(np.prod(shape))


# --- missing simulators -------------------------------------------------------------------------
def assert_one_fix(message: str, extra: str) -> None:
    assert message.count("pip install") == 1, message
    assert f"`pip install -e '.[{extra}]'`" in message
    assert "swig" not in message and "gymnasium[box2d]" not in message


def test_missing_box2d_gives_only_the_project_extra():
    with pytest.raises(EnvError) as excinfo:
        GymVecEnv(f"{NS}/FakeLander-v0")
    message = str(excinfo.value)
    assert_one_fix(message, "box2d")
    assert "module 'Box2D' is not installed" in message


def test_missing_box2d_for_the_real_lunar_lander():
    if importlib.util.find_spec("Box2D") is not None:
        pytest.skip("Box2D is installed")
    with pytest.raises(EnvError) as excinfo:
        GymVecEnv("LunarLander-v3")
    assert_one_fix(str(excinfo.value), "box2d")
    assert "'Box2D'" in str(excinfo.value)


def test_missing_unknown_module_keeps_the_exception_text():
    with pytest.raises(EnvError) as excinfo:
        GymVecEnv(f"{NS}/Weird-v0")
    message = str(excinfo.value)
    assert "module 'weirdsim' is not installed" in message
    assert "No module named 'weirdsim'" in message and "pip install" not in message


# --- Atari --------------------------------------------------------------------------------------
@pytest.mark.parametrize("env_id", ["ALE/Pong-v5", "PongNoFrameskip-v4", "Breakout-v4"])
def test_atari_id_without_ale_py_says_what_to_install(env_id, monkeypatch):
    monkeypatch.setitem(sys.modules, "ale_py", None)  # as if ale-py were not installed
    for registered in [i for i in gymnasium.registry if is_atari_id(i)]:
        monkeypatch.delitem(gymnasium.registry, registered)
    with pytest.raises(EnvError) as excinfo:
        GymVecEnv(env_id)
    message = str(excinfo.value)
    for words in [env_id, "Atari", "`pip install ale-py`", "ROMs"]:
        assert words in message
    assert "unknown environment" not in message


def test_atari_id_with_a_missing_ale_py_module(monkeypatch):
    monkeypatch.setitem(sys.modules, "ale_py", None)
    with pytest.raises(EnvError, match="pip install ale-py"):
        GymVecEnv("ale_py:ALE/Pong-v5")


def test_atari_id_with_ale_py_installed_is_found_without_importing_it():
    """ale-py registers its games only once imported: the adapter imports it for the user, so
    the id works as given, with its pixels kept as uint8."""
    pytest.importorskip("ale_py")
    with GymVecEnv("ALE/Pong-v5") as env:
        assert env.spec.obs_dtype == torch.uint8 and len(env.spec.obs_shape) in (2, 3)
    env = GymVecEnv("ALE/Pong-v5", num_envs=1, env_kwargs={"obs_type": "ram"})  # the hint works
    assert env.spec.state_dim == 128
    env.close()


def test_atari_id_that_ale_py_does_not_have():
    pytest.importorskip("ale_py")
    with pytest.raises(EnvError) as excinfo:
        GymVecEnv("Pong-ram-v4")  # ale-py 0.10+ has no '-ram' ids
    message = str(excinfo.value)
    assert "registers no such game" in message and "obs_type: ram" in message
    with pytest.raises(EnvError, match="Did you mean 'ALE/Pong-v5'"):
        GymVecEnv("ALE/Pongg-v5")


def test_atari_ids_are_recognised():
    assert is_atari_id("ALE/Pong-v5") and is_atari_id("SpaceInvadersNoFrameskip-v4")
    assert is_atari_id("Breakout-ram-v4") and is_atari_id("Pong-ramDeterministic-v4")
    assert not is_atari_id("CartPole-v1") and not is_atari_id("Pongo-v1")
    with pytest.raises(EnvError, match="unknown environment 'Pongo-v1'"):
        GymVecEnv("Pongo-v1")


# --- 'module:Env-v0' from the current directory -------------------------------------------------
MODULE = textwrap.dedent(
    """
    import gymnasium
    import numpy as np
    from gymnasium import spaces

    class Flat(gymnasium.Env):
        observation_space = spaces.Box(-1, 1, (3,), np.float32)
        action_space = spaces.Discrete(2)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            return np.zeros(3, np.float32), {}

        def step(self, action):
            return np.zeros(3, np.float32), 1.0, False, False, {}

    gymnasium.register(__name__ + "/Flat-v0", entry_point=Flat, max_episode_steps=7)
    """
)


@pytest.fixture
def cwd_module(tmp_path, monkeypatch):
    """A module name whose file is in a fresh current directory that is not on sys.path."""
    name = f"xiaoyarl_cwd_mod_{tmp_path.name.replace('-', '_')}"
    monkeypatch.chdir(tmp_path)
    # a copy without the current directory, restored (with whatever was appended) afterwards
    cwd = os.getcwd()
    kept = [p for p in sys.path if p not in ("", ".", cwd, str(tmp_path))]
    monkeypatch.setattr(sys, "path", kept)
    yield name
    sys.modules.pop(name, None)
    for env_id in [k for k in gymnasium.registry if k.startswith(f"{name}/")]:
        del gymnasium.registry[env_id]


def test_module_in_the_current_directory_is_imported(cwd_module, tmp_path):
    (tmp_path / f"{cwd_module}.py").write_text(MODULE)
    with make_env(f"{cwd_module}:{cwd_module}/Flat-v0", num_envs=2, backend="gymnasium") as env:
        assert env.spec.state_dim == 3 and env.spec.max_step == 7
        state, _ = env.reset(seed=0)
        assert state.shape == (2, 3)
    assert sys.path[-1] == os.getcwd()  # appended last: never shadows installed packages


def test_module_in_the_current_directory_that_raises_keeps_its_error(cwd_module, tmp_path):
    (tmp_path / f"{cwd_module}.py").write_text("raise RuntimeError('broken on import')\n")
    with pytest.raises(EnvError) as excinfo:
        make_env(f"{cwd_module}:{cwd_module}/Flat-v0", backend="gymnasium")
    message = str(excinfo.value)
    assert f"importing module '{cwd_module}' failed" in message
    assert "RuntimeError: broken on import" in message
    assert os.getcwd() not in sys.path  # only a successful import keeps the directory


def test_module_missing_everywhere_still_fails_clearly(cwd_module):
    with pytest.raises(EnvError) as excinfo:
        make_env(f"{cwd_module}:Flat-v0", backend="gymnasium")
    message = str(excinfo.value)
    assert f"importing module '{cwd_module}' failed (ModuleNotFoundError" in message
    assert "current directory" in message
    assert os.getcwd() not in sys.path
