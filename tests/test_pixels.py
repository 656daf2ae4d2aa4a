"""Image observations: the spec's shape and dtype, uint8 kept in rollouts and replay and scaled in
the network, the encoders (Nature CNN, IMPALA, MinAtar, MLP, a user's class), a shared encoder
stepped once, target networks with their own CNN copy, learning from pixels, and saved pixel
policies."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from xiaoyarl import load_policy, train_agent
from xiaoyarl.agents.registry import make_agent
from xiaoyarl.agents.settings import check_config, resolve_config
from xiaoyarl.config import Config
from xiaoyarl.config_io import validate_config
from xiaoyarl.core.encoders import CNNEncoder, FlatEncoder, image_layout, make_encoder, to_float
from xiaoyarl.core.nets import RunningNorm
from xiaoyarl.envs import make_env
from xiaoyarl.errors import ConfigError

ENV = "pixel_envs:BrightSide-v0"  # (8, 8, 3) uint8 images, channels last


def obs(shape):
    """What an encoder is built from: an env spec's observation fields."""
    return SimpleNamespace(obs_shape=shape, obs_keys=None, channels_last=None)


def agent_and_env(algo: str, num_envs: int = 4, **fields):
    config = Config(algo=algo, env_id=ENV, num_envs=num_envs, **fields)
    config = resolve_config(config, batched=False)
    env = make_env(ENV, num_envs, seed=0)
    torch.manual_seed(0)
    agent = make_agent(algo, env.spec, config, torch.device("cpu"))
    agent.last_state = agent.observe(*env.reset(seed=0))
    return agent, env


def test_the_spec_describes_an_image_and_rollouts_keep_it_uint8():
    agent, env = agent_and_env("ppo", horizon_len=8)
    assert env.spec.obs_shape == (8, 8, 3) and env.spec.obs_dtype == torch.uint8
    assert env.spec.state_dim == 192
    rollout = agent.explore_env(env, 8)
    assert rollout.states.dtype == torch.uint8 and rollout.states.shape == (8, 4, 8, 8, 3)
    assert rollout.next_states.dtype == torch.uint8
    env.close()


def test_replay_keeps_uint8_and_the_network_sees_pixels_scaled_to_one():
    agent, env = agent_and_env("dqn", buffer_size=256, learning_starts=8, batch_size=16)
    rollout = agent.explore_env(env, 16)
    agent.buffer.add(rollout)
    assert agent.buffer.store.dtype == torch.uint8  # 1 byte per pixel, not 4
    batch = agent.buffer.sample(16)
    assert batch.states.dtype == torch.uint8 and batch.states.shape == (16, 8, 8, 3)
    assert batch.next_states.dtype == torch.uint8 and batch.next_states.shape == (16, 8, 8, 3)
    seen = []
    hook = agent.qnet.norm.convs.register_forward_pre_hook(lambda _, args: seen.append(args[0]))
    agent.qnet(batch.states)
    hook.remove()
    # channels first, float32, each pixel / 255
    expected = batch.states.permute(0, 3, 1, 2).float() / 255
    assert seen[0].dtype == torch.float32 and torch.allclose(seen[0], expected)
    assert seen[0].max() <= 1.0 and batch.states.max() > 1
    env.close()


def test_the_replay_buffer_of_pixels_takes_a_quarter_of_the_memory():
    from xiaoyarl.core.buffer import ReplayBuffer

    floats = ReplayBuffer.bytes_needed(100_000, 1, 84 * 84 * 4, 6, True, 10_000)
    pixels = ReplayBuffer.bytes_needed(100_000, 1, 84 * 84 * 4, 6, True, 10_000, obs_bytes=1)
    assert pixels < 0.26 * floats


@pytest.mark.parametrize(
    ("kind", "shape", "out_dim"),
    [
        ("nature", (4, 84, 84), 512),
        ("nature", (84, 84, 4), 512),  # channels last
        ("impala", (3, 64, 64), 256),
        ("minatar", (10, 10, 4), 16 * 8 * 8),
        ("minatar", (4, 10, 10), 16 * 8 * 8),
        ("minatar", (12, 12), 16 * 10 * 10),  # one channel
        ("auto", (4, 84, 84), 512),  # nature for Atari-sized frames
        ("auto", (4, 10, 10), 16 * 8 * 8),  # minatar for small grids
        ("mlp", (3, 5, 5), 75),
    ],
)
def test_encoders_give_their_papers_widths(kind, shape, out_dim):
    encoder = make_encoder(kind, obs(shape), RunningNorm(int(np.prod(shape))))
    batch = torch.randint(0, 256, (2, *shape), dtype=torch.uint8)
    features = encoder(batch)
    assert encoder.out_dim == out_dim and features.shape == (2, out_dim)
    assert isinstance(encoder, FlatEncoder if kind == "mlp" else CNNEncoder)


def test_vectors_read_through_the_shared_normaliser_as_before():
    norm = RunningNorm(4)
    assert make_encoder("auto", obs((4,)), norm) is norm
    assert make_encoder("mlp", obs((4,)), norm) is norm


