"""actions(): each space's native strategy, its bounds and dtypes, and the seeded fallback."""

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis.errors import InvalidArgument, NoSuchExample

from envaudit.testing import actions
from envaudit.testing.strategies import UNBOUNDED, _sample
from tests.testing.toy_envs import FetchTask

FIND = settings(max_examples=100, database=None, deadline=None, derandomize=True)
NEVER = settings(max_examples=40, database=None, deadline=None, derandomize=True)
FAST = settings(max_examples=30, database=None, deadline=None, derandomize=True)


def lowest(space, condition=lambda a: True):
    return find(actions(space), condition, settings=FIND)


def never(space, condition):
    with pytest.raises(NoSuchExample):
        find(actions(space), condition, settings=NEVER)


def test_actions_take_an_env_or_a_space_and_refuse_the_rest():
    assert lowest(FetchTask()) == 0 and lowest(gym.make("CartPole-v1")) == 0
    with pytest.raises(InvalidArgument) as info:
        actions([0, 1])
    assert str(info.value) == "actions(space) needs a gymnasium.spaces.Space or an env, got list"


def test_discrete_spans_start_to_start_plus_n_minus_one():
    space = gym.spaces.Discrete(4, start=-2)
    assert lowest(space, lambda a: a < 0) == -1  # shrinks toward 0 within the range
    assert lowest(space, lambda a: a >= 1) == 1
    never(space, lambda a: a > 1 or a < -2)
    assert lowest(space, lambda a: a == -2) == -2


def test_multi_binary_keeps_shape_and_dtype():
    space = gym.spaces.MultiBinary([2, 3])
    first = lowest(space)
    assert first.shape == (2, 3) and first.dtype == space.dtype and not first.any()
    full = lowest(space, lambda a: a.all())
    assert full.shape == (2, 3) and full.sum() == 6
    never(space, lambda a: a.max() > 1)


def test_multi_discrete_uses_each_dimension_s_start_and_size():
    space = gym.spaces.MultiDiscrete(np.array([[2, 3], [4, 1]]), start=np.array([[1, -1], [0, 5]]))
    first = lowest(space)
    assert first.shape == (2, 2) and first.dtype == space.dtype
    assert first.tolist() == [[1, 0], [0, 5]]  # each dimension's value closest to 0
    top = lowest(space, lambda a: a[0, 0] == 2 and a[0, 1] == 1 and a[1, 0] == 3)
    assert top.tolist() == [[2, 1], [3, 5]]
    never(space, lambda a: a[0, 0] > 2 or a[0, 1] > 1 or a[1, 0] > 3 or a[1, 1] != 5 or a[0, 1] < -1)

    @FAST
    @given(actions(space))
    def inside(a):
        assert space.contains(a)

    inside()


def test_integer_boxes_keep_their_bounds_and_dtype():
    space = gym.spaces.Box(low=np.array([-3, 250]), high=np.array([3, 255]), dtype=np.int16)
    first = lowest(space)
    assert first.dtype == np.int16 and first.tolist() == [0, 250]
    assert lowest(space, lambda a: a[1] == 255 and a[0] == -3).tolist() == [-3, 255]
    never(space, lambda a: a[0] > 3 or a[0] < -3 or a[1] < 250)
    wide = gym.spaces.Box(low=-(2**40), high=2**40, shape=(1,), dtype=np.int64)
    assert lowest(wide, lambda a: a[0] > 2**39)[0] == 2**39 + 1


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_float_boxes_draw_floats_of_their_dtype_inside_the_box(dtype):
    space = gym.spaces.Box(-1.0, 2.0, shape=(2,), dtype=dtype)

    @FAST
    @given(actions(space))
    def check(a):
        assert a.dtype == dtype and a.shape == (2,) and space.contains(a)

    check()


def test_unbounded_dimensions_stay_within_unbounded():
    assert UNBOUNDED == 1e3
    space = gym.spaces.Box(-np.inf, np.inf, shape=(1,), dtype=np.float64)
    assert lowest(space, lambda a: a[0] > 500.0)[0] > 500.0
    never(space, lambda a: abs(a[0]) > UNBOUNDED)
    assert lowest(space, lambda a: a[0] < -500.0)[0] < -500.0


def test_one_sided_bounds_beyond_the_default_range_get_a_window_of_twice_unbounded():
    above = gym.spaces.Box(low=5000.0, high=np.inf, shape=(1,), dtype=np.float64)
    assert lowest(above)[0] == 5000.0
    assert lowest(above, lambda a: a[0] > 6000.0)[0] > 6000.0
    never(above, lambda a: a[0] > 7000.0 or a[0] < 5000.0)
    below = gym.spaces.Box(low=-np.inf, high=-5000.0, shape=(1,), dtype=np.float64)
    assert lowest(below)[0] == -5000.0
    assert lowest(below, lambda a: a[0] < -6000.0)[0] < -6000.0
    never(below, lambda a: a[0] < -7000.0 or a[0] > -5000.0)


def test_text_uses_the_space_s_characters_and_lengths():
    space = gym.spaces.Text(max_length=3, min_length=2, charset="cab")
    assert lowest(space) == "aa"  # sorted alphabet: the first character is the simplest
    never(space, lambda s: len(s) < 2 or len(s) > 3 or set(s) - set("abc"))
    assert lowest(space, lambda s: len(s) == 3 and "c" in s) in {"aac", "aca", "caa"}


def test_tuples_and_dicts_compose():
    space = gym.spaces.Tuple((gym.spaces.Discrete(2, start=1), gym.spaces.Dict({"k": gym.spaces.Discrete(3)})))
    assert lowest(space) == (1, {"k": 0})
    assert lowest(space, lambda a: a[1]["k"] == 2) == (1, {"k": 2})


def test_other_spaces_sample_a_copy_seeded_by_hypothesis():
    space = gym.spaces.Sequence(gym.spaces.Discrete(4))
    assert _sample(space, 3) == _sample(space, 3)
    draws = {tuple(_sample(space, s)) for s in range(10)}
    assert len(draws) > 1
    before = space.np_random.bit_generator.state
    _sample(space, 5)
    assert space.np_random.bit_generator.state == before  # the user's space is not reseeded
    assert tuple(lowest(space)) == tuple(_sample(space, 0))  # shrinks to seed 0


def test_a_point_box_draws_its_point_and_shapes_are_kept():
    point = gym.spaces.Box(low=2.0, high=2.0, shape=(1,), dtype=np.float64)
    never(point, lambda a: a[0] != 2.0)
    grid = gym.spaces.Box(0, 3, shape=(2, 2), dtype=np.int32)
    assert lowest(grid).shape == (2, 2) and lowest(grid).dtype == np.int32


def test_the_fallback_does_not_reseed_a_shared_inner_space():
    space = gym.spaces.Sequence(gym.spaces.Discrete(4))
    space.feature_space.seed(1)
    before = space.feature_space.np_random.bit_generator.state
    _sample(space, 5)
    assert space.feature_space.np_random.bit_generator.state == before
