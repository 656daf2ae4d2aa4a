"""Record a run's best policy playing its env, as an animated GIF or an MP4 video.

Why: a return says how well a policy does, a video shows what it does (a CartPole that
balances by drifting off the screen edge, a Pendulum that spins instead of standing up).

Which env is filmed, and what draws it:

- A run whose env draws its own pictures is played on that env, made as evaluation makes it
  (`build_env`: one sub-env, the run's backend and env_kwargs, `evaluation=True`), the policy
  acting as the evaluator acts; single- and multi-agent runs alike (`VecPlayer`). These are the
  torch-native envs that draw their states (`render_state`: the MinAtar games,
  CartPoleNoVelocity-v1, PendulumNoVelocity-v1, SpreadDiscrete-v0 and SpreadContinuous-v0),
  each filmed in the state a step reached before its auto-reset, and PettingZoo envs
  (`module:env_fn`, e.g. mpe2's), made with `render_mode="rgb_array"` and pictured by their
  own `render()` (`render_frame`).
- Any other run is played on gymnasium's own `env_id` made with `render_mode="rgb_array"`,
  whatever backend it trained on (`GymPlayer`): gymnasium's envs, with the run's kwargs, an Atari
  game's preprocessing and a Dict observation's packing, and the torch-native classic-control
  envs, which share gymnasium's ids and dynamics.
- A run of neither kind cannot be filmed, and the error says so: a torch-native env that draws
  nothing and that gymnasium does not know (Chase-v0, StockTrading-v0, TwoStepGame-v0), or an
  env that cannot render `rgb_array` frames.

One frame is kept per state visited, the first observation included, so an episode of `n`
steps gives `n + 1` frames. Frames stream to the writer, and at most `MAX_FRAMES` are recorded.
GIFs are written with Pillow (a dependency of matplotlib); MP4s need `imageio` and
`imageio-ffmpeg`.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, cast

import gymnasium
import numpy as np
import torch
from gymnasium import spaces

from xiaoyarl.agents.settings import load_saved_config
from xiaoyarl.config import Config
from xiaoyarl.envs.base import VecEnv
from xiaoyarl.envs.multi.base import MultiAgentEnvSpec, MultiAgentVecEnv
from xiaoyarl.errors import CheckpointError, ConfigError, EnvError, XiaoyaError
from xiaoyarl.policy import MultiAgentPolicy, Policy, load_policy
from xiaoyarl.train.checkpoint import atomic_output

# A frame of a classic-control env is ~0.7 MB of RGB; 10,000 of them are minutes of video.
MAX_FRAMES = 10_000
ATARI_FPS = 60  # the console's frames a second
DEFAULT_FPS = 30  # for an env that states no frame rate

VIDEO_FORMATS = (".gif", ".mp4")


def record_video(
    run_dir: str | Path,
    out: str | Path | None = None,
    episodes: int = 1,
    seed: int = 0,
    fps: int | None = None,
    deterministic: bool | None = None,
) -> Path:
    """Play the best policy of the run in `run_dir` for `episodes` episodes and save the video.

    Episode `i` starts from `env.reset(seed=seed + i)`; the policy takes its best actions, or
    (`deterministic=False`) samples them as the agent explores; None: as the run evaluated
    (its `eval_deterministic`). `out`
    defaults to `run_dir/policy.gif`; a `.mp4` suffix writes an MP4 instead. `fps` defaults to
    the env's own frame rate (gymnasium's `metadata["render_fps"]`, a torch-native env's or an
    adapter's `render_fps`), else 30; for an Atari run, the console's 60 frames a second divided
    by its frame skip (one frame is filmed per step). Returns the path written."""
    run_dir = Path(run_dir)
    out = Path(out) if out is not None else run_dir / "policy.gif"
    if out.suffix.lower() not in VIDEO_FORMATS:
        raise ConfigError(
            f"cannot write a video to {out}: the file name must end in "
            f"{' or '.join(VIDEO_FORMATS)}."
        )
    if episodes < 1:
        raise ConfigError(f"episodes must be at least 1, got {episodes}.")
    if out.suffix.lower() == ".mp4":
        _check_mp4_writer_installed()
    # frames are drawn off-screen: SDL (gymnasium's renderers) needs no display, and says so
    # ("XDG_RUNTIME_DIR is invalid or not set") on a machine without one unless told
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    policy = load_policy(run_dir)  # CheckpointError for a missing folder or actor.pt
    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        raise CheckpointError(f"{run_dir} has no config.yaml: it is not a xiaoyarl run folder.")
    config = load_saved_config(config_path)
    player = _make_player(config, policy, run_dir)
    player.deterministic = config.eval_deterministic if deterministic is None else deterministic
    try:
        frames = _play(player, config.env_id, episodes, seed)
        with atomic_output(out) as partial:
            if out.suffix.lower() == ".gif":
                _write_gif(frames, partial, fps or player.fps)
            else:
                _write_mp4(frames, partial, fps or player.fps)
    finally:
        player.close()
    return out


class Player(Protocol):
    """The run's policy playing one env: `reset(seed)` starts an episode, then `frame()` (the
    picture of the state reached) and `step()` (one action, the best or, where `deterministic`
    is False, a sample; True when the episode ended) take turns. `fps`: the env's own frames a
    second."""

    policy: Policy
    fps: float
    deterministic: bool

    def reset(self, seed: int) -> None: ...
    def frame(self) -> np.ndarray: ...
    def step(self) -> bool: ...
    def close(self) -> None: ...


class GymPlayer:
    """The policy on a gymnasium env rendering `rgb_array` frames: numpy observations as the
    policy takes them, its actions converted as `GymVecEnv` converts them."""

    def __init__(self, env: gymnasium.Env, policy: Policy, fps: float) -> None:
        self.env, self.policy, self.fps = env, policy, fps
        self.deterministic = True
        self.obs: np.ndarray
        self.info: dict = {}

    def reset(self, seed: int) -> None:
        self.obs, self.info = self.env.reset(seed=seed)

    def frame(self) -> np.ndarray:
        return self.env.render()  # type: ignore[return-value]  # rgb_array: an array

    def step(self) -> bool:
        # numpy in, numpy out; an observation as the policy takes it (images stay uint8)
        state = np.asarray(self.obs).reshape(self.policy.obs_shape)
        mask = self.info.get("action_mask") if self.policy.masked else None
        action = cast(np.ndarray, self.policy.predict(state, self.deterministic, mask))
        env_action = _to_env_action(action, self.env.action_space)
        self.obs, _, terminated, truncated, self.info = self.env.step(env_action)
        return bool(terminated or truncated)

    def close(self) -> None:
        self.env.close()


class VecPlayer:
    """The policy on the one sub-env of the run's own env (a `VecEnv` or `MultiAgentVecEnv`),
    acting as the evaluator acts: torch tensors, actions as agents see them (`[-1, 1]` where
    continuous), masks where the env gives them. Frames are the env's own: `render_frame(0)`,
    or `render_state` of the state shown, which after a step is `info["final_state"]` (the
    state the step reached, before any auto-reset)."""

    def __init__(self, env: VecEnv | MultiAgentVecEnv, policy: Policy, fps: float) -> None:
        self.env, self.policy, self.fps = env, policy, fps
        self.deterministic = True
        self.multi = isinstance(env.spec, MultiAgentEnvSpec)
        self.state: torch.Tensor  # (1, *obs_shape), or (1, num_agents, obs_dim)
        self.info: dict = {}
        self.shown: torch.Tensor  # one state: an observation, or the global state

    def reset(self, seed: int) -> None:
        self.state, self.info = self.env.reset(seed=seed)
        self.shown = (self.info["state"] if self.multi else self.state)[0]

    def frame(self) -> np.ndarray:
        render_frame = getattr(self.env, "render_frame", None)
        if render_frame is not None:
            return render_frame(0)
        # _make_player plays an env on a VecPlayer only if it has one of the two methods
        return self.env.render_state(self.shown)  # type: ignore[union-attr]

    @torch.no_grad()
    def step(self) -> bool:
        act = self.policy.vec_policy(self.deterministic)  # as the evaluator acts
        action = act(self.state, self.info.get("avail_actions" if self.multi else "action_mask"))
        self.state, _, terminated, truncated, self.info = self.env.step(action)
        self.shown = self.info["final_state"][0]  # as the step left it, before any auto-reset
        return bool(terminated[0] | truncated[0])

    def close(self) -> None:
        self.env.close()


def _make_player(config: Config, policy: Policy, run_dir: Path) -> Player:
    """The player that films the run of `config` (see the module docstring), or a clear error
    why the run cannot be filmed."""
    from xiaoyarl.envs.build import build_env
    from xiaoyarl.envs.multi.registry import is_multi_agent, is_pettingzoo_id
    from xiaoyarl.envs.registry import is_torch_native

    env_id = config.env_id
    multi = is_multi_agent(env_id)
    if multi or is_torch_native(env_id, config.backend):
        pettingzoo = is_pettingzoo_id(env_id)
        if pettingzoo:  # PettingZoo envs draw when asked, as gymnasium's do
            kwargs = {**(config.env_kwargs or {}), "render_mode": "rgb_array"}
            config = dataclasses.replace(config, env_kwargs=kwargs)
        try:
            env = build_env(config, 1, torch.device("cpu"), config.backend, 0, evaluation=True)
        except EnvError as error:
            if pettingzoo:
                error.add_note(
                    "record makes a PettingZoo env with render_mode='rgb_array' to film it; an "
                    "env that does not take it cannot be filmed."
                )
            raise
        if hasattr(env, "render_state") or hasattr(env, "render_frame"):
            _check_policy_fits(env, policy, run_dir)
            return VecPlayer(env, policy, getattr(env, "render_fps", None) or DEFAULT_FPS)
        env.close()
        if multi or env_id not in gymnasium.registry:
            instead = "" if multi else ", and gymnasium has no env of that id to draw it instead"
            raise EnvError(
                f"environment '{env_id}' cannot be filmed: its env, {type(env).__name__}, draws "
                f"no pictures of its states (it has no render_state){instead}."
            )
    gym_env = _make_render_env(env_id, config.env_kwargs)
    obs_shape = gym_env.observation_space.shape
    assert obs_shape is not None  # a Box: GymVecEnv, which trained the policy, needs one
    obs_dim = int(np.prod(obs_shape))
    if isinstance(policy, MultiAgentPolicy) or obs_dim != policy.state_dim:
        gym_env.close()
        raise CheckpointError(
            f"{env_id} has observations of size {obs_dim}, but the policy in {run_dir} "
            f"expects {policy.state_dim}: the run was not trained on this env."
        )
    atari = (config.env_kwargs or {}).get("atari")
    if isinstance(atari, dict):  # one frame filmed per step of `frame_skip` console frames
        return GymPlayer(gym_env, policy, ATARI_FPS / atari["frame_skip"])
    return GymPlayer(gym_env, policy, gym_env.metadata.get("render_fps") or DEFAULT_FPS)


def _check_policy_fits(env: VecEnv | MultiAgentVecEnv, policy: Policy, run_dir: Path) -> None:
    """Refuse a policy whose observations are not the env's (closing the env)."""
    spec = env.spec
    if isinstance(spec, MultiAgentEnvSpec):
        shape: tuple[int, ...] = (spec.num_agents, spec.obs_dim)
    else:
        shape = tuple(spec.obs_shape)
    if isinstance(policy, MultiAgentPolicy):
        expects: tuple[int, ...] = (policy.num_agents, policy.obs_dim)
    else:
        expects = tuple(policy.obs_shape)
    if isinstance(spec, MultiAgentEnvSpec) != isinstance(policy, MultiAgentPolicy) or (
        shape != expects
    ):
        env.close()
        raise CheckpointError(
            f"{spec.name} has observations of shape {shape}, but the policy in {run_dir} "
            f"expects {expects}: the run was not trained on this env."
        )


