import numpy as np
import pytest
import torch

from envaudit.grpo.engine import aggregate, grpo_loss


def _loss(new, old, adv, owner, aggregation="trajectory", clip=0.2):
    new = torch.tensor(new, requires_grad=True)
    loss, clip_fraction = grpo_loss(new, torch.tensor(old), torch.tensor(adv), torch.tensor(owner),
                                    int(max(owner)) + 1, clip_coef=clip, aggregation=aggregation)
    loss.backward()
    return float(loss.detach()), new.grad.numpy(), float(clip_fraction)


def test_on_policy_gradient_is_minus_advantage_weighted_by_trajectory_length():
    # Two trajectories: 2 steps with advantage +1, 1 step with advantage -2; ratio 1 everywhere.
    loss, grad, clipped = _loss([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, -2.0], [0, 0, 1])
    # trajectory mean: ((-1 - 1) / 2 + 2 / 1) / 2 = 0.5; d/dlogp = -A / len / n_traj
    assert loss == pytest.approx(0.5)
    assert np.allclose(grad, [-0.25, -0.25, 1.0])
    assert clipped == 0.0


def test_step_aggregation_weighs_every_step_equally():
    loss, grad, _ = _loss([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, -2.0], [0, 0, 1], "step")
    assert loss == pytest.approx(0.0)
    assert np.allclose(grad, [-1 / 3, -1 / 3, 2 / 3])


def test_ratio_beyond_the_clip_range_stops_the_gradient_in_the_advantage_direction():
    up = np.log(1.5)  # ratio 1.5 > 1 + 0.2
    _, grad, clipped = _loss([up, up], [0.0, 0.0], [1.0, -1.0], [0, 1])
    assert grad[0] == 0.0  # positive advantage, ratio already too high: no further push
    assert grad[1] != 0.0  # negative advantage: the unclipped (pessimistic) term still pulls it back
    assert clipped == 1.0


def test_aggregate_means_per_trajectory_then_over_trajectories():
    per_step = torch.tensor([1.0, 3.0, 10.0])
    assert float(aggregate(per_step, torch.tensor([0, 0, 1]), 2, "trajectory")) == pytest.approx((2 + 10) / 2)
    assert float(aggregate(per_step, torch.tensor([0, 0, 1]), 2, "step")) == pytest.approx(14 / 3)
