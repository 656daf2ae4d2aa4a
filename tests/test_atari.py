"""Atari through gymnasium's ale-py with the standard preprocessing (`envs/atari.py`): the frames
the agent sees, what is for training only (lives, clipped rewards), the settings a run writes,
and PPO and DQN training a few thousand steps on Pong. Skipped without the `atari` extra."""

from __future__ import annotations

import pytest
import torch
import yaml

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

from xiaoyarl import train_agent  # noqa: E402
from xiaoyarl.config import Config  # noqa: E402
from xiaoyarl.envs import make_env  # noqa: E402
from xiaoyarl.envs.atari import ATARI_DEFAULTS  # noqa: E402
from xiaoyarl.errors import EnvError  # noqa: E402


@pytest.mark.parametrize("env_id", ["ALE/Breakout-v5", "BreakoutNoFrameskip-v4"])
def test_the_agent_sees_four_stacked_84x84_grayscale_frames(env_id):
    with make_env(env_id, 2, seed=0) as env:
        spec = env.spec
        assert spec.obs_shape == (4, 84, 84) and spec.obs_dtype == torch.uint8
        assert spec.action_dim == 4 and spec.if_discrete
        assert spec.max_step == 108_000 // 4  # ALE's own limit on a game, in agent steps
        state, _ = env.reset(seed=0)
        assert state.shape == (2, 4, 84, 84) and state.dtype == torch.uint8


def run_random(env, steps: int):
    """Total reward and episode ends of `steps` random steps of every sub-env."""
    total, ends = torch.zeros(env.spec.num_envs), 0
    env.reset(seed=0)
    generator = torch.Generator().manual_seed(0)
    for _ in range(steps):
        action = torch.randint(env.spec.action_dim, (env.spec.num_envs,), generator=generator)
        _, reward, terminated, truncated, _ = env.step(action)
        total += reward
        ends += int((terminated | truncated).sum())
    return total, ends


def test_training_ends_an_episode_at_each_lost_life_and_evaluation_plays_whole_games():
    """Breakout has 5 lives: random play loses them quickly; the training env ends an episode
    at each, the evaluation env only when the game is over (about 5x fewer ends)."""
    with make_env("ALE/Breakout-v5", 2, seed=0) as train:
        _, train_ends = run_random(train, 600)
    with make_env("ALE/Breakout-v5", 2, seed=0, evaluation=True) as evaluation:
        _, eval_ends = run_random(evaluation, 600)
    assert train_ends >= 3 * max(eval_ends, 1), (train_ends, eval_ends)