def _make_render_env(env_id: str, env_kwargs: dict | None = None) -> gymnasium.Env:
    """gymnasium's `env_id` rendering `rgb_array` frames, or a clear error why it cannot. The
    run's own env: with its kwargs, an Atari game's preprocessing (as evaluated: whole games;
    the video shows the game's own frames) and a Dict observation's packing."""
    # resolve_gym_id imports the module of a module:Env-v0 id
    from xiaoyarl.envs.atari import atari_settings, gym_kwargs
    from xiaoyarl.envs.gym import is_atari_screen, make_gym_env, make_sub_env, resolve_gym_id

    registered_id, kwargs = resolve_gym_id(env_id, env_kwargs)
    keep = kwargs.pop("obs_keys", None)
    atari = None
    if is_atari_screen(registered_id, kwargs):
        atari = atari_settings(kwargs.pop("atari", None))
        kwargs = gym_kwargs(registered_id, kwargs) if atari else kwargs
    try:
        with warnings.catch_warnings():  # gymnasium's warning; the error below says it plainly
            warnings.filterwarnings("ignore", message=".*not in the possible render_modes")
            env = make_sub_env(env_id, registered_id, {**kwargs, "render_mode": "rgb_array"},
                               atari, True, keep)  # fmt: skip
    except EnvError as error:  # an env without rendering may refuse the render_mode argument
        plain = make_gym_env(env_id, registered_id, kwargs)  # if this fails too, its error says why
        plain.close()
        if "rgb_array" in plain.metadata.get("render_modes", []):
            raise
        raise _cannot_render_error(env_id, plain) from error
    if env.render_mode != "rgb_array" or "rgb_array" not in env.metadata.get("render_modes", []):
        env.close()
        raise _cannot_render_error(env_id, env)
    return env


