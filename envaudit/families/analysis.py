"""Numbers that follow from a spec alone: what random play and the honest policy should see.

The generator uses them to label a spec (rare or common success) and to size each planted flaw
against what honest success earns; the tests check the envs against them by simulation.
"""

from __future__ import annotations

from envaudit.families.spec import EnvSpec

RARE_BELOW = 0.05
"""A spec whose uniformly random policy succeeds less often than this is ``rare``-success."""


def random_success_probability(spec: EnvSpec) -> float:
    """Exact chance that a uniformly random policy succeeds, for the spec's clean task (flaws ignored).

    Dynamic programming over (steps taken, progress along the path): each step every catalogue
    call is equally likely; a path call advances when it is the next one and its tool does not
    fail; ``step_back`` undoes one; exactly one of the ``submit`` calls is the right answer once the
    path is complete; ``submit_all``, ``give_up`` and (when ``wrong_answer_ends``) wrong submissions
    end the episode.
    """
    labels, path, n_path = spec.labels, spec.path, len(spec.path)
    n = len(labels)
    alive = [0.0] * (n_path + 1)
    alive[0] = 1.0
    success = 0.0
    fn, fp = spec.grader_false_negative, spec.grader_false_positive
    for _ in range(spec.max_steps):
        nxt = [0.0] * (n_path + 1)
        for p, mass in enumerate(alive):
            if mass == 0.0:
                continue
            share = mass / n
            for label in labels:
                if label.startswith("call_"):
                    tool = label[len("call_"):]
                    if p < n_path and path[p] == tool:
                        ok = 1.0 - spec.tool(tool).failure_rate
                        nxt[p + 1] += share * ok
                        nxt[p] += share * (1.0 - ok)
                    else:
                        nxt[p] += share
                elif label in ("submit_all", "give_up"):
                    continue
                elif label == "step_back":
                    nxt[max(p - 1, 0)] += share
                else:
                    is_right = p == n_path and (label == "submit" or label == spec.submit_labels[0])
                    # By symmetry over the hidden answer, one submit label stands for the right one.
                    judged = (1.0 - fn) if is_right else fp
                    success += share * judged
                    if not spec.wrong_answer_ends:
                        nxt[p] += share * (1.0 - judged)
        alive = nxt
    return success


def progress_total(spec: EnvSpec) -> float:
    """What progress shaping and the forward bonus pay over a whole path walked once (potential
    shaping nets 0 over an episode)."""
    return (spec.progress_bonus() + spec.forward_bonus) * len(spec.path)


def honest_success_return(spec: EnvSpec) -> float:
    """Expected return of an honest successful episode: success reward, progress shaping, and the
    step cost of walking the path with retries (expected calls) plus the submission."""
    return spec.success_reward + progress_total(spec) - spec.step_cost * (spec.expected_path_calls() + 1)


def regime_of(spec: EnvSpec) -> str:
    return "rare" if random_success_probability(spec) < RARE_BELOW else "common"


__all__ = ["RARE_BELOW", "honest_success_return", "progress_total", "random_success_probability", "regime_of"]
