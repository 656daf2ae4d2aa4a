"""Tests of `check_env`: healthy envs pass; each deliberately broken env gets its own error."""

from __future__ import annotations

import sys
import textwrap
import warnings

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces

from xiaoyarl.envs import TORCH_ENVS
from xiaoyarl.envs.check import Problem, check_env, format_report
from xiaoyarl.envs.classic import CartPoleEnv, PendulumEnv
from xiaoyarl.errors import ConfigError

NS = "xiaoyarl_check_test"  # namespace of the broken gymnasium envs registered below
LIMIT = 10  # their time limit, so that every check runs only LIMIT + 5 steps


class Healthy(gymnasium.Env):
    """Observation [t / 10, u] with u ~ U(-1, 1) drawn on reset from the seeded np_random."""

    observation_space = spaces.Box(-10.0, 10.0, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.u = 0, self.np_random.uniform(-1, 1)
        return self._obs(), {}

    def _obs(self):
        return np.array([self.t / 10, self.u], dtype=np.float32)

    def step(self, action):
        self.t += 1
        return self._obs(), float(action), False, False, {}


class NanObs(Healthy):
    def _obs(self):
        obs = super()._obs()
        return obs * np.nan if self.t >= 3 else obs


class WrongDtype(Healthy):
    def _obs(self):
        return super()._obs().astype(np.float64)


class WrongShape(Healthy):
    def _obs(self):
        return np.zeros(3, dtype=np.float32)


class IgnoresSeed(Healthy):
    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.u = 0, np.random.default_rng().uniform(-1, 1)  # not from self.np_random
        return self._obs(), {}


class ArrayReward(Healthy):
    def step(self, action):
        obs, _, terminated, truncated, info = super().step(action)
        return obs, np.array([1.0, 2.0]), terminated, truncated, info


class TimeLimitAsTermination(Healthy):
    def step(self, action):
        obs, reward, _, truncated, info = super().step(action)
        return obs, reward, self.t >= LIMIT, truncated, info  # the old `done` at the time limit


class ImageObs(Healthy):
    observation_space = spaces.Box(0, 255, (8, 8, 3), np.uint8)

    def _obs(self):  # the step count in the first pixel, the seeded draw in the second
        obs = np.zeros((8, 8, 3), dtype=np.uint8)
        obs[0, 0, 0], obs[0, 1, 0] = self.t, round(100 * (self.u + 1))
        return obs


class StepRaises(Healthy):
    def step(self, action):
        if self.t >= 2:
            raise RuntimeError("boom in the dynamics")
        return super().step(action)


class OutOfBounds(Healthy):
    def _obs(self):
        return np.array([self.t * 2.0, self.u], dtype=np.float32)  # t * 2 > 10 after step 5


class OldApiStep(Healthy):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated or truncated, info


BROKEN = [
    Healthy,
    NanObs,
    WrongDtype,
    WrongShape,
    IgnoresSeed,
    ArrayReward,
    TimeLimitAsTermination,
    ImageObs,
    StepRaises,
    OutOfBounds,
    OldApiStep,
]


@pytest.fixture(scope="module", autouse=True)
def registered_envs():
    for cls in BROKEN:
        gymnasium.register(f"{NS}/{cls.__name__}-v0", entry_point=cls, max_episode_steps=LIMIT)
    yield
    for cls in BROKEN:
        del gymnasium.registry[f"{NS}/{cls.__name__}-v0"]


def errors(problems: list[Problem]) -> list[str]:
    return [p.message for p in problems if p.severity == "error"]


def warnings_of(problems: list[Problem]) -> list[str]:
    return [p.message for p in problems if p.severity == "warning"]


def check(name: str) -> list[Problem]:
    return check_env(f"{NS}/{name}-v0", num_envs=2)


# --- healthy envs -------------------------------------------------------------------------------
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
@pytest.mark.parametrize("backend", ["torch", "gymnasium"])
def test_classic_envs_have_no_problems(env_id, backend):
    problems = check_env(env_id, backend=backend)
    assert problems == [], format_report(env_id, problems)


def test_healthy_custom_env_has_no_problems():
    assert check("Healthy") == []


def test_module_env_id_is_checked(tmp_path, monkeypatch):
    name = f"xiaoyarl_check_module_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            f"""
            import gymnasium
            import numpy as np
            from gymnasium import spaces

            class Flat(gymnasium.Env):
                observation_space = spaces.Box(-1, 1, (2,), np.float32)
                action_space = spaces.Discrete(2)

                def reset(self, seed=None, options=None):
                    super().reset(seed=seed)
                    return np.zeros(2, np.float32), {{}}

                def step(self, action):
                    return np.full(2, np.nan, np.float32), 0.0, False, False, {{}}

            gymnasium.register("{name}/Flat-v0", entry_point=Flat, max_episode_steps=5)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        problems = check_env(f"{name}:{name}/Flat-v0", num_envs=2)
    finally:
        sys.modules.pop(name, None)
        gymnasium.registry.pop(f"{name}/Flat-v0", None)
    assert any("from step() 1 contains NaN" in m for m in errors(problems))


# --- broken gymnasium envs ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("NanObs", ["observation from step() 3", "NaN or inf"]),
        ("WrongDtype", ["dtype float64", "observation space has dtype float32"]),
        ("WrongShape", ["shape (3,)", "observation space has shape (2,)"]),
        ("IgnoresSeed", ["not deterministic given its seed", "reset(seed=0)", "np_random"]),
        ("ArrayReward", ["reward", "numpy array with shape (2,)", "one real number"]),
        ("TimeLimitAsTermination", ["time limit (10 steps", "terminated=True", "truncated"]),
        ("StepRaises", ["step() raised at step 3: RuntimeError: boom in the dynamics."]),
        ("OldApiStep", ["returned 4 values", "old gym API"]),
    ],
)
def test_broken_env_reports_its_error(name, words):
    problems = check(name)
    assert all(isinstance(p, Problem) and p.severity in ("error", "warning") for p in problems)
    matching = [m for m in errors(problems) if all(w in m for w in words)]
    assert matching, format_report(name, problems)


