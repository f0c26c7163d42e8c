"""The language-model engine: a ``PolicyEngine`` that writes tool calls as text, sampled on vLLM.

The orchestrator -> inference engine -> training engine loop of RL post-training, in miniature:

- ``sample``: every live rollout of every group is one prompt (the chat template over a system
  line and the env's transcript); one ``generate`` call on the running vLLM engine answers them
  all. Each turn keeps its prompt token ids, the sampled token ids and their log-probs (the
  engine's ``states``); the action is the decoded text, which the text env parses.
- ``update``: a transformers copy of the same model scores every sampled token (the "old"
  log-probs of the ratio; the gap to vLLM's own is reported as ``logprob_gap``, a live check of the
  weight sync), then minimises the token-level clipped GRPO objective (``grpo_loss``: per token,
  averaged per trajectory then over trajectories, or over all tokens) with an entropy bonus and an
  optional k3 KL to the initial model, and pushes the new weights into the running vLLM engine
  (``reload_weights`` + ``reset_prefix_cache``).

The vLLM engine starts once per process (``vllm_backend.shared``); an engine made for the next
search mode pushes the initial weights back instead of starting another. vLLM makes
``torch.set_num_threads`` a no-op for the whole process, so the trainer runs on the threads torch
had when vLLM started; the tiny model is built before that, on one thread.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.grpo.config import GRPOConfig, LMSettings
from envaudit.grpo.engine import ActionSample, Trajectory, aggregate, grpo_loss
from envaudit.seeding import child_rng


@dataclass(frozen=True)
class Turn:
    """One turn as the engine keeps it: the prompt, the sampled tokens and vLLM's log-prob of each."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]


