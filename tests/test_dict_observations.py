"""Dict observations: packed side by side by the gymnasium adapter, read by one encoder per key
(a CNN for the image, the running normaliser for vectors and one-hots), a key that cannot be
read refused with the keys to keep, learning from an image and a vector together, and saved
policies that take the env's dicts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xiaoyarl import load_policy, train_agent
from xiaoyarl.agents.registry import make_agent
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.config import Config
from xiaoyarl.core.encoders import CNNEncoder, DictEncoder
from xiaoyarl.envs import make_env
from xiaoyarl.errors import EnvError

ENV = "pixel_envs:BrightSideDict-v0"
KEEP = {"obs_keys": ["image", "cue", "steps"]}


def test_a_key_that_cannot_be_read_is_named_with_the_keys_to_keep():
    with pytest.raises(EnvError) as excinfo:
        make_env(ENV, 2)
    message = str(excinfo.value)
    assert "'mission' is a Text space" in message
    assert "env_kwargs={obs_keys: [cue, image, steps]}" in message  # the space's (sorted) order
    with pytest.raises(EnvError, match="obs_keys names colour, not keys"):
        make_env(ENV, 2, env_kwargs={"obs_keys": ["image", "colour"]})
    with pytest.raises(EnvError, match=r"obs_keys is for Dict \(and Tuple\) observation spaces"):
        make_env("CartPole-v1", 2, backend="gymnasium", env_kwargs=KEEP)


def test_the_keys_are_packed_side_by_side_and_read_by_one_encoder_each():
    with make_env(ENV, 2, seed=0, env_kwargs=KEEP) as env:
        spec = env.spec
        assert spec.obs_keys == (("cue", (1,), "float"), ("image", (8, 8, 3), "uint8"),
                                 ("steps", (10,), "onehot"))  # fmt: skip
        assert spec.obs_shape == (1 + 192 + 10,) and spec.obs_dtype == torch.float32
        state, _ = env.reset(seed=0)
        assert state[:, 1 + 192 :].tolist() == [[1.0] + [0.0] * 9] * 2  # step 0, one-hot
        assert set(state[:, 1 : 1 + 192].unique().tolist()) == {20.0, 230.0}  # the pixels
        config = resolve_config(Config(algo="ppo", env_id=ENV, env_kwargs=KEEP), batched=False)
        agent = make_agent("ppo", spec, config, torch.device("cpu"))
    encoder = agent.actor.norm
    assert isinstance(encoder, DictEncoder) and isinstance(encoder.cnns["image"], CNNEncoder)
    assert encoder.out_dim == 1 + 16 * 6 * 6 + 10  # the image through a MinAtar CNN
    seen = []
    hook = encoder.cnns["image"].convs.register_forward_pre_hook(
        lambda _, args: seen.append(args[0]))  # fmt: skip
    encoder(state)
    hook.remove()
    assert seen[0].shape == (2, 3, 8, 8) and float(seen[0].max()) == pytest.approx(230 / 255)


@pytest.mark.learning
@pytest.mark.timeout(600)
def test_learns_from_an_image_and_a_vector_and_the_saved_policy_takes_dicts(tmp_path):
    """The right action needs the image (which side is lit) and the cue (whether to swap)."""
    config = Config(algo="ppo", env_id=ENV, env_kwargs=KEEP, seed=0, threads=1, num_envs=8,
                    horizon_len=32, max_steps=60_000, eval_every=2_000, confirm_episodes=20,
                    cwd=str(tmp_path))  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["solved"], summary
    policy = load_policy(tmp_path)
    left = np.full((8, 8, 3), 20, dtype=np.uint8)
    left[:, :4] = 230
    single = {"image": left, "cue": np.array([0.0], np.float32), "steps": 3, "mission": "x"}
    assert policy.predict(single) == 0
    batch = {"image": np.stack([left, left]), "cue": np.array([[0.0], [1.0]], np.float32),
             "steps": np.array([1, 2])}  # fmt: skip
    assert policy.predict(batch).tolist() == [0, 1]


def test_the_env_checker_names_the_key_it_cannot_read_and_checks_the_keys_kept(cli):
    """Its advice names check-env's own way to keep keys: it named train's --set, which
    check-env did not take."""
    from xiaoyarl.envs.check import check_env

    problems = check_env(ENV)
    assert [p.severity for p in problems] == ["error"]
    assert "'mission' is a Text space" in problems[0].message
    assert "check-env ... --env-kwargs '{obs_keys: [cue, image, steps]}'" in problems[0].message
    assert check_env(ENV, env_kwargs=KEEP) == []
    run = cli("check-env", ENV, "--env-kwargs", "{obs_keys: [image, cue, steps]}")
    assert run.returncode == 0 and "no problems found" in run.stdout, run.stdout
    bad = cli("check-env", ENV, "--env-kwargs", "[image]")
    assert bad.returncode == 2 and "--env-kwargs takes a mapping" in bad.stderr


def test_tuple_observations_are_read_as_a_dicts_keys_and_the_saved_policy_takes_tuples(tmp_path):
    """A Tuple observation space: its parts are keyed "0", "1", ... in order, packed as a Dict's
    (each read by its own encoder), and kept by those names (`obs_keys`); a saved policy takes
    the env's tuples, one or a batch, as the packed vectors."""
    kind = {"observation": "Tuple", "action": "Discrete"}
    with make_env("matrix_envs:Probe-v0", 2, seed=0, env_kwargs=kind) as env:
        assert env.spec.obs_keys == (("0", (8, 8, 3), "uint8"), ("1", (2,), "float"))
        packed, _ = env.reset(seed=0)
    with make_env("matrix_envs:Probe-v0", 2, env_kwargs={**kind, "obs_keys": ["1"]}) as env:
        assert env.spec.obs_keys == (("1", (2,), "float"),)
    from xiaoyarl.envs.check import check_env

    assert check_env("matrix_envs:Probe-v0", env_kwargs=kind) == []  # the checker reads it too
    config = Config(algo="ppo", env_id="matrix_envs:Probe-v0", env_kwargs=kind, num_envs=2,
                    horizon_len=16, max_steps=64, eval_every=64, eval_episodes=1, threads=1,
                    target_return=None, cwd=str(tmp_path))  # fmt: skip
    train_agent(config, log=None)
    policy = load_policy(tmp_path)
    image = packed[:, : 8 * 8 * 3].reshape(2, 8, 8, 3).to(torch.uint8).numpy()
    position = packed[:, 8 * 8 * 3 :].numpy()
    np.testing.assert_array_equal(policy.predict((image, position)), policy.predict(packed))
    assert policy.predict((image[0], position[0])) == policy.predict(packed[0].numpy())