@pytest.mark.parametrize("name", ["NanObs", "TimeLimitAsTermination", "StepRaises"])
def test_gymnasium_check_env_passes_what_this_checker_is_kept_for(name):
    """Why check.py keeps its own raw-env checks (its comment says so): gymnasium's check_env
    steps once, so it passes these broken envs, which `check_env` reports as errors."""
    from gymnasium.utils.env_checker import check_env as gymnasium_check_env

    env = gymnasium.make(f"{NS}/{name}-v0", disable_env_checker=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gymnasium_check_env(env.unwrapped, skip_render_check=True)  # raises nothing
    finally:
        env.close()
    assert errors(check(name)), name


def test_observation_outside_bounds_is_only_a_warning():
    problems = check("OutOfBounds")
    assert errors(problems) == []
    assert any("outside the observation space's bounds" in m for m in warnings_of(problems))


def test_image_env_passes_with_its_shape_and_dtype():
    """An image env is usable: the raw and the VecEnv checks pass, the latter with the
    observations kept as (8, 8, 3) uint8."""
    problems = check("ImageObs")
    assert errors(problems) == [], format_report("ImageObs", problems)


# --- broken torch-native envs -------------------------------------------------------------------
class NoAutoReset(PendulumEnv):
    max_step = 20

    def step(self, action):
        _, reward, terminated, truncated, info = super().step(action)
        return info["final_state"], reward, terminated, truncated, info  # the new state is lost


class NeverTruncates(PendulumEnv):
    max_step = 20

    def step(self, action):
        state, reward, terminated, truncated, info = super().step(action)
        return state, reward, terminated, torch.zeros_like(truncated), info


class Float64Reward(CartPoleEnv):
    def step(self, action):
        state, reward, terminated, truncated, info = super().step(action)
        return state, reward.double(), terminated, truncated, info


class UnseededStart(PendulumEnv):
    def _sample_initial(self, n):
        return torch.rand(n, 2) * 2 - 1  # the global generator, not self.generator


@pytest.mark.parametrize(
    ("cls", "words"),
    [
        (NoAutoReset, ["equals info['final_state']", "was not reset"]),
        (NeverTruncates, ["reached spec.max_step = 20", "neither terminated nor truncated"]),
        (Float64Reward, ["reward from step() has dtype torch.float64, expected torch.float32"]),
        (UnseededStart, ["VecEnv is not deterministic given its seed", "self.generator"]),
    ],
)
def test_broken_torch_env_reports_its_error(monkeypatch, cls, words):
    monkeypatch.setitem(TORCH_ENVS, "Broken-v0", cls)
    problems = check_env("Broken-v0", num_envs=3, steps=25)
    matching = [m for m in errors(problems) if all(w in m for w in words)]
    assert matching, format_report("Broken-v0", problems)


class Counted(Healthy):
    """A healthy env that counts the steps taken in all its instances."""

    steps = 0

    def _obs(self):
        return np.array([self.t % 100 / 10, self.u], dtype=np.float32)  # within the bounds

    def step(self, action):
        Counted.steps += 1
        return super().step(action)


def test_a_long_time_limit_is_not_stepped_through_by_default():
    """An Atari game's limit is 27,000 steps: the check runs at most DEFAULT_STEPS random steps
    per env (the raw env, then the VecEnv twice), not limit + 5 (it took 10 minutes on Pong)."""
    from xiaoyarl.envs.check import DEFAULT_STEPS, SEEDING_STEPS

    gymnasium.register(f"{NS}/Counted-v0", entry_point=Counted, max_episode_steps=1_000_000)
    try:
        assert check_env(f"{NS}/Counted-v0", num_envs=2) == []
        # the raw env, its seeding replay (twice), the VecEnv's two runs of 2 sub-envs each
        assert Counted.steps == DEFAULT_STEPS + 2 * SEEDING_STEPS + 2 * 2 * DEFAULT_STEPS
        Counted.steps = 0
        assert check_env(f"{NS}/Counted-v0", num_envs=2, steps=30) == []  # asked for: as asked
        assert Counted.steps == 30 + 2 * 30 + 2 * 2 * 30
    finally:
        del gymnasium.registry[f"{NS}/Counted-v0"]


# --- arguments and the report -------------------------------------------------------------------
def test_unknown_env_is_reported_not_raised():
    problems = check_env("NoSuchEnv-v0")
    assert (
        len(errors(problems)) == 1 and "unknown environment 'NoSuchEnv-v0'" in problems[0].message
    )


def test_bad_arguments_raise():
    with pytest.raises(ConfigError, match="backend"):
        check_env("CartPole-v1", backend="jax")
    with pytest.raises(ConfigError, match="num_envs"):
        check_env("CartPole-v1", num_envs=0)


def test_format_report():
    assert format_report("X-v0", []) == "check_env('X-v0'): no problems found."
    report = format_report(
        "X-v0", [Problem("warning", "w1"), Problem("error", "e1"), Problem("error", "e2")]
    )
    assert report.splitlines() == [
        "check_env('X-v0'): 2 error(s), 1 warning(s)",
        "  ERROR: e1",
        "  ERROR: e2",
        "  warning: w1",
    ]
