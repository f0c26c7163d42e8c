"""GRPO for envaudit: train a small policy under the user's rollout pipeline and watch what it learns.

``train`` is the GRPO loop (``trainer``); ``natural`` and ``targeted`` (``search``) are the two
ways the ``grpo`` probe uses it; ``PolicyEngine`` (``engine``) is the seam where the embedded torch
MLP (``torch_engine``) or a language-model engine plugs in.
"""

from envaudit.grpo.config import GRPOConfig
from envaudit.grpo.engine import ActionSample, PolicyEngine, Trajectory, grpo_loss
from envaudit.grpo.search import SearchResult, natural, targeted
from envaudit.grpo.trainer import TrainResult, train

__all__ = ["ActionSample", "GRPOConfig", "PolicyEngine", "SearchResult", "TrainResult", "Trajectory", "grpo_loss",
           "natural", "targeted", "train"]