@pytest.mark.slow
def test_training_clips_rewards_and_evaluation_reports_the_game_score():
    """Breakout's higher rows score 4 and 7: the evaluation env reports them, the training env
    gives their sign."""
    seen_train, seen_eval = set(), set()
    for evaluation, seen in ((False, seen_train), (True, seen_eval)):
        with make_env("ALE/Breakout-v5", 1, seed=0, evaluation=evaluation,
                      env_kwargs={"atari": {"episodic_life": False}}) as env:  # fmt: skip
            env.reset(seed=0)
            for step in range(3000):
                action = torch.tensor([1 if step % 2 else 2 + (step // 7) % 2])  # fire, move
                _, reward, *_ = env.step(action)
                seen.add(reward.item())
    assert seen_train <= {0.0, 1.0}
    assert seen_eval <= {0.0, 1.0, 4.0, 7.0} and len(seen_eval) >= 2


def test_raw_frames_and_bad_settings():
    with make_env("ALE/Pong-v5", 1, env_kwargs={"atari": False}) as env:
        assert env.spec.obs_shape == (210, 160, 3)
    with make_env("ALE/Pong-v5", 1, env_kwargs={"atari": {"frame_stack": 2}}) as env:
        assert env.spec.obs_shape == (2, 84, 84)
    with pytest.raises(EnvError, match="unknown setting.*grayscale.*noop_max"):
        make_env("ALE/Pong-v5", 1, env_kwargs={"atari": {"grayscale": False}})


def test_envpool_runs_the_games_with_its_own_preprocessing():
    """`--backend envpool`: the same frames, lives and scores as through gymnasium."""
    pytest.importorskip("envpool")
    with make_env("ALE/Breakout-v5", 2, backend="envpool", seed=0) as train:
        assert train.spec.obs_shape == (4, 84, 84) and train.spec.obs_dtype == torch.uint8
        assert train.spec.max_step == 27_000
        _, train_ends = run_random(train, 600)
    with make_env("ALE/Breakout-v5", 2, backend="envpool", seed=0, evaluation=True) as game:
        _, game_ends = run_random(game, 600)
    assert train_ends >= 3 * max(game_ends, 1), (train_ends, game_ends)


BACKENDS = ["gymnasium", "envpool"]


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("algo", "fields"),
    [
        ("ppo", {"num_envs": 4, "horizon_len": 128}),
        (
            "dqn",
            {
                "num_envs": 4,
                "learning_starts": 1000,
                "buffer_size": 4000,
                "replay_ratio": 0.25,
                "batch_size": 32,
            },
        ),
    ],
)
def test_trains_on_pong_and_writes_its_preprocessing(backend, algo, fields, tmp_path):
    if backend == "envpool":
        pytest.importorskip("envpool")
    config = Config(algo=algo, env_id="ALE/Pong-v5", backend=backend, max_steps=2048,
                    eval_episodes=1, confirm_episodes=0, threads=1, cwd=str(tmp_path),
                    **fields)  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["total_steps"] >= 2048
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    # an evaluation plays whole games: every 25,000 env steps (DQN's own cadence is 2,000),
    # and once more at the end of the budget
    assert saved["eval_every"] == 25_000
    if backend == "gymnasium":  # EnvPool's preprocessing is its own, with the same settings
        assert saved["env_kwargs"]["atari"] == ATARI_DEFAULTS
    # a whole game of Pong ends at 21 points: the evaluation's score is the game's own
    assert -21.0 <= summary["best_eval_mean"] <= 21.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_replay_stores_each_frame_once_and_rebuilds_the_games_stacks(backend):
    """Breakout's training env (an episode per life, so many starts): the DQN family's replay
    keeps one frame per state and gives back, bit for bit, the 4-frame stacks a replay of whole
    stacks gives, through a wrapped ring."""
    if backend == "envpool":
        pytest.importorskip("envpool")
    from xiaoyarl.core.buffer import ReplayBuffer, Transitions

    with make_env("ALE/Breakout-v5", 2, backend=backend, seed=0) as env:
        spec = env.spec
        assert spec.frame_stack == 4
        sizes = (600, 2, spec.state_dim, spec.action_dim, True, spec.max_step, "cpu",
                 spec.obs_shape, spec.obs_dtype)  # fmt: skip
        frames, whole = ReplayBuffer(*sizes, frame_stack=4), ReplayBuffer(*sizes)
        state, _ = env.reset(seed=0)
        generator = torch.Generator().manual_seed(0)
        ends = 0
        for _ in range(16):  # 16 adds of 50 steps: the ring of 300 rows wraps twice
            rows = []
            for _ in range(50):
                action = torch.randint(spec.action_dim, (2,), generator=generator)
                next_state, reward, terminated, truncated, info = env.step(action)
                done = terminated | truncated
                final = torch.where(done.view(-1, 1, 1, 1), info["final_state"], next_state)
                rows.append((state, action, reward, terminated, truncated, final))
                state, ends = next_state, ends + int(done.sum())
            chunk = Transitions(*(torch.stack(column) for column in zip(*rows, strict=True)))
            frames.add(chunk)
            whole.add(chunk)
            batch = frames.sample(256)
            same = whole._gather(batch.indices, batch.weights)
            assert torch.equal(batch.states, same.states)
            assert torch.equal(batch.actions, same.actions)
            live = ~batch.terminals
            assert torch.equal(batch.next_states[live], same.next_states[live])
        assert ends >= 10  # lives lost: episode starts were rebuilt too
        assert frames.frames.numel() * 4 == whole.states.numel()


def test_record_shows_the_game_as_it_looks(tmp_path, monkeypatch):
    """`xiaoyarl record` of an Atari run plays it through the run's own preprocessing and films
    the game's own colour frames (210 x 160), at the game's pace (60 frames a second / 4)."""
    from PIL import Image

    from xiaoyarl import record as recording

    config = Config(algo="ppo", env_id="ALE/Breakout-v5", max_steps=256, num_envs=4,
                    horizon_len=64, eval_every=256, eval_episodes=1, confirm_episodes=0,
                    threads=1, cwd=str(tmp_path),  # games cut at 2,000 frames: a quick test
                    env_kwargs={"max_num_frames_per_episode": 2000})  # fmt: skip
    train_agent(config, log=None)
    monkeypatch.setattr(recording, "MAX_FRAMES", 40)  # shorter than any game of five lives
    with pytest.warns(UserWarning, match="stopped recording"):
        out = recording.record_video(tmp_path, episodes=1)
    with Image.open(out) as gif:
        assert gif.size == (160, 210)
        total = 0
        for index in range(gif.n_frames):  # identical frames are merged, durations summed
            gif.seek(index)
            total += gif.info["duration"]
    assert abs(total - 40 * 1000 / 15) < 0.1 * 40 * 1000 / 15  # 40 steps at 15 a second


def test_evaluation_presses_fire_after_a_lost_life_so_a_policy_that_never_fires_ends_its_game():
    """A policy that only ever picks NOOP: evaluation launches the ball after each lost life,
    so Breakout's five lives are gone within a few thousand steps, not at the game's time limit
    (27,000 frames, 6,750 steps), as when FIRE came only at a reset."""
    with make_env("ALE/Breakout-v5", 1, seed=0, evaluation=True) as env:
        env.reset(seed=0)
        steps = 0
        while steps < 3000:
            _, _, terminated, truncated, _ = env.step(torch.zeros(1, dtype=torch.int64))
            steps += 1
            if bool(terminated | truncated):
                break
    assert bool(terminated) and not bool(truncated), steps
    assert steps < 2000, steps


def test_evaluation_launches_the_ball_even_when_a_sticky_action_eats_a_press():
    """v5's sticky actions (the previous action repeated, frame by frame, with probability
    0.25) now and then swallow one step's FIRE, and a NOOP policy's game then waits until its
    time limit: 24 games of it, about a hundred lost lives, all end within 1,000 steps (with
    one step of FIRE after a lost life, one of these games waited)."""
    with make_env("ALE/Breakout-v5", 24, seed=0, evaluation=True) as env:
        env.reset(seed=7)
        ended = torch.zeros(24, dtype=torch.bool)
        for _ in range(1000):
            _, _, terminated, truncated, _ = env.step(torch.zeros(24, dtype=torch.int64))
            ended |= terminated | truncated
            if ended.all():
                break
    assert ended.all(), f"{int((~ended).sum())} games still waiting for FIRE"
