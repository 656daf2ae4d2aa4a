"""Atari games (the Arcade Learning Environment, through ale-py and gymnasium) with the standard
preprocessing, applied to every `ALE/<Game>-v5` and `<Game>NoFrameskip-v4` id.

The preprocessing of Mnih et al., "Human-level control through deep reinforcement learning",
Nature 2015, as Stable-Baselines3's and CleanRL's Atari scripts apply it, from gymnasium's own
wrappers (`AtariPreprocessing`, `FrameStackObservation`) and three small ones below:

- `noop_max` (30): up to that many no-op actions at the start of each game;
- `frame_skip` (4): each action repeated over 4 frames, the observation the pixel-wise max of the
  last two (Atari sprites flicker);
- `screen_size` (84): frames in grayscale, resized to 84x84;
- `frame_stack` (4): the last 4 frames stacked, `(4, 84, 84)` uint8;
- `fire_reset` (true): press FIRE to start a game (or a life) in games that wait for it (in
  evaluation, which plays whole games, after each lost life too);
- for training only, `episodic_life` (true): a lost life ends the learner's episode (the game
  goes on from there, it is not reset), and `clip_rewards` (true): rewards clipped to their sign.

Evaluation plays whole games (all lives) and reports the game's own, unclipped score, as papers
do. The settings are `env_kwargs: {atari: {...}}`, filled with these defaults in the run's
config.yaml; `env_kwargs: {atari: false}` gives the raw env. `ALE/<Game>-v5` keeps v5's sticky
actions (an action repeats the previous one with probability 0.25, Machado et al., "Revisiting
the Arcade Learning Environment", JAIR 2018); `NoFrameskip-v4` ids have none.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation, TransformReward

from xiaoyarl.errors import EnvError

ATARI_DEFAULTS: dict[str, Any] = {
    "noop_max": 30,
    "frame_skip": 4,
    "screen_size": 84,
    "frame_stack": 4,
    "fire_reset": True,
    "episodic_life": True,
    "clip_rewards": True,
}
# steps of FIRE after a lost life in evaluation (`FireAfterLostLife`)
FIRE_STEPS = 3
MAX_FRAMES = 108_000  # ALE's own limit on a game's frames (30 minutes at 60 frames a second)


def atari_settings(given: Any) -> dict[str, Any] | None:
    """The preprocessing settings of `env_kwargs["atari"]`: the defaults where it is absent or
    true, with its own values over them where it is a mapping; None where it is false (the raw
    env). An unknown setting gets an `EnvError` naming it and the known ones."""
    if given is False:
        return None
    if given is None or given is True:
        return dict(ATARI_DEFAULTS)
    if not isinstance(given, dict):
        raise EnvError(
            f"env_kwargs atari={given!r}: expected a mapping of preprocessing settings, true "
            f"(the defaults) or false (the raw env)."
        )
    unknown = sorted(set(given) - set(ATARI_DEFAULTS))
    if unknown:
        raise EnvError(
            f"env_kwargs atari has unknown setting(s) {', '.join(unknown)}; the settings are "
            f"{', '.join(ATARI_DEFAULTS)}."
        )
    return {**ATARI_DEFAULTS, **given}


class EpisodicLife(gymnasium.Wrapper):
    """A lost life ends the episode (terminated) for the learner; the next `reset` then goes on
    from there with a no-op step, and only resets the game once it is really over."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.lives = 0
        self.game_over = True

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = self.env.unwrapped.ale.lives()  # type: ignore[attr-defined]
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        if self.game_over or kwargs.get("seed") is not None:
            obs, info = self.env.reset(**kwargs)
        else:  # a life was lost: go on from there
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        self.game_over = False
        self.lives = self.env.unwrapped.ale.lives()  # type: ignore[attr-defined]
        return obs, info


class FireReset(gymnasium.Wrapper):
    """Press FIRE after each reset, in games whose second action is FIRE (Breakout, ...): they
    wait for it to start, and an agent may take long to find that out."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        self.env.reset(**kwargs)
        obs, _, terminated, truncated, info = self.env.step(1)
        if terminated or truncated:
            obs, info = self.env.reset(**kwargs)
        return obs, info


class FireAfterLostLife(gymnasium.Wrapper):
    """Evaluation plays whole games, so no reset follows a lost life: press FIRE there, as the
    training env's reset does, without ending the episode (a greedy policy that never picks FIRE
    would otherwise wait until the game's time limit), for `FIRE_STEPS` steps. The FIRE steps'
    rewards are added."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.lives = 0

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self.env.unwrapped.ale.lives()  # type: ignore[attr-defined]
        if 0 < lives < self.lives and not (terminated or truncated):
            # FIRE for FIRE_STEPS steps: with v5's sticky actions one step's press is missed
            # now and then (2 of 120 lost lives in Breakout), and the game then waits until
            # its time limit; two steps' presses were never missed in 120
            for _ in range(FIRE_STEPS):
                obs, more, terminated, truncated, info = self.env.step(1)
                reward = float(reward) + float(more)
                if terminated or truncated:
                    break
            lives = self.env.unwrapped.ale.lives()  # type: ignore[attr-defined]
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        self.lives = self.env.unwrapped.ale.lives()  # type: ignore[attr-defined]
        return obs, info


