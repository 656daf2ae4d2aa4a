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


def shown_frames(path, frame_ms: int) -> list[np.ndarray]:
    """Every frame of the GIF at `path` as shown, RGB, each `frame_ms` long: a stored frame that
    stands for k identical ones (k times as long) counted k times."""
    with Image.open(path) as gif:
        stored = []
        for i in range(gif.n_frames):
            gif.seek(i)
            stored.append((np.asarray(gif.convert("RGB")), gif.info["duration"]))
    assert all(duration % frame_ms == 0 for _, duration in stored)  # the env's frame rate
    return [picture for picture, duration in stored for _ in range(duration // frame_ms)]


def assert_shows(frames: list[np.ndarray], pictures: list[np.ndarray]) -> None:
    """The GIF's frames are the reference pictures, one for one (the GIF's palette may shift a
    colour a little, here by at most 14 levels), and show something that moves."""
    assert len(frames) == len(pictures)
    for i, (frame, picture) in enumerate(zip(frames, pictures, strict=True)):
        assert frame.shape == picture.shape, i
        assert np.abs(frame.astype(int) - picture).max() <= 32, i  # every pixel
    assert any(not np.array_equal(frames[0], frame) for frame in frames[1:])  # it moves


def torch_replay(run_dir, episodes: int, seed: int) -> tuple[list[np.ndarray], list[int]]:
    """The slow, obvious replay the video must show: the run's own torch-native env, episode `i`
    reset with `seed + i`, the policy acting on numpy observations, one picture of the state
    after the reset and of every state a step reached (its final state where an episode
    ended). Returns the pictures and the steps per episode."""
    import torch

    from xiaoyarl.config_io import load_config
    from xiaoyarl.envs import make_env
    from xiaoyarl.envs.multi import make_multi_agent_env

    config = load_config(run_dir / "config.yaml")
    policy = load_policy(run_dir)
    multi = "num_agents" in policy.meta
    if multi:
        env = make_multi_agent_env(config.env_id, 1, env_kwargs=config.env_kwargs)
    else:
        env = make_env(config.env_id, 1, backend="torch", evaluation=True)
    pictures, lengths = [], []
    with env:
        for i in range(episodes):
            state, info = env.reset(seed=seed + i)
            policy.reset()
            pictures.append(env.render_state((info["state"] if multi else state)[0]))
            steps, done = 0, False
            while not done:
                if multi:
                    action = policy.predict(state[0].numpy(), avail=info.get("avail_actions"))
                    action = torch.as_tensor(np.asarray(action)).unsqueeze(0)
                else:  # as the torch env takes it (continuous: in [-1, 1])
                    action = policy.act_normalized(state)
                state, _, terminated, truncated, info = env.step(action)
                pictures.append(env.render_state(info["final_state"][0]))
                steps, done = steps + 1, bool(terminated[0] | truncated[0])
            lengths.append(steps)
    return pictures, lengths


def test_a_recurrent_run_on_cartpole_without_velocities_is_filmed(tiny_run, tmp_path):
    """gymnasium has no CartPoleNoVelocity-v1: the run plays its own torch env, drawn by
    gymnasium's CartPole renderer, the recurrent policy reset at each episode's start."""
    pytest.importorskip("pygame")
    run = tiny_run("ppo-gru-CartPoleNoVelocity")
    out = record_video(run, tmp_path / "novel.gif", episodes=2, seed=3)
    pictures, lengths = torch_replay(run, episodes=2, seed=3)
    frames = shown_frames(out, 20)  # CartPole's render_fps is 50
    assert len(frames) == sum(n + 1 for n in lengths)  # the first state, then one per step
    assert_shows(frames, pictures)
    assert frames[0].shape == (400, 600, 3)  # gymnasium's CartPole picture


def test_a_recurrent_replay_run_on_pendulum_without_velocity_is_filmed(tiny_run, tmp_path):
    """gymnasium has no PendulumNoVelocity-v1: the recurrent SAC run plays its own torch env,
    drawn by gymnasium's Pendulum renderer; an episode is 200 steps, so 201 frames."""
    pytest.importorskip("pygame")
    run = tiny_run("sac-gru-PendulumNoVelocity")
    out = record_video(run, tmp_path / "pendulum.gif", episodes=1, seed=3)
    pictures, lengths = torch_replay(run, episodes=1, seed=3)
    assert lengths == [200]
    frames = shown_frames(out, 30)  # Pendulum's render_fps is 30 (GIF: hundredths of a second)
    assert len(frames) == 201
    assert_shows(frames, pictures)
    assert frames[0].shape == (500, 500, 3)  # gymnasium's Pendulum picture


def test_a_multi_agent_spread_run_is_filmed(tiny_run, tmp_path):
    """SpreadDiscrete-v0, torch-native and multi-agent: the MAPPO policy acts for every agent,
    the env draws each global state; an episode is 25 steps, so 26 frames."""
    run = tiny_run("mappo-SpreadDiscrete")
    out = record_video(run, tmp_path / "spread.gif", episodes=2, seed=5)
    pictures, lengths = torch_replay(run, episodes=2, seed=5)
    assert lengths == [25, 25]
    frames = shown_frames(out, 100)  # mpe2's render_fps is 10
    assert len(frames) == 2 * 26
    assert_shows(frames, pictures)
    assert frames[0].shape == (700, 700, 3)
    agents = (np.abs(frames[0].astype(int) - (70, 70, 170)).sum(axis=2) < 30).mean()
    landmarks = (np.abs(frames[0].astype(int) - (50, 50, 50)).sum(axis=2) < 30).mean()
    assert 0.02 < agents < 0.3 and 0.001 < landmarks < 0.05  # three discs of each, to scale
    assert not np.array_equal(frames[25], frames[26])  # episode 2 starts elsewhere


def test_an_mpe2_run_is_filmed_by_mpe2_itself(tiny_run, tmp_path):
    """A PettingZoo run (mpe2's simple_spread_v3) is played on its own adapter, whose sub-env
    renders itself; the last frame of an episode is drawn before the auto-reset. The reference:
    mpe2's parallel env played directly with the same policy."""
    mpe2 = pytest.importorskip("mpe2")
    pytest.importorskip("pygame")
    run = tiny_run("mappo-mpe2-spread")
    out = record_video(run, tmp_path / "mpe2.gif", episodes=2, seed=7)
    policy = load_policy(run)
    pictures = []
    env = mpe2.simple_spread_v3.parallel_env(render_mode="rgb_array")
    for i in range(2):
        obs, _ = env.reset(seed=7 + i)
        agents = list(env.possible_agents)
        pictures.append(env.render())
        while env.agents:
            actions = policy.predict(np.stack([obs[a] for a in agents]))
            obs, *_ = env.step({a: int(actions[j]) for j, a in enumerate(agents)})
            pictures.append(env.render())
    env.close()
    assert len(pictures) == 2 * 26  # mpe2's episodes last 25 steps
    frames = shown_frames(out, 100)  # mpe2's render_fps is 10
    assert_shows(frames, pictures)
    assert frames[0].shape == (700, 700, 3)


def test_a_torch_minatar_run_is_filmed_from_its_own_observations(tiny_run, tmp_path):
    """MinAtar's torch games have no gymnasium id: the recording plays the torch env itself and
    draws each observation (the whole 10x10 screen), one frame per state, final state included."""
    run = tiny_run("ppo-MinAtar-Breakout")
    out = record_video(run, tmp_path / "breakout.gif", episodes=1, seed=3)
    pictures, (length,) = torch_replay(run, episodes=1, seed=3)
    frames = shown_frames(out, 100)  # 10 frames a second
    assert len(frames) == length + 1
    assert_shows(frames, pictures)
    assert frames[0].shape == (160, 160, 3)


def test_a_run_whose_env_draws_nothing_says_it_cannot_be_filmed(runs, tmp_path, capsys):
    """Chase-v0 is torch-native only and draws no pictures: record says so plainly, through the
    API and the command line, and writes nothing."""
    from xiaoyarl.cli import main

    run = tmp_path / "run"
    run.mkdir()
    (run / "actor.pt").write_bytes((runs["ppo-CartPole"] / "actor.pt").read_bytes())
    save_config(Config(env_id="Chase-v0"), run / "config.yaml")
    message = "'Chase-v0' cannot be filmed: its env, ChaseEnv, draws no pictures"
    with pytest.raises(EnvError, match=message):
        record_video(run)
    assert main(["record", str(run)]) == 2
    assert message in capsys.readouterr().err
    assert sorted(p.name for p in run.iterdir()) == ["actor.pt", "config.yaml"]


def test_a_pettingzoo_env_draws_only_when_made_to(tmp_path):
    """The adapter renders its sub-envs when made with render_mode='rgb_array', as gymnasium's
    envs do, and says how otherwise."""
    pytest.importorskip("mpe2")
    pytest.importorskip("pygame")
    from xiaoyarl.envs.multi.pettingzoo import PettingZooVecEnv

    with PettingZooVecEnv("mpe2:simple_spread_v3", 1) as env:
        env.reset(seed=0)
        with pytest.raises(EnvError, match="render_mode='rgb_array'"):
            env.render_frame(0)
    kwargs = {"render_mode": "rgb_array"}
    with PettingZooVecEnv("mpe2:simple_spread_v3", 2, env_kwargs=kwargs) as env:
        env.reset(seed=0)
        first = env.render_frame(1)
        assert first.shape == (700, 700, 3) and first.dtype == np.uint8
        assert env.render_fps == 10


def test_a_headless_record_prints_nothing_of_sdl(runs, tmp_path, monkeypatch, popen):
    """On a machine without a display SDL said "XDG_RUNTIME_DIR is invalid or not set" (on the
    process's own stderr) before the GIF was written; the frames need no display."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("SDL_VIDEODRIVER", raising=False)
    out = tmp_path / "headless.gif"
    proc = popen("record", str(runs["ppo-CartPole"]), "--out", str(out))
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0 and out.is_file() and str(out) in stdout
    assert stderr == "", stderr
