"""What the api probe looks for (the defect table, the rules for Gymnasium's checker's messages) and how it tallies what it saw."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

ROLLOUT_EPISODES = 8
ROLLOUT_STEPS = 1000  # total steps of the probe's own rollouts (before --quick scaling)
EPISODE_STEPS = 200  # step cap of one of its rollouts
CHECKER_CALLS = 20  # check_env makes about 15 reset/step calls; its deadline is this many step deadlines


@dataclass(frozen=True)
class Defect:
    """One kind of API defect: how bad it is and what to change."""

    severity: str
    title: str
    what: str  # what happened, as the start of a sentence
    why: str  # what it does to training
    fix: str


DEFECTS: dict[str, Defect] = {
    "make_hang": Defect(
        "fail", "Creating the env hangs", "creating the env did not return in time",
        "no rollout can even start",
        "Put a deadline on every blocking call in the env's constructor (downloads, servers, "
        "subprocesses); most likely it waits for a backend that never answers."),
    "make_exception": Defect(
        "fail", "Creating the env raises", "creating the env raised",
        "no rollout can even start",
        "Make the env factory work without arguments; most likely it needs a resource or an "
        "argument that is missing."),
    "reset_hang": Defect(
        "fail", "reset() hangs", "reset() did not return in time",
        "a rollout worker blocks for good and the batch never completes",
        "Put a deadline on every blocking call in reset(); most likely it waits for a backend "
        "(a sandbox, a server, a subprocess) that never answers."),
    "reset_exception": Defect(
        "fail", "reset() raises an exception", "reset() raised",
        "a training run crashes or silently loses those rollouts",
        "Make reset(seed=...) work on a fresh and on a used instance; most likely reset() relies "
        "on state from a previous episode or mishandles seed/options."),
    "step_hang": Defect(
        "fail", "step() hangs", "step() did not return in time",
        "a rollout worker blocks for good and the batch never completes",
        "Put a deadline on every blocking call inside step() and report an overrun as "
        "info['tool'] = {'name': ..., 'status': 'timeout'}; most likely a tool call or a "
        "subprocess waits forever (envaudit.ToolEnv gives registered tools a real deadline)."),
    "step_exception": Defect(
        "fail", "step() raises an exception", "step() raised",
        "a training run crashes or silently loses those rollouts",
        "Catch the failure inside step() and report it as info['tool'] = {'name': ..., "
        "'status': 'error'} (or end the episode) instead of raising; most likely an unhandled "
        "edge case in the transition code. Replay the seed and actions to reproduce it."),
    "bad_return": Defect(
        "fail", "reset() or step() returns the wrong shape",
        "reset() or step() did not return (obs, info) / (obs, reward, terminated, truncated, info)",
        "every training loop unpacks these tuples and crashes",
        "Return (obs, info) from reset() and (obs, reward, terminated, truncated, info) from "
        "step(); most likely the env still follows the old Gym API."),
    "reward_not_number": Defect(
        "fail", "Reward is not a number", "step() returned a reward that float() rejects",
        "the loss cannot be computed",
        "Return the reward as a Python float; most likely it is None, a string or an array "
        "with more than one element."),
    "nan_reward": Defect(
        "fail", "Reward is NaN or inf", "step() returned a NaN or infinite reward",
        "one such reward turns the GRPO advantages and the loss into NaN",
        "Guard the reward computation so step() always returns a finite float; most likely a "
        "division by zero, a log of zero or an overflow in the reward."),
    "nonfinite_obs": Defect(
        "fail", "Observation contains NaN or inf", "an observation contained NaN or inf",
        "a policy network fed such an input outputs NaN and the update diverges",
        "Guard the computation of the observation (or clip it); most likely an unguarded "
        "division, log or overflow."),
    "info_not_dict": Defect(
        "fail", "info is not a dict", "reset() or step() returned an info that is not a dict",
        "wrappers and trainers write into info and crash",
        "Return a dict as info from reset() and step(); most likely a list, None or a custom "
        "object is returned instead."),
    "obs_outside_space": Defect(
        "warn", "Observation outside observation_space",
        "an observation was not in the declared observation_space",
        "policies and preprocessing built from the space (bounds, shape, dtype) misread it",
        "Make observation_space describe what reset()/step() return; most likely its bounds, "
        "shape or dtype differ from the observation (e.g. float64 values in a float32 Box)."),
    "nonbool_done": Defect(
        "warn", "terminated/truncated are not bools",
        "terminated or truncated was not a bool",
        "vectorised envs and trainers that test `is True` or stack them as bools misread endings",
        "Return Python bools (bool(...)) for terminated and truncated; most likely they are "
        "ints or numpy arrays."),
    "bad_tool_info": Defect(
        "warn", "Malformed info['tool']",
        "info['tool'] was not a mapping with 'name' and a status of ok, error or timeout",
        "envaudit (and any pipeline keyed on tool status) counts those calls as errors",
        "Set info['tool'] = {'name': <tool>, 'status': 'ok' | 'error' | 'timeout'}; most likely "
        "a typo or a custom status name. If the env uses another key, scan it through "
        "envaudit.wrap(env, tool_key=...)."),
}

# check_env assertion messages that describe a defect training survives: (phrase, severity, fix).
# Other assertion failures and every other exception are `fail`.
CHECKER_SOFT = (
    ("share an object", "warn",
     "Return fresh observation and info objects on every call (e.g. obs.copy()); most likely "
     "reset()/step() hand out an internal buffer that later calls overwrite, which corrupts "
     "stored rollouts."),
    ("info are not equivalent", "info",  # info is not trained on; replay checks tool statuses
     "Most likely info carries wall-clock values (timestamps, measured durations) or draws from a "
     "generator other than self.np_random; keep such values out of info or make them replayable."),
    ("deterministic", "warn",
     "Most likely reset() does not call super().reset(seed=seed) or the env draws from a "
     "generator other than self.np_random; the replay probe shows where replays diverge."),
    ("random generat", "warn", "Call super().reset(seed=seed) at the start of reset() and draw every random "
     "choice from self.np_random."),
    ("np_random", "warn", "Call super().reset(seed=seed) at the start of reset() and draw every random choice "
     "from self.np_random."),
    ("not within the observation space", "warn",
     "Make observation_space describe what reset()/step() return; most likely its bounds, shape "
     "or dtype differ from the observation."),
    ("truncates after 1 step", "warn",
     "Most likely truncated is set on every step or the step limit is 1."),
)
CHECKER_IGNORED = ("is different from the unwrapped version",)  # we check the env as it is made
# check_env assertions that say the same seed and action gave a different observation, reward,
# ending or random-generator state: that is the catalogue's `non-replayable` (seen by Gymnasium's
# two-reset replay), not an API defect, and it must read as the replay probe's incentive, not as a
# second problem beside it. Not here: a step's info differing (training does not read info), and a
# reset that never seeds np_random (a deterministic env without randomness still replays).
CHECKER_NON_REPLAYABLE = (
    "non-deterministic as the observations are not equivalent",
    "step observations are not equivalent",
    "step rewards are not equivalent",
    "step termination are not equivalent",
    "np_random` is not properly been updated after step",
    "random generates are not same when the same seeds",
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Seen:
    """Where a defect showed up."""

    source: str  # "exploration" | "api rollouts"
    seed: int | None
    step: int | None
    message: str
    episode_id: int | None = None


@dataclass
class Tally:
    seen: dict[str, list[Seen]] = field(default_factory=dict)
    episodes: int = 0
    steps: int = 0

    def add(self, key: str, source: str, seed, step, message: str, episode_id=None) -> None:
        self.seen.setdefault(key, []).append(Seen(source, _int(seed), _int(step), message, _int(episode_id)))

    def messages(self) -> set[str]:
        return {s.message for seen in self.seen.values() for s in seen}


def _int(value: Any) -> int | None:
    try:
        return None if value is None or value != value else int(value)
    except (TypeError, ValueError):
        return None


def soft_rule(error: Exception) -> tuple[str, str, str] | None:
    """The ``CHECKER_SOFT`` rule (phrase, severity, fix) that ``check_env``'s failure matches first."""
    return next((rule for rule in CHECKER_SOFT if rule[0] in str(error).lower()), None)