def clip_reward(reward: Any) -> float:
    """The sign of a reward: -1, 0 or 1."""
    return float(np.sign(reward))


def wants_fire(env: gymnasium.Env) -> bool:
    """Whether the game's second action is FIRE (the games that wait for it)."""
    meanings = env.unwrapped.get_action_meanings()  # type: ignore[attr-defined]
    return len(meanings) >= 3 and meanings[1] == "FIRE"


def gym_kwargs(env_id: str, kwargs: dict) -> dict:
    """`gymnasium.make`'s kwargs of a preprocessed game: `AtariPreprocessing` skips frames
    itself, so ALE's own frame skip is 1."""
    return {**kwargs, "frameskip": 1} if env_id.startswith("ALE/") else kwargs


def wrap_atari(env: gymnasium.Env, settings: dict[str, Any], evaluation: bool) -> gymnasium.Env:
    """`env` (ALE, frame skip 1) with the preprocessing of `settings`; `evaluation` leaves out
    what is for training only (episodic lives, clipped rewards)."""
    try:
        env = AtariPreprocessing(env, noop_max=settings["noop_max"],
                                 frame_skip=settings["frame_skip"],
                                 screen_size=settings["screen_size"])  # fmt: skip
    except gymnasium.error.DependencyNotInstalled as e:  # OpenCV resizes the frames
        raise EnvError(
            "the Atari preprocessing resizes frames with OpenCV, which is not installed: "
            "`pip install -e '.[atari]'` (or `pip install opencv-python-headless`)."
        ) from e
    if settings["episodic_life"] and not evaluation:
        env = EpisodicLife(env)
    if settings["fire_reset"] and wants_fire(env):
        if evaluation:  # whole games: FIRE after each lost life too
            env = FireAfterLostLife(env)
        env = FireReset(env)
    if settings["clip_rewards"] and not evaluation:
        env = TransformReward(env, clip_reward)
    if settings["frame_stack"] > 1:
        env = FrameStackObservation(env, settings["frame_stack"])
    return env


# --- a game's whole state as plain data, for bit-exact resumes ---------------------------------
# Wrapper attributes that describe the env rather than hold its state (spaces, specs, kwargs).
_NOT_STATE = {"env", "_saved_kwargs", "_cached_spec", "_metadata", "_action_space",
              "_observation_space", "padding_value"}  # fmt: skip
_PLAIN = (bool, int, float, str, type(None), np.ndarray)


def atari_state(env: gymnasium.Env) -> dict:
    """One preprocessed game's whole state as plain data (tensors, numbers, strings): the
    emulator's with its random generators (ALE's `clone_state(include_rng=True)`, which holds
    the sticky actions' draws), the numpy generator of the no-op starts, and each wrapper's
    counters and frame buffers (lives, the max-pooled frames, the frame stack). A run resumed
    from it plays on exactly as the run that saved it (`load_atari_state`); it reads with the
    checkpoint's `weights_only=True`."""
    wrappers = []
    layer = env
    while isinstance(layer, gymnasium.Wrapper):
        wrappers.append({name: _plain(value) for name, value in vars(layer).items()
                         if name not in _NOT_STATE and _is_state(value)})  # fmt: skip
        layer = layer.env
    game: Any = layer.unwrapped
    emulator = bytearray(game.clone_state(include_rng=True).__getstate__())
    return {"wrappers": wrappers, "emulator": torch.frombuffer(emulator, dtype=torch.uint8),
            "np_random": game.np_random.bit_generator.state}  # fmt: skip


def load_atari_state(env: gymnasium.Env, state: dict) -> None:
    """Put `env` (built with the same settings) in the state `atari_state` saved."""
    from ale_py import ALEState

    layer = env
    for saved in state["wrappers"]:
        if not isinstance(layer, gymnasium.Wrapper):
            raise EnvError("the saved Atari state has more wrappers than this env: it was "
                           "saved with other preprocessing settings.")  # fmt: skip
        for name, value in saved.items():
            setattr(layer, name, _restored(getattr(layer, name), value))
        layer = layer.env
    game: Any = layer.unwrapped
    game.restore_state(ALEState(state["emulator"].numpy().tobytes()))
    game.np_random.bit_generator.state = state["np_random"]


def _is_state(value: Any) -> bool:
    if isinstance(value, _PLAIN):
        return True
    return isinstance(value, list | tuple | deque) and all(isinstance(v, np.ndarray) for v in value)


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy())
    if isinstance(value, list | tuple | deque):  # frame buffers
        return {"frames": [torch.from_numpy(v.copy()) for v in value]}
    return value


def _restored(current: Any, saved: Any) -> Any:
    if isinstance(saved, torch.Tensor):
        return saved.numpy().copy()
    if isinstance(saved, dict):
        frames = [t.numpy().copy() for t in saved["frames"]]
        if isinstance(current, deque):
            return deque(frames, maxlen=current.maxlen)
        return type(current)(frames)
    return saved