class LMEngine:
    """A ``PolicyEngine`` over a causal LM: sampling on vLLM, training in transformers."""

    def __init__(self, model_dir: str, config: GRPOConfig, settings: LMSettings | None = None,
                 *, backend: Any = None, system: str | None = None) -> None:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM

        from envaudit.grpo import lm_model, vllm_backend
        from envaudit.grpo.torch_engine import Adam

        self.config = config
        self.settings = settings or LMSettings()
        self.model_dir = str(model_dir)
        self.system = system or lm_model.SYSTEM_PROMPT  # the env's own system prompt, where it has one
        tiny = lm_model.is_tiny_model(model_dir)
        s = self.settings
        self.max_new_tokens = s.max_new_tokens or (12 if tiny else 96)
        context = int(getattr(AutoConfig.from_pretrained(self.model_dir), "max_position_embeddings", 4096) or 4096)
        self.max_model_len = s.max_model_len or (min(1024, context) if tiny else min(4096, context))
        self.tokenizer = lm_model.load_tokenizer(model_dir)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None \
            else self.tokenizer.eos_token_id
        self.stop_ids = _stop_ids(self.tokenizer, self.model_dir)
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.model = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=torch.float32).to(self.device)
        self.model.eval()  # no dropout: the trainer's log-probs must be the sampler's
        self.reference = copy.deepcopy(self.model).requires_grad_(False) if config.kl_coef > 0 else None
        self.optimizer = Adam(self.model.parameters(), lr=s.learning_rate or (5e-4 if tiny else 1e-6))
        self._shuffle = child_rng(config.seed, "grpo", "lm-minibatches")
        self._prompts: dict[str, tuple[int, ...]] = {}
        self.backend = backend or vllm_backend.shared(self.model_dir, max_model_len=self.max_model_len,
                                                      seed=config.seed)
        if getattr(self.backend, "pushes", 0):  # a previous engine trained it: start from the initial weights
            self.push()
        self.timings: dict[str, float] = {"generate_s": 0.0, "generated_tokens": 0.0}

    @classmethod
    def for_env(cls, make_env: Callable[[], gym.Env], config: GRPOConfig,
                settings: LMSettings | None = None) -> LMEngine:
        """The engine for a text env: ``settings.model``, or a tiny model built for this env."""
        from envaudit.grpo.lm_model import env_system_prompt

        settings = settings or LMSettings()
        model_dir = settings.model
        system = env_system_prompt(make_env)
        if model_dir is None:
            from envaudit.grpo.lm_model import build_tiny_model
            from envaudit.grpo.torch_engine import single_thread

            with single_thread():  # before vLLM starts (it makes set_num_threads a no-op)
                model_dir = str(build_tiny_model(make_env, seed=config.seed, system=system))
        else:
            _check_text_env(make_env)
        return cls(model_dir, config, settings, system=system)

    # -- acting -------------------------------------------------------------------------------
    def encode(self, observation: Any) -> tuple[int, ...]:
        """Prompt token ids of one observation (cached: the G rollouts of a group share prompts)."""
        from envaudit.grpo.lm_model import prompt_ids

        key = str(observation)
        ids = self._prompts.get(key)
        if ids is None:
            ids = _fit(prompt_ids(self.tokenizer, key, self.system), self.max_model_len - self.max_new_tokens)
            if len(self._prompts) > 4096:
                self._prompts.clear()
            self._prompts[key] = ids
        return ids

    def sample(self, observations: Sequence[Any], step_fractions: Sequence[float],
               rng: np.random.Generator, *, greedy: bool = False) -> ActionSample:
        prompts = [self.encode(obs) for obs in observations]
        seeds = rng.integers(0, 2**31 - 1, size=len(prompts))
        start = time.perf_counter()
        completions = self.backend.generate(prompts, seeds=seeds.tolist(), max_tokens=self.max_new_tokens,
                                            stop_token_ids=self.stop_ids, greedy=greedy)
        self.timings["generate_s"] += time.perf_counter() - start
        self.timings["generated_tokens"] += sum(len(c.token_ids) for c in completions)
        actions = np.empty(len(prompts), dtype=object)
        actions[:] = [self.tokenizer.decode(c.token_ids, skip_special_tokens=True) for c in completions]
        logprobs = np.array([float(np.sum(c.logprobs)) for c in completions])
        states = [Turn(p, tuple(c.token_ids), tuple(c.logprobs)) for p, c in zip(prompts, completions, strict=True)]
        return ActionSample(actions, logprobs, states)

    # -- learning -----------------------------------------------------------------------------
    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        import torch

        c = self.config
        trajectories = [t for t in trajectories if len(t) and any(len(s.completion_ids) for s in t.states)]
        if not trajectories:
            return {"loss": 0.0, "entropy": float("nan"), "kl": float("nan"), "clip_fraction": 0.0,
                    "logprob_gap": float("nan"), "score_s": 0.0, "update_s": 0.0, "push_s": 0.0}
        # Scoring: the trainer's log-prob of every sampled token, before any gradient step.
        start = time.perf_counter()
        with torch.no_grad():
            old = list(torch.split(self._score([s for t in trajectories for s in t.states])[0],
                                   _token_counts(trajectories)))
        sampled = [torch.tensor([x for s in t.states for x in s.logprobs], dtype=torch.float32, device=self.device)
                   for t in trajectories]
        gap = float(torch.cat([(o - v).abs() for o, v in zip(old, sampled, strict=True)]).mean())
        score_s = time.perf_counter() - start
        # The clipped objective, token by token, in minibatches of whole trajectories.
        start = time.perf_counter()
        losses, clips, entropies, kls = [], [], [], []
        self.model.train()
        try:
            for _ in range(c.update_epochs):
                order = self._shuffle.permutation(len(trajectories))
                for chosen in np.array_split(order, min(c.num_minibatches, len(trajectories))):
                    loss, clip, entropy, kl = self._loss([trajectories[i] for i in chosen], [old[i] for i in chosen])
                    self.optimizer.zero_grad()
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), c.max_grad_norm)
                    self.optimizer.step()
                    losses.append(float(loss.detach()))
                    clips.append(float(clip))
                    entropies.append(float(entropy))
                    kls.append(float(kl))
        finally:
            self.model.eval()
        update_s = time.perf_counter() - start
        push_s = self.push()
        return {"loss": float(np.mean(losses)), "entropy": float(np.mean(entropies)), "kl": float(np.mean(kls)),
                "clip_fraction": float(np.mean(clips)), "logprob_gap": gap, "score_s": score_s,
                "update_s": update_s, "push_s": push_s,
                "trained_tokens": float(sum(len(o) for o in old))}

    def _score(self, turns: Sequence[Turn], *, model: Any = None, with_entropy: bool = False):
        """Per-token log-probs (and entropies) of a list of turns, flattened in order.

        Turns are scored in micro-batches of similar length (less padding), then put back in order.
        """
        import torch

        from envaudit.grpo.lm_scoring import completion_logprobs

        model = model or self.model
        rows = [i for i, t in enumerate(turns) if t.completion_ids]
        rows.sort(key=lambda i: len(turns[i].prompt_ids) + len(turns[i].completion_ids))
        logps: dict[int, Any] = {}
        ents: dict[int, Any] = {}
        step = self.settings.micro_batch_rows
        for k in range(0, len(rows), step):
            chunk = rows[k:k + step]
            batch = [(turns[i].prompt_ids, turns[i].completion_ids) for i in chunk]
            logp, ent, mask = completion_logprobs(model, batch, self.pad_id, with_entropy=with_entropy)
            for j, i in enumerate(chunk):
                logps[i] = logp[j][mask[j]]
                if with_entropy:
                    ents[i] = ent[j][mask[j]]
        order = sorted(logps)
        empty = torch.zeros(0, device=self.device)
        logp = torch.cat([logps[i] for i in order]) if order else empty
        return logp, (torch.cat([ents[i] for i in order]) if order else empty) if with_entropy else None

    def _loss(self, trajectories: Sequence[Trajectory], old: Sequence[Any]):
        import torch

        c = self.config
        counts = torch.tensor(_token_counts(trajectories))
        n = len(trajectories)
        new_t, ent_t = self._score([s for t in trajectories for s in t.states], with_entropy=True)
        owner_t = torch.repeat_interleave(torch.arange(n), counts).to(self.device)
        adv_t = torch.repeat_interleave(torch.tensor([float(t.advantage) for t in trajectories]), counts).to(self.device)
        old_t = torch.cat(list(old))
        loss, clip = grpo_loss(new_t, old_t, adv_t, owner_t, n, clip_coef=c.clip_coef,
                               aggregation=c.loss_aggregation)
        loss = loss - c.ent_coef * aggregate(ent_t, owner_t, n, c.loss_aggregation)
        kl = torch.zeros((), device=self.device)
        if self.reference is not None:
            with torch.no_grad():
                ref = self._score([s for t in trajectories for s in t.states], model=self.reference)[0]
            log_ratio = ref - new_t
            per_token = torch.exp(log_ratio) - log_ratio - 1.0  # k3, the GRPO paper's KL estimator
            kl = aggregate(per_token, owner_t, n, c.loss_aggregation)
            loss = loss + c.kl_coef * kl
        return loss, clip, aggregate(ent_t.detach(), owner_t, n, c.loss_aggregation), kl.detach()

    # -- weights ------------------------------------------------------------------------------
    def push(self) -> float:
        """Push the trainer's weights into the running vLLM engine; returns seconds."""
        seconds = self.backend.push_weights(self.model.state_dict().items())
        self.backend.pushes = getattr(self.backend, "pushes", 0) + 1
        return seconds


