"""`record_video`: a GIF (or MP4) of the run's policy, one frame per state visited."""

from __future__ import annotations

import sys

import gymnasium
import numpy as np
import pytest

from xiaoyarl import CheckpointError, Config, ConfigError, EnvError, XiaoyaError, load_policy
from xiaoyarl.config_io import save_config
from xiaoyarl.record import record_video

Image = pytest.importorskip("PIL.Image")


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_run):
    pytest.importorskip("pygame")  # gymnasium's classic-control renderer: the `render` extra
    return {name: tiny_run(name) for name in ("ppo-CartPole", "ppo-Pendulum")}


def episode_lengths(run_dir, env_id: str, episodes: int, seed: int) -> list[int]:
    """Steps per episode of the run's policy on gymnasium's env, episode `i` seeded `seed + i`:
    the slow, obvious replay that the video must show."""
    policy = load_policy(run_dir)
    env = gymnasium.make(env_id)
    lengths = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        steps, done = 0, False
        while not done:
            action = policy(obs)
            action = int(action) if policy.if_discrete else action
            obs, _, terminated, truncated, _ = env.step(action)
            steps, done = steps + 1, terminated or truncated
        lengths.append(steps)
    return lengths


def render_size(env_id: str) -> tuple[int, int]:
    """(width, height) of the env's rgb_array frames."""
    env = gymnasium.make(env_id, render_mode="rgb_array")
    env.reset(seed=0)
    height, width, _ = env.render().shape
    env.close()
    return width, height


def gif_frames(path) -> tuple[int, int, tuple[int, int]]:
    """(frames stored, total duration in ms, size). Pillow stores a frame identical to the one
    before as extra duration of that frame, so the total duration counts every frame."""
    with Image.open(path) as gif:
        durations = []
        for i in range(gif.n_frames):
            gif.seek(i)
            durations.append(gif.info["duration"])
        return gif.n_frames, sum(durations), gif.size


def test_cartpole_gif_shows_every_state_of_each_episode(runs):
    run = runs["ppo-CartPole"]
    lengths = episode_lengths(run, "CartPole-v1", episodes=2, seed=3)
    path = record_video(run, episodes=2, seed=3)
    assert path == run / "policy.gif"
    frames = sum(n + 1 for n in lengths)  # the first observation, then one per step
    stored, duration, size = gif_frames(path)
    assert duration == frames * 20  # CartPole's render_fps is 50: 20 ms a frame
    assert frames // 2 < stored <= frames
    assert size == render_size("CartPole-v1") == (600, 400)


def test_pendulum_gif_at_a_chosen_fps(runs, tmp_path):
    run = runs["ppo-Pendulum"]
    (length,) = episode_lengths(run, "Pendulum-v1", episodes=1, seed=0)
    assert length == 200  # Pendulum only ends at its time limit
    path = record_video(run, tmp_path / "pendulum.gif", fps=25)
    stored, duration, size = gif_frames(path)
    assert duration == (length + 1) * 40
    assert (length + 1) // 2 < stored <= length + 1
    assert size == render_size("Pendulum-v1")


def test_mp4_holds_exactly_one_frame_per_state(runs, tmp_path):
    imageio = pytest.importorskip("imageio")
    pytest.importorskip("imageio_ffmpeg")
    run = runs["ppo-CartPole"]
    (length,) = episode_lengths(run, "CartPole-v1", episodes=1, seed=7)
    path = record_video(run, tmp_path / "cartpole.mp4", seed=7)
    with imageio.get_reader(path, format="FFMPEG") as reader:
        assert reader.count_frames() == length + 1
        assert reader.get_meta_data()["size"] == render_size("CartPole-v1")
        assert reader.get_meta_data()["fps"] == 50


def test_recording_stops_at_the_frame_cap(runs, tmp_path, monkeypatch):
    monkeypatch.setattr("xiaoyarl.record.MAX_FRAMES", 5)
    with pytest.warns(UserWarning, match="stopped recording CartPole-v1 at 5 frames"):
        path = record_video(runs["ppo-CartPole"], tmp_path / "capped.gif", episodes=3)
    assert gif_frames(path)[1] == 5 * 20