def test_image_layout_finds_the_channels():
    assert image_layout((4, 84, 84)) == ((4, 84, 84), False)
    assert image_layout((84, 84, 3)) == ((3, 84, 84), True)
    assert image_layout((84, 84)) == ((1, 84, 84), False)
    assert image_layout((5,)) is None and image_layout((2, 3, 4, 5)) is None
    assert to_float(torch.tensor([255], dtype=torch.uint8)).item() == 1.0
    assert to_float(torch.tensor([True])).item() == 1.0  # bool grids (MinAtar) are not scaled


def test_an_image_of_equal_sides_is_read_as_its_env_says():
    """MinAtar's Seaquest through gymnasium is (10, 10, 10) height x width x channels, which the
    shape alone read as channels first; the env adapter says which axis holds the channels, and
    the encoder sees the very picture the torch-native game (channels first) gives."""
    from xiaoyarl.core.encoders import ImageInput

    gym_env = make_env("MinAtar/Seaquest-v1", 2, backend="gymnasium", seed=0)
    torch_env = make_env("MinAtar/Seaquest-v1", 2, backend="torch", seed=0)
    assert gym_env.spec.channels_last is True and torch_env.spec.channels_last is None
    gym_state, torch_state = gym_env.reset(seed=0)[0], torch_env.reset(seed=0)[0]
    encoder = make_encoder("auto", gym_env.spec, RunningNorm(gym_env.spec.state_dim))
    seen = encoder.input(gym_state)  # (batch, C, H, W) as the convolutions read it
    assert torch.equal(seen, ImageInput(torch_env.spec.obs_shape)(torch_state))
    assert seen[:, 7].sum() > 0 and seen.shape == (2, 10, 10, 10)
    assert image_layout((10, 10, 10), channels_last=True) == ((10, 10, 10), True)
    assert image_layout((10, 10, 10)) == ((10, 10, 10), False)  # no word from the env: a guess


def test_a_users_encoder_class_by_module_and_name():
    encoder = make_encoder("pixel_envs:TinyEncoder", obs((8, 8, 3)), RunningNorm(192))
    assert encoder.out_dim == 8
    assert encoder(torch.full((2, 8, 8, 3), 255, dtype=torch.uint8)).shape == (2, 8)
    agent, env = agent_and_env("ppo", encoder="pixel_envs:TinyEncoder")
    assert agent.actor.net[0].in_features == 8
    env.close()


@pytest.mark.parametrize(
    ("kind", "shape", "words"),
    [
        ("nature", (3, 10, 10), ["at least 36x36", "10x10", "'minatar'"]),
        ("nature", (4,), ["reads images", "(4,)", "'mlp'"]),
        ("pixel_envs:NoWidth", (3, 8, 8), ["must set `self.out_dim`"]),
        ("pixel_envs:Missing", (3, 8, 8), ["cannot import Missing from pixel_envs"]),
        ("no_such_module_xyz:Enc", (3, 8, 8), ["cannot import Enc", "PYTHONPATH"]),
    ],
)
def test_bad_encoders_say_what_is_wrong(kind, shape, words):
    with pytest.raises(ConfigError) as excinfo:
        make_encoder(kind, obs(shape), RunningNorm(int(np.prod(shape))))
    assert all(w in str(excinfo.value) for w in words), str(excinfo.value)


def test_an_unknown_encoder_name_is_refused_by_the_config():
    with pytest.raises(ConfigError, match="encoder='resnet'.*nature, impala, minatar"):
        validate_config(Config(encoder="resnet"))


def test_ppo_shares_its_image_encoder_and_steps_it_once():
    agent, env = agent_and_env("ppo", horizon_len=8)
    encoder = agent.actor.norm
    assert isinstance(encoder, CNNEncoder) and agent.critic.norm is encoder
    params = set(encoder.parameters())
    actor_params = set(agent.optimizers["actor"].param_groups[0]["params"])
    critic_params = set(agent.optimizers["critic"].param_groups[0]["params"])
    assert params <= actor_params and not params & critic_params
    before = [p.clone() for p in encoder.parameters()]
    agent.update_net(agent.explore_env(env, 8))
    assert any(not torch.equal(a, b) for a, b in zip(before, encoder.parameters(), strict=True))
    env.close()

    separate, env = agent_and_env("ppo", share_encoder=False)
    assert separate.critic.norm is not separate.actor.norm
    assert set(separate.critic.norm.parameters()) <= set(
        separate.optimizers["critic"].param_groups[0]["params"]
    )
    env.close()


