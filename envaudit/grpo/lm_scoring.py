"""Trainer-side scoring of sampled completions: per-token log-probs and entropies under a causal LM.

Each row is one turn: the prompt's token ids and the completion the inference engine sampled. Rows
are left-padded into one batch with explicit position ids (so every row sees positions 0..n-1, as
the inference engine did) and only the logits that predict completion tokens are computed
(``logits_to_keep``), which keeps the vocabulary-sized tensors small.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def completion_logprobs(model: Any, rows: Sequence[tuple[Sequence[int], Sequence[int]]], pad_id: int,
                        *, with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Log-prob of every completion token given its prompt and the tokens before it.

    Returns ``(logprobs, entropies, mask)``, each (rows, longest completion): completions are
    right-aligned, ``mask`` marks real tokens; ``entropies`` (of the full next-token
    distribution) is None unless asked for. ``logprobs[mask]`` lists the tokens row by row.
    """
    lengths = [len(p) + len(c) for p, c in rows]
    width, keep = max(lengths), max(len(c) for _, c in rows)
    assert keep >= 1, "every batch needs at least one completion token"
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    targets = torch.full((len(rows), keep), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), keep), dtype=torch.bool)
    for i, (prompt, completion) in enumerate(rows):
        seq = list(prompt) + list(completion)
        input_ids[i, width - len(seq):] = torch.tensor(seq, dtype=torch.long)
        attention[i, width - len(seq):] = 1
        if completion:
            targets[i, keep - len(completion):] = torch.tensor(list(completion), dtype=torch.long)
            mask[i, keep - len(completion):] = True
    positions = (attention.cumsum(1) - 1).clamp(min=0)
    device = next(model.parameters()).device
    input_ids, attention, positions = input_ids.to(device), attention.to(device), positions.to(device)
    targets, mask = targets.to(device), mask.to(device)
    # The logits at positions width-keep-1 .. width-2 predict the last `keep` tokens.
    logits = model(input_ids=input_ids, attention_mask=attention, position_ids=positions,
                   logits_to_keep=keep + 1).logits[:, :-1, :].float()
    logp_all = torch.log_softmax(logits, dim=-1)
    logprobs = logp_all.gather(2, targets.unsqueeze(-1)).squeeze(-1)
    entropies = -(logp_all.exp() * logp_all).sum(-1) if with_entropy else None
    return logprobs, entropies, mask