@pytest.mark.learning
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "seed", [0, pytest.param(1, marks=pytest.mark.seeds), pytest.param(2, marks=pytest.mark.seeds)]
)
def test_sac_learns_a_goal_conditioned_reaching_task_and_the_saved_policy_takes_dicts(
    seed, tmp_path
):
    """SAC with its defaults reaches goals it reads from the observation's dict
    (`control_envs.Reach-v0`, gymnasium-robotics' keys): heading for the centre, blind to the
    goal, returns -38, the target is -10 (BENCHMARKS.md, "SAC with Dict and image
    observations"); its saved policy plays the env's own dicts, reading the goal."""
    import gymnasium

    config = Config(algo="sac", env_id="control_envs:Reach-v0", seed=seed, threads=1,
                    max_steps=20_000, target_return=-10.0, cwd=str(tmp_path))  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["solved"], summary
    policy = load_policy(tmp_path)
    env = gymnasium.make("control_envs:Reach-v0")  # (gymnasium imports the module)
    returns = np.zeros(8)
    for episode in range(8):
        obs, _ = env.reset(seed=100 + episode)
        for _ in range(50):  # the time limit
            obs, reward, _, _, _ = env.step(policy.predict(obs))
            returns[episode] += reward
    assert returns.mean() >= -20.0, returns  # reads the goal (blind to it: -38)