def _token_counts(trajectories: Sequence[Trajectory]) -> list[int]:
    return [sum(len(s.completion_ids) for s in t.states) for t in trajectories]


def _fit(ids: Sequence[int], limit: int) -> tuple[int, ...]:
    """A prompt cut to ``limit`` tokens: the head (system line, task, tools) and the latest turns."""
    if len(ids) <= limit:
        return tuple(ids)
    head = limit // 3
    return tuple(ids[:head]) + tuple(ids[len(ids) - (limit - head):])


def _stop_ids(tokenizer: Any, model_dir: str) -> list[int]:
    """Token ids that end a tool call: the tokenizer's EOS, the chat end token and the model's EOS ids."""
    ids = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    end = tokenizer.convert_tokens_to_ids("<|im_end|>") if "<|im_end|>" in tokenizer.get_vocab() else None
    if end is not None:
        ids.add(int(end))
    try:
        from transformers import GenerationConfig

        eos = GenerationConfig.from_pretrained(model_dir).eos_token_id
        ids.update([eos] if isinstance(eos, int) else list(eos or []))
    except (OSError, ValueError):
        pass
    return sorted(ids)


def _check_text_env(make_env: Callable[[], gym.Env]) -> None:
    env = make_env()
    try:
        if not isinstance(env.action_space, gym.spaces.Text):
            raise TypeError(
                f"the LM engine writes text actions, but the env's action space is {env.action_space}; "
                "use a text-mode id such as envaudit/CodeFix-Text-v0 or envaudit.textmode.make_text_env(MyToolEnv)")
    finally:
        env.close()