def test_a_shared_encoder_computes_each_minibatchs_features_once_with_the_same_loss():
    """PPO's actor and critic read a mini-batch through their shared CNN: the features are
    computed (and back-propagated) once, and the loss and gradients are those of computing them
    twice, as before."""
    agent, env = agent_and_env("ppo", horizon_len=8)
    data = agent.ppo_batch(agent.explore_env(env, 8))
    assert data.critic_states is data.states  # one tensor, indexed once per mini-batch
    encoder = agent.actor.norm
    calls = []
    hook = encoder.register_forward_hook(lambda *_: calls.append(1))
    idx = torch.arange(16)
    loss, _ = agent.minibatch_loss(data, idx, torch.mean)
    loss.backward()
    assert len(calls) == 1
    once = [p.grad.clone() for p in encoder.parameters()]
    agent.actor.zero_grad()
    # the obvious way: two separate copies of the mini-batch, two passes through the encoder
    batch = type(data)._make(None if x is None else x[idx].clone() for x in data)
    twice, _ = agent.ppo_loss(batch, torch.mean)
    twice.backward()
    assert len(calls) == 3
    torch.testing.assert_close(loss, twice)
    for a, p in zip(once, encoder.parameters(), strict=True):
        torch.testing.assert_close(a, p.grad)
    hook.remove()
    with torch.no_grad():  # without gradients nothing is remembered
        x = data.states[:4]
        assert torch.equal(encoder(x), encoder(x)) and encoder._memo is None
    env.close()


@pytest.mark.parametrize("algo", ["ppo", "dqn", "sac_discrete"])
def test_empty_net_dims_put_the_output_layers_on_the_cnns_features(algo):
    """`net_dims: []`: the papers' Atari networks, an output layer on the encoder's features."""
    agent, env = agent_and_env(algo, net_dims=[], horizon_len=8, buffer_size=256,
                               learning_starts=0)  # fmt: skip
    net = agent.actor if algo == "ppo" else agent.qnet if algo == "dqn" else agent.critic
    head = list(net.net)  # what follows the encoder: one layer (an ensemble's, for SAC)
    width = head[0].weight.shape[-2 if algo == "sac_discrete" else -1]  # inputs of the layer
    assert len(head) == 1 and width == net.norm.out_dim
    agent.update_net(agent.explore_env(env, 8))
    env.close()
    with pytest.raises(ConfigError, match="net_dims"):
        check_config(Config(algo="d3qn", env_id=ENV, net_dims=[]))


@pytest.mark.parametrize("algo", ["dqn", "sac_discrete"])
def test_off_policy_targets_lag_with_a_copy_of_the_cnn(algo):
    agent, env = agent_and_env(algo, buffer_size=256)
    online, target = (
        (agent.qnet, agent.qnet_target) if algo == "dqn" else (agent.critic, agent.critic_target)
    )
    assert isinstance(online.norm, CNNEncoder) and target.norm is not online.norm
    assert not set(target.norm.parameters()) & set(online.norm.parameters())
    if algo == "sac_discrete":  # the actor reads through a CNN of its own
        assert agent.actor.norm is not agent.critic.norm
    env.close()


@pytest.mark.learning
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("algo", "fields"),
    [
        ("ppo", {"num_envs": 8, "horizon_len": 32, "max_steps": 40_000}),
        (
            "dqn",
            {
                "num_envs": 4,
                "max_steps": 20_000,
                "learning_starts": 500,
                "explore_decay_steps": 4_000,
            },
        ),  # fmt: skip
    ],
)
def test_learns_from_pixels_and_the_saved_policy_reads_them(algo, fields, tmp_path):
    """BrightSide rewards reading the image: random play returns 5, the target is 9 of 10."""
    config = Config(algo=algo, env_id=ENV, seed=0, threads=1, eval_every=2_000, cwd=str(tmp_path),
                    confirm_episodes=20, **fields)  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["solved"], summary
    policy = load_policy(tmp_path)
    left = np.full((8, 8, 3), 20, dtype=np.uint8)
    left[:, :4] = 230
    right = left[:, ::-1].copy()
    assert policy.predict(left) == 0 and policy.predict(right) == 1
    assert list(policy.predict(np.stack([right, left, right]))) == [1, 0, 1]
    with pytest.raises(ValueError, match=r"\(batch, 8, 8, 3\)"):
        policy.predict(np.zeros((8, 8), dtype=np.uint8))


def play(policy, env_id: str, episodes: int = 8) -> float:
    """The mean return of `policy` (through `predict`, as the env gives observations) over
    `episodes` episodes of the gymnasium env `env_id` (a `module:Id` of the tests' envs)."""
    import gymnasium

    env = gymnasium.make(env_id)  # (gymnasium imports the module)
    total = 0.0
    for episode in range(episodes):
        obs, _ = env.reset(seed=100 + episode)
        done = False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy.predict(obs))
            total += reward
            done = terminated or truncated
    env.close()
    return total / episodes


@pytest.mark.learning
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "seed", [0, pytest.param(1, marks=pytest.mark.seeds), pytest.param(2, marks=pytest.mark.seeds)]
)
def test_sac_learns_to_move_a_point_it_sees_only_as_pixels(seed, tmp_path):
    """SAC with its defaults (a CNN for the actor and one for the critics) brings a point it
    sees only in an 8x8 image to the centre (`control_envs.PixelReach-v0`): standing still
    returns -15, the target is -5 (BENCHMARKS.md, "SAC with Dict and image observations")."""
    config = Config(algo="sac", env_id="control_envs:PixelReach-v0", seed=seed, threads=1,
                    max_steps=20_000, target_return=-5.0, cwd=str(tmp_path))  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["solved"], summary
    assert play(load_policy(tmp_path), "control_envs:PixelReach-v0") >= -8.0  # still: -15
