"""Writes the TRL samples next to this file, the way GRPOTrainer.log writes them.

Parquet (TRL >= 0.28, trl/trainer/grpo_trainer.py ``log``): the ``table`` dict of step, prompt,
completion, one column per reward function (``self._logs["rewards"]``: floats, NaN where the
function returned None), the ``log_extra`` columns, advantage -> ``pd.DataFrame(table).to_parquet(
{output_dir}/completions/completions_{global_step:05d}.parquet)``. Here: num_generations=2, two
prompts per generation, reward functions accuracy_reward and format_reward, a reward function that
calls ``log_extra("correct", ...)``; completions_00003 is the generation of step 2 logged again
(num_iterations=2, logging_steps=1).

W&B (TRL 0.27, the only file on disk before 0.28): ``wandb.Table(dataframe=df)`` of step (a string,
``str(global_step)``), prompt, completion, reward columns, advantage, saved by the W&B SDK as
``files/media/table/completions_{n}_{sha256[:20]}.table.json`` = ``{"columns": ..., "data": ...}``.

Run with the envaudit venv: ``.venv/bin/python tests/logs/data/trl/make_sample.py``.
"""

import json
import math
import os
from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent
NAN = math.nan
P1, P2, P3 = "What is 2+3?", "What is the capital of France?", "Which is the largest planet?"


def table(step, rows):
    prompts, completions, acc, fmt, correct, adv = zip(*rows, strict=True)
    return {"step": [step] * len(rows), "prompt": list(prompts), "completion": list(completions),
            "accuracy_reward": list(acc), "format_reward": list(fmt), "correct": list(correct),
            "advantage": list(adv)}


S1 = [(P1, "<answer>5</answer>", 1.0, 1.0, True, 0.7071), (P1, "<answer>6</answer>", 0.0, 1.0, False, -0.7071),
      (P2, "Paris", 1.0, 0.0, True, 0.7071), (P2, "Lyon", 0.0, 0.0, False, -0.7071)]
S2 = [(P1, "<answer>5</answer>", 1.0, 1.0, True, 0.0), (P1, "five", NAN, NAN, False, 0.0),
      (P3, "<answer>Jupiter</answer>", 1.0, 1.0, True, 0.7071), (P3, "Jupiter.", 1.0, 0.0, True, -0.7071)]

os.makedirs(HERE / "completions", exist_ok=True)
for step, rows in [(1, S1), (2, S2), (3, S2)]:
    df_base = pd.DataFrame(table(step, rows))
    df_base.to_parquet(os.path.join(HERE, "completions", f"completions_{step:05d}.parquet"))

media = HERE / "wandb" / "run-20250601_120000-q1w2e3r4" / "files" / "media" / "table"
os.makedirs(media, exist_ok=True)
old = [[str(4), P1, "<answer>5</answer>", 1.0, 1.0, 0.7071], [str(4), P1, "6", 0.0, 0.0, -0.7071]]
with open(media / "completions_4_3f9a0c2d81e6b7a45c10.table.json", "w") as f:
    json.dump({"columns": ["step", "prompt", "completion", "accuracy_reward", "format_reward", "advantage"],
               "data": old}, f)
