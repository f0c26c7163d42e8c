import copy
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

from envaudit.grpo import GRPOConfig, PolicyEngine, Trajectory
from envaudit.grpo.torch_engine import Featurizer, TorchEngine, UnsupportedSpace, action_count

S = gym.spaces


def test_box_features_scale_bounded_dims_and_squash_unbounded_ones():
    f = Featurizer(S.Box(low=np.array([0.0, -np.inf], np.float32), high=np.array([10.0, np.inf], np.float32)))
    assert np.allclose(f(np.array([5.0, 0.0])), [0.0, 0.0])
    assert np.allclose(f(np.array([10.0, np.e - 1])), [1.0, 1.0])
    batch = f.batch([np.array([0.0, 0.0]), np.array([10.0, -(np.e - 1)])])
    assert np.allclose(batch, [[-1.0, 0.0], [1.0, -1.0]])


def test_discrete_observations_are_one_hot_alone_and_in_batches():
    f = Featurizer(S.Discrete(4, start=2))
    assert f(3).tolist() == [0, 1, 0, 0]
    assert f.batch([2, 5]).tolist() == [[1, 0, 0, 0], [0, 0, 0, 1]]


def test_discrete_multidiscrete_dict_and_tuple_become_one_flat_vector():
    space = S.Dict({"a": S.Discrete(3, start=1), "b": S.Tuple((S.MultiDiscrete([2, 3]), S.MultiBinary(2)))})
    f = Featurizer(space)
    assert f.size == 3 + 5 + 2
    x = f({"a": 2, "b": (np.array([1, 0]), np.array([1, 0]))})
    assert x.tolist() == [0, 1, 0, 0, 1, 1, 0, 0, 1, 0]


def test_text_features_are_hashed_bag_of_words_stable_across_processes():
    f = Featurizer(S.Text(64), text_features=16)
    x = f("Search failed: search again")
    assert x.shape == (16,) and x.sum() > 0
    assert np.array_equal(x, f("search AGAIN, search failed"))  # word order and case do not matter
    code = ("from envaudit.grpo.torch_engine import Featurizer; import gymnasium as gym; "
            "print(Featurizer(gym.spaces.Text(64), text_features=16)('Search failed: search again').tolist())")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(other) == x.tolist()  # no salted hash(): the same features in a fresh interpreter


def test_unsupported_spaces_are_refused_with_the_space_named():
    with pytest.raises(UnsupportedSpace, match="drives a Discrete action space .* got Box"):
        action_count(S.Box(-1, 1, (2,)))
    with pytest.raises(UnsupportedSpace, match=r"observation_space\['g'\] of type Graph"):
        Featurizer(S.Dict({"g": S.Graph(S.Box(0, 1, (1,)), None)}))


def _engine(seed=0, **kw):
    return TorchEngine(S.Box(0, 1, (3,)), S.Discrete(4), GRPOConfig(seed=seed, **kw))


def test_engine_is_a_policy_engine_and_starts_near_uniform():
    engine = _engine()
    assert isinstance(engine, PolicyEngine)
    p = engine.probabilities([np.array([0.2, 0.5, 0.9])], [0.0])
    assert np.allclose(p, 0.25, atol=0.02)


def test_same_seed_same_weights_and_samples_and_threads_restored():
    before = torch.get_num_threads()
    a, b = _engine(seed=3), _engine(seed=3)
    obs = [np.array([0.1, 0.2, 0.3])] * 50
    sa = a.sample(obs, [0.5] * 50, np.random.default_rng(1))
    sb = b.sample(obs, [0.5] * 50, np.random.default_rng(1))
    assert np.array_equal(sa.actions, sb.actions) and np.allclose(sa.logprobs, sb.logprobs)
    assert not np.array_equal(_engine(seed=4).net[0].weight.detach(), a.net[0].weight.detach())
    assert torch.get_num_threads() == before
    greedy = a.sample(obs[:2], [0.0, 0.0], np.random.default_rng(0), greedy=True)
    assert np.allclose(greedy.logprobs, np.log(a.probabilities(obs[:2], [0.0, 0.0]).max(axis=1)))


@pytest.mark.parametrize("threads", [2, 4])
def test_the_starting_weights_do_not_depend_on_torchs_thread_count(threads):
    # The same seed on a machine with more cores must start from the same policy (the QR behind
    # the orthogonal init gives other bits on several threads than on one).
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _engine(seed=5)
        torch.set_num_threads(threads)
        many = _engine(seed=5)
    finally:
        torch.set_num_threads(before)
    for a, b in zip(one.net.parameters(), many.net.parameters(), strict=True):
        assert torch.equal(a, b)


def test_update_moves_probability_towards_the_action_with_positive_advantage():
    engine = _engine(learning_rate=0.05)
    obs = np.array([0.5, 0.5, 0.5])
    p0 = engine.probabilities([obs], [0.0])[0]
    for _ in range(10):
        s = engine.sample([obs] * 8, [0.0] * 8, np.random.default_rng(0))
        trajectories = [Trajectory([s.states[i]], np.array([a]), np.array([s.logprobs[i]]), 1.0 if a == 2 else -0.5)
                        for i, a in enumerate(s.actions)]
        stats = engine.update(trajectories)
    p1 = engine.probabilities([obs], [0.0])[0]
    assert p1[2] > p0[2] + 0.3
    assert set(stats) >= {"loss", "entropy", "kl", "clip_fraction"} and stats["kl"] > 0
    assert engine.update([])["loss"] == 0.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_hand_written_adam_matches_torch_optim_adam_step_for_step(dtype):
    """The engine's ``Adam`` (kept to skip torch.optim's TorchDynamo import) is pinned to the
    library's: same parameters after every step, with the engine's learning rate, eps and clipping."""
    from envaudit.grpo.torch_engine import Adam

    ours_net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 4)).to(dtype)
    weights = torch.Generator().manual_seed(0)
    for param in ours_net.parameters():
        torch.nn.init.normal_(param, std=0.5, generator=weights)
    start = copy.deepcopy(ours_net)
    lib_net = copy.deepcopy(ours_net)  # both start from the same weights
    lr, eps = 1e-2, 1e-5
    ours = Adam(ours_net.parameters(), lr=lr, eps=eps)
    lib = torch.optim.Adam(lib_net.parameters(), lr=lr, betas=(0.9, 0.999), eps=eps)
    data = torch.Generator().manual_seed(1)
    for _ in range(60):
        # A new batch each step (gradients of changing size and sign), cross-entropy as in the engine.
        x = torch.randn(16, 3, generator=data, dtype=dtype)
        y = torch.randint(0, 4, (16,), generator=data)
        for model, optimizer in ((ours_net, ours), (lib_net, lib)):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        for a, b in zip(ours_net.parameters(), lib_net.parameters(), strict=True):
            assert torch.allclose(a, b, rtol=0, atol=1e-6), float((a - b).abs().max())
    with torch.no_grad():
        moved = max(float((a - b).abs().max()) for a, b in zip(ours_net.parameters(), start.parameters(), strict=True))
    assert moved > 0.1  # the comparison ran over real updates, not a parameter vector at rest