def _cannot_render_error(env_id: str, env: gymnasium.Env) -> EnvError:
    modes = list(env.metadata.get("render_modes", []))
    return EnvError(
        f"environment '{env_id}' cannot render rgb_array frames (its render modes: "
        f"{modes or 'none'}), so it cannot be recorded. Register it with 'rgb_array' in "
        f"metadata['render_modes'] and a render() that returns the frame."
    )


def _play(player: Player, env_id: str, episodes: int, seed: int) -> Iterator[np.ndarray]:
    """Frames `(height, width, 3)` uint8 of `episodes` episodes, at most `MAX_FRAMES`."""
    count = 0
    for i in range(episodes):
        player.reset(seed + i)
        player.policy.reset()  # a recurrent policy starts the episode with a fresh hidden state
        done = False
        while True:
            yield _render(player, env_id)
            count += 1
            if done:
                break
            if count == MAX_FRAMES:
                warnings.warn(
                    f"stopped recording {env_id} at {MAX_FRAMES} frames (episode {i + 1} of "
                    f"{episodes}).",
                    stacklevel=2,
                )
                return
            done = player.step()


def _render(player: Player, env_id: str) -> np.ndarray:
    try:
        frame = player.frame()
    except (gymnasium.error.DependencyNotInstalled, ImportError) as e:
        raise XiaoyaError(
            f"cannot render environment '{env_id}': a package its renderer needs is not "
            f"installed ({e}). Install the renderer with `pip install -e '.[render]'`."
        ) from None
    frame = np.asarray(frame)
    if frame.ndim != 3 or frame.shape[-1] != 3 or frame.dtype != np.uint8:
        raise EnvError(
            f"environment '{env_id}' rendered a frame of shape {frame.shape} and dtype "
            f"{frame.dtype}; a video needs RGB frames (height, width, 3) of uint8."
        )
    return frame


