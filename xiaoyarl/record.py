"""Record a run's best policy playing its env, as an animated GIF or an MP4 video.

Why: a return says how well a policy does, a video shows what it does (a CartPole that
balances by drifting off the screen edge, a Pendulum that spins instead of standing up).

The env is gymnasium's own `env_id` made with `render_mode="rgb_array"`, whatever backend the
run trained on: the torch-native envs share gymnasium's ids and dynamics. One frame is kept per
state visited, the first observation included, so an episode of `n` steps gives `n + 1`
frames. Frames stream to the writer, and at most `MAX_FRAMES` are recorded. GIFs are written
with Pillow (a dependency of matplotlib); MP4s need `imageio` and `imageio-ffmpeg`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import gymnasium
import numpy as np
import torch
from gymnasium import spaces

from xiaoyarl.config_io import load_config
from xiaoyarl.errors import CheckpointError, ConfigError, EnvError, XiaoyaError
from xiaoyarl.policy import Policy, load_policy
from xiaoyarl.train.checkpoint import atomic_output

# A frame of a classic-control env is ~0.7 MB of RGB; 10,000 of them are minutes of video.
MAX_FRAMES = 10_000
ATARI_FPS = 60  # the console's frames a second

VIDEO_FORMATS = (".gif", ".mp4")


def record_video(
    run_dir: str | Path,
    out: str | Path | None = None,
    episodes: int = 1,
    seed: int = 0,
    fps: int | None = None,
) -> Path:
    """Play the best policy of the run in `run_dir` for `episodes` episodes and save the video.

    Episode `i` starts from `env.reset(seed=seed + i)`; the policy is deterministic. `out`
    defaults to `run_dir/policy.gif`; a `.mp4` suffix writes an MP4 instead. `fps` defaults to
    the env's `metadata["render_fps"]`, else 30; for an Atari run, the console's 60 frames a
    second divided by its frame skip (one frame is filmed per step). Returns the path
    written."""
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
    policy = load_policy(run_dir)  # CheckpointError for a missing folder or actor.pt
    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        raise CheckpointError(f"{run_dir} has no config.yaml: it is not a xiaoyarl run folder.")
    config = load_config(config_path)
    env_id = config.env_id

    env = _make_render_env(env_id, config.env_kwargs)
    try:
        obs_shape = env.observation_space.shape
        assert obs_shape is not None  # a Box: GymVecEnv, which trained the policy, needs one
        obs_dim = int(np.prod(obs_shape))
        if obs_dim != policy.state_dim:
            raise CheckpointError(
                f"{env_id} has observations of size {obs_dim}, but the policy in {run_dir} "
                f"expects {policy.state_dim}: the run was not trained on this env."
            )
        atari = (config.env_kwargs or {}).get("atari")
        if isinstance(atari, dict):  # one frame filmed per step of `frame_skip` console frames
            rate = fps or ATARI_FPS / atari["frame_skip"]
        else:
            rate = fps or env.metadata.get("render_fps") or 30
        frames = _play(env, env_id, policy, episodes, seed)
        with atomic_output(out) as partial:
            if out.suffix.lower() == ".gif":
                _write_gif(frames, partial, rate)
            else:
                _write_mp4(frames, partial, rate)
    finally:
        env.close()
    return out


class TorchEnvPlayer(gymnasium.Env):
    """One sub-env of a torch-native env that draws its own observations
    (`render_observation`, e.g. the MinAtar games, whose observation is the whole screen),
    played as a gymnasium env: numpy observations as the policy takes them, and frames."""

    render_mode = "rgb_array"

    def __init__(self, env_id: str, env_kwargs: dict | None) -> None:
        from xiaoyarl.envs.registry import make_env

        self.env = make_env(env_id, 1, backend="torch", env_kwargs=env_kwargs, evaluation=True)
        spec = self.env.spec
        self.metadata = {"render_modes": ["rgb_array"],
                         "render_fps": getattr(self.env, "render_fps", 30)}  # fmt: skip
        self.observation_space = spaces.Box(0, 255, spec.obs_shape, np.uint8)
        self.action_space = spaces.Discrete(spec.action_dim)
        self._shown: torch.Tensor | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):  # noqa: ANN201
        state, info = self.env.reset(seed=seed)
        self._shown = state[0]
        return state[0].numpy(), {}

    def step(self, action):  # noqa: ANN001, ANN201
        state, reward, terminated, truncated, info = self.env.step(torch.as_tensor([action]))
        done = bool(terminated[0] | truncated[0])
        self._shown = info["final_state"][0] if done else state[0]  # not the next episode's
        return state[0].numpy(), float(reward[0]), bool(terminated[0]), bool(truncated[0]), {}

    def render(self) -> np.ndarray:
        return type(self.env).render_observation(self._shown)  # type: ignore[attr-defined]

    def close(self) -> None:
        self.env.close()


def _make_render_env(env_id: str, env_kwargs: dict | None = None) -> gymnasium.Env:
    """gymnasium's `env_id` rendering `rgb_array` frames, or a clear error why it cannot. The
    run's own env: with its kwargs, an Atari game's preprocessing (as evaluated: whole games;
    the video shows the game's own frames) and a Dict observation's packing. A torch-native
    env that draws its own observations is played itself (`TorchEnvPlayer`)."""
    # resolve_gym_id imports the module of a module:Env-v0 id
    from xiaoyarl.envs.atari import atari_settings, gym_kwargs
    from xiaoyarl.envs.gym import is_atari_screen, make_gym_env, make_sub_env, resolve_gym_id
    from xiaoyarl.envs.registry import torch_envs

    if hasattr(torch_envs().get(env_id), "render_observation"):
        return TorchEnvPlayer(env_id, env_kwargs)

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


def _play(
    env: gymnasium.Env, env_id: str, policy: Policy, episodes: int, seed: int
) -> Iterator[np.ndarray]:
    """Frames `(height, width, 3)` uint8 of `episodes` episodes, at most `MAX_FRAMES`."""
    count = 0
    for i in range(episodes):
        obs, info = env.reset(seed=seed + i)
        policy.reset()  # a recurrent policy starts the episode with a fresh hidden state
        done = False
        while True:
            yield _render(env, env_id)
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
            # numpy in, numpy out; an observation as the policy takes it (images stay uint8)
            state = np.asarray(obs).reshape(policy.obs_shape)
            mask = info.get("action_mask") if policy.masked else None
            action = cast(np.ndarray, policy.predict(state, action_mask=mask))
            obs, _, terminated, truncated, info = env.step(_to_env_action(action, env.action_space))
            done = terminated or truncated


def _render(env: gymnasium.Env, env_id: str) -> np.ndarray:
    try:
        frame = env.render()
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


def _to_env_action(action: np.ndarray, space: gymnasium.Space) -> int | np.ndarray:
    """The policy's action in the form `env.step` takes (as `GymVecEnv` converts it)."""
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
