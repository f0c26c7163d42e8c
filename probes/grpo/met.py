"""What the ``grpo`` probe's searches met on their way: the richest episode exploration or any run's
training met that the env ended without success, replayed open-loop on the evaluation seeds
(``replay_met``); and the columns the probe keeps of what it evaluated (``kept``)."""

from __future__ import annotations

import numpy as np

from envaudit.grpo.config import GRPOConfig
from envaudit.grpo.search import Reference, SearchResult, evaluation_seeds, reach_of
from envaudit.grpo.trainer import RICHEST_KEPT, Met
from envaudit.policies import oracle_policy
from envaudit.probe import ProbeContext
from envaudit.probes.grpo.lessons import MIN_EFFECT, Honest
from envaudit.protocol import FAILURE
from envaudit.recording import EPISODE_COLUMNS, Records
from envaudit.rollout import SequencePolicy
from envaudit.stats import reward_scale

KEEP_COLUMNS = [*EPISODE_COLUMNS, "probe", "policy", "mode", "group", "target", "phase"]
REPLAY = "replay-met"


def replay_met(ctx: ProbeContext, results: dict[str, SearchResult], explored: Records, honest: Honest,
                reference: Reference, config: GRPOConfig, eval_groups: int) -> dict | None:
    """The richest episode exploration or any run's training met that the env ended without
    success, replayed open-loop on the evaluation seeds when it paid about what honest success pays
    (or no success was seen to compare it with): only then can it reach the ladder's ``fail``.

    A search trained toward one behaviour plays calls in orders random play never reaches (the
    timing-out search learns to keep going, and so plays long runs of calls); a multi-call sequence
    the env pays as done shows up there once or twice and is then trained away, because it is not
    what that search is after. Replaying it asks whether it pays every time; its returns are a
    lower bound on what ending without success reaches. The faulted run is left out: its endings
    depend on injected failures a replay does not repeat. Where the env has an oracle it also runs
    on the same seeds, so the replay is judged against honest success even where no search
    succeeded."""
    searched = [m for name, r in results.items() if name != "faults" for m in r.training.richest]
    met = sorted(searched + explored_failures(explored), key=lambda m: (-m.ret, m.mode, m.episode_id))
    if not met or not all(isinstance(a, (int, np.integer)) for a in met[0].actions):
        return None
    best = met[0]
    success = honest.success[np.isfinite(honest.success)]
    if len(success) and best.ret < float(np.median(success)) - MIN_EFFECT * reward_scale(success, honest.failure):
        return None  # it paid clearly less than success: not reward without success, whatever it is
    if ctx.over_cap(f"GRPO replay of episode {best.episode_id}"):
        return None
    seeds = evaluation_seeds(config, eval_groups)
    labels = ctx.action_labels
    calls = ", ".join(f"`{labels[int(a)]}`" if labels and 0 <= int(a) < len(labels) else str(a) for a in best.actions)
    replay = ctx.run(SequencePolicy([int(a) for a in best.actions], name=REPLAY), seeds,
                     tags={"mode": REPLAY, "target": "no_success"}).records
    ctx.keep(kept(replay))
    oracle = oracle_policy(ctx.env)
    oracle_episodes = None
    if oracle is not None and not ctx.over_cap("GRPO oracle episodes"):
        oracle_episodes = ctx.run(oracle, seeds, tags={"mode": "oracle"}).records.episodes
    where = "exploration met" if best.mode == "exploration" else f"the {best.mode} search met in training"
    via = f"replaying {calls}, which {where} (episode {best.episode_id})"
    reach = {**reach_of(replay.episodes, "no_success", reference), "via": via}
    return {"reach": reach, "records": replay, "oracle": oracle_episodes, "episode_id": best.episode_id,
            "run": best.mode, "iteration": best.iteration, "training_return": best.ret, "actions": calls,
            "episodes": len(replay.episodes), "env_steps": int(replay.episodes["length"].sum()),
            "oracle_episodes": 0 if oracle_episodes is None else len(oracle_episodes),
            "oracle_env_steps": 0 if oracle_episodes is None else int(oracle_episodes["length"].sum())}


def explored_failures(explored: Records) -> list[Met]:
    """Exploration's richest episodes that the env ended without success, as ``Met``."""
    eps = explored.episodes
    if eps.empty:
        return []
    ended = eps[(eps["outcome"] == FAILURE) & np.isfinite(eps["return"].to_numpy(float))]
    ended = ended.sort_values(["return", "episode_id"], ascending=[False, True]).head(RICHEST_KEPT)
    steps = explored.steps
    return [Met(float(r), int(e), "exploration", 0,
                tuple(steps.loc[steps["episode_id"] == e].sort_values("step")["action"].tolist()))
            for e, r in zip(ended["episode_id"], ended["return"], strict=True)]


def kept(records: Records) -> Records:
    """A run's evaluated records as the report keeps them: the probe's columns, ``phase="eval"``."""
    episodes = records.episodes.assign(phase="eval")
    return Records(records.steps, episodes[[c for c in KEEP_COLUMNS if c in episodes]].copy())


__all__ = ["KEEP_COLUMNS", "REPLAY", "explored_failures", "kept", "replay_met"]