def _to_env_action(action: Any, space: gymnasium.Space) -> Any:
    """The policy's action in the form `env.step` takes (as `GymVecEnv` converts it); a Dict or
    Tuple action space's is the policy's already (`Policy.predict`)."""
    if isinstance(space, spaces.Dict | spaces.Tuple):
        return action
    if isinstance(space, spaces.Discrete):
        return int(action) + int(space.start)
    if isinstance(space, spaces.MultiDiscrete):  # component indices from each start
        return (np.asarray(action) + space.start).astype(space.dtype)
    return np.asarray(action, dtype=space.dtype).reshape(space.shape)


def _write_gif(frames: Iterator[np.ndarray], path: Path, fps: float) -> None:
    """An endlessly looping GIF. Pillow merges a frame identical to the one before it into
    that frame's duration, so the frame count can be lower but the total duration is exact."""
    from PIL import Image

    # fast octree: a 256-colour palette per frame in a third of the time of Pillow's default
    images = (Image.fromarray(frame).quantize(method=Image.Quantize.FASTOCTREE) for frame in frames)
    first = next(images)
    first.save(
        path,
        format="GIF",
        save_all=True,
        append_images=images,  # consumed lazily: frames are not all held as RGB
        duration=round(1000 / fps),  # milliseconds; GIF keeps hundredths of a second
        loop=0,
    )


def _check_mp4_writer_installed() -> None:
    try:
        import imageio  # noqa: F401
        import imageio_ffmpeg  # noqa: F401
    except ImportError as e:
        raise XiaoyaError(
            f"writing an MP4 needs the packages imageio and imageio-ffmpeg ({e}). Install them "
            f"with `pip install -e '.[render]'`, or write a .gif instead."
        ) from None


def _write_mp4(frames: Iterator[np.ndarray], path: Path, fps: float) -> None:
    import imageio

    # macro_block_size=2: keep the env's frame size (e.g. 600 x 400) instead of resizing it to
    # a multiple of 16; H.264 in yuv420p still needs even sides
    # not `with ... as writer`: imageio's stub types the `__enter__` result as the base class
    writer = imageio.get_writer(path, format="FFMPEG", fps=fps, macro_block_size=2)
    with writer:
        for frame in frames:
            writer.append_data(frame)
