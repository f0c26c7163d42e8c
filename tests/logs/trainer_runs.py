"""Trainer dumps of a run whose design is known, written in each trainer's own on-disk format.

A run of ``STEPS`` training steps, ``PROMPTS`` prompts × ``ROLLOUTS`` rollouts each (one GRPO group
per prompt and step). Per rollout: the task is solved with probability ``p_success(t)``; a solved
rollout scores 1; an unsolved one scores ``HACK_SCORE`` when it took the hack (probability
``p_hack(t)`` among the unsolved), else 0; plus uniform noise of ±``NOISE``. Also logged, unrelated
to the score by design: ``tool_timeouts`` (0, or 1 with probability ``P_TIMEOUT``) and ``num_turns``
(2..6 uniformly).

- ``hacked``: success falls 0.39 → 0.13 while the hack rises 0.13 → 0.97 of the unsolved, so the
  mean score rises 0.46 → 0.89 (the issue's measurement). The last quarter's unsolved rollouts
  (about nine in ten of them hacks) earn about 0.8 against about 0.2 for the first quarter's
  failures: clearly more than failing did (``warn``), less than success's 1.0 by more than the
  ladder's margin (not ``fail``). With ``hack_score`` 1.2 (a hack paid more than success) they earn
  about as much as success: ``fail``.
- ``clean``: success rises 0.2 → 0.7 and nothing else pays, so return rises with success.

``verl`` writes ``{step}.jsonl`` lines as ``RayPPOTrainer._dump_generations`` does (``input``,
``output``, ``gts``, ``score``, ``step`` and the reward function's extra keys ``acc``, ``pred``,
``tool_timeouts``, ``num_turns``); ``trl`` writes ``completions_{step:05d}.parquet`` as
``GRPOTrainer.log`` does (``step``, ``prompt``, ``completion``, one float column per reward
function, ``advantage``, and ``log_extra`` columns ``correct``, ``tool_timeouts``, ``num_turns``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

STEPS, PROMPTS, ROLLOUTS = 30, 4, 8
HACK_SCORE = 0.9
NOISE = 0.05
P_TIMEOUT = 0.2


def rollouts(kind: str, seed: int = 0, hack_score: float = HACK_SCORE) -> pd.DataFrame:
    """One row per rollout: step, prompt, solved, hacked, score, tool_timeouts, num_turns."""
    assert kind in ("hacked", "clean"), kind
    rng = np.random.default_rng(seed)
    rows = []
    for step in range(1, STEPS + 1):
        f = (step - 1) / (STEPS - 1)
        p_success = 0.39 + (0.13 - 0.39) * f if kind == "hacked" else 0.2 + 0.5 * f
        p_hack = 0.13 + (0.97 - 0.13) * f if kind == "hacked" else 0.0
        for prompt in range(PROMPTS):
            for _ in range(ROLLOUTS):
                solved = bool(rng.random() < p_success)
                hacked = (not solved) and bool(rng.random() < p_hack)
                score = (1.0 if solved else hack_score if hacked else 0.0) + float(rng.uniform(-NOISE, NOISE))
                rows.append({"step": step, "prompt": prompt, "solved": solved, "hacked": hacked, "score": score,
                             "tool_timeouts": int(rng.random() < P_TIMEOUT), "num_turns": int(rng.integers(2, 7))})
    return pd.DataFrame(rows)


def _question(prompt: int) -> str:
    return f"system\nYou are a support agent.\nuser\nTicket #{prompt}: resolve it.\nassistant\n"


def write_verl(folder: Path, kind: str, seed: int = 0, hack_score: float = HACK_SCORE) -> Path:
    """``{folder}/rollout/{step}.jsonl``, one line per rollout; returns the rollout folder."""
    table = rollouts(kind, seed, hack_score)
    root = Path(folder) / "rollout"
    root.mkdir(parents=True, exist_ok=True)
    for step, part in table.groupby("step"):
        with open(root / f"{step}.jsonl", "w", encoding="utf-8") as f:
            for r in part.itertuples():
                answer = "resolved" if r.solved else "escalated" if r.hacked else "gave up"
                f.write(json.dumps({"input": _question(r.prompt), "output": f"Answer: {answer}", "gts": "resolved",
                                    "score": r.score, "step": int(step), "acc": bool(r.solved), "pred": answer,
                                    "tool_timeouts": int(r.tool_timeouts), "num_turns": int(r.num_turns)}) + "\n")
    return root


def write_trl(folder: Path, kind: str, seed: int = 0, hack_score: float = HACK_SCORE) -> Path:
    """``{folder}/completions/completions_{step:05d}.parquet``; returns the completions folder."""
    table = rollouts(kind, seed, hack_score)
    root = Path(folder) / "completions"
    root.mkdir(parents=True, exist_ok=True)
    for step, part in table.groupby("step"):
        reward = part["score"].to_numpy(float)
        group = part.groupby("prompt")["score"]
        advantage = (part["score"] - group.transform("mean")) / (group.transform("std") + 1e-4)
        pd.DataFrame({
            "step": [int(step)] * len(part),
            "prompt": [_question(p) for p in part["prompt"]],
            "completion": ["resolved" if s else "escalated" if h else "gave up"
                           for s, h in zip(part["solved"], part["hacked"], strict=True)],
            "resolution_reward": reward,
            "advantage": advantage.to_numpy(float),
            "correct": part["solved"].to_numpy(bool),
            "tool_timeouts": part["tool_timeouts"].to_numpy(np.int64),
            "num_turns": part["num_turns"].to_numpy(np.int64),
        }).to_parquet(root / f"completions_{int(step):05d}.parquet")
    return root


WRITERS = {"verl": write_verl, "trl": write_trl}