class NoFrames(gymnasium.Env):
    """An env that renders nothing and does not take a render_mode argument."""

    metadata = {"render_modes": []}
    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(4, np.float32), {}

    def step(self, action):
        return np.zeros(4, np.float32), 0.0, True, False, {}


class HumanOnly(NoFrames):
    """Takes a render_mode argument, but has no rgb_array among its render modes."""

    metadata = {"render_modes": ["human"]}

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode


@pytest.mark.parametrize("env_class", [NoFrames, HumanOnly])
def test_an_env_that_cannot_render_frames_is_named(runs, tmp_path, env_class):
    env_id = f"{__name__}/{env_class.__name__}-v0"
    gymnasium.register(env_id, entry_point=env_class, max_episode_steps=10)
    run = tmp_path / "run"
    run.mkdir()
    (run / "actor.pt").write_bytes((runs["ppo-CartPole"] / "actor.pt").read_bytes())
    save_config(Config(env_id=env_id), run / "config.yaml")
    with pytest.raises(EnvError, match=f"'{env_id}' cannot render rgb_array frames"):
        record_video(run)
    assert sorted(p.name for p in run.iterdir()) == ["actor.pt", "config.yaml"]


def test_record_errors_are_clear(runs, tmp_path, monkeypatch):
    with pytest.raises(CheckpointError, match="does not exist"):
        record_video(tmp_path / "no-such-run")
    with pytest.raises(ConfigError, match="must end in .gif or .mp4"):
        record_video(runs["ppo-CartPole"], tmp_path / "video.avi")
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # as if not installed
    with pytest.raises(XiaoyaError, match=r"pip install -e '\.\[render\]'"):
        record_video(runs["ppo-CartPole"], tmp_path / "video.mp4")
    monkeypatch.setitem(sys.modules, "pygame", None)
    with pytest.raises(XiaoyaError, match=r"'CartPole-v1'.*pip install -e '\.\[render\]'"):
        record_video(runs["ppo-CartPole"], tmp_path / "video.gif")
    assert list(tmp_path.iterdir()) == []  # no video, and no partial file left behind


def test_a_torch_minatar_run_is_filmed_from_its_own_observations(tmp_path):
    """MinAtar's torch games have no gymnasium id: the recording plays the torch env itself and
    draws each observation (the whole 10x10 screen), one frame per state, final state included."""
    import torch

    from xiaoyarl import train_agent
    from xiaoyarl.envs import make_env
    from xiaoyarl.envs.minatar.breakout import BreakoutEnv

    config = Config(algo="ppo", env_id="MinAtar/Breakout-v1", max_steps=2048, eval_every=2048,
                    eval_episodes=1, confirm_episodes=0, threads=1,
                    cwd=str(tmp_path / "run"))  # fmt: skip
    train_agent(config, log=None)
    out = record_video(tmp_path / "run", tmp_path / "breakout.gif", episodes=1, seed=3)
    # the replay the video must show: the same torch env, seeded alike, the same policy
    policy = load_policy(tmp_path / "run")
    with make_env("MinAtar/Breakout-v1", 1, backend="torch", evaluation=True) as env:
        state, _ = env.reset(seed=3)
        shown, done = [state[0]], False
        while not done:
            action = torch.as_tensor(np.asarray(policy.predict(state[0].numpy()))).view(1)
            state, _, terminated, truncated, info = env.step(action)
            done = bool(terminated[0] | truncated[0])
            shown.append(info["final_state"][0] if done else state[0])
    with Image.open(out) as gif:
        assert gif.size == (160, 160)
        assert gif.info["duration"] == 100  # 10 frames a second
        gif.seek(len(shown) // 2)
        middle = np.asarray(gif.convert("RGB"))
    picture = BreakoutEnv.render_observation(shown[len(shown) // 2])
    assert picture.shape == (160, 160, 3)
    # the GIF's palette may shift colours a little: compare which cells are lit
    assert np.array_equal(middle.max(axis=2) > 60, picture.max(axis=2) > 60)
