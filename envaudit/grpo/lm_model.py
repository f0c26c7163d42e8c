"""The language model the LM engine trains: any local Hugging Face causal LM, or a tiny one built here.

With no ``--model DIR``, ``build_tiny_model`` makes one from scratch, nothing downloaded:

1. **corpus**: random episodes of the text env (``envaudit.textmode``), every turn rendered as the
   chat prompt the engine will show (system line + transcript) followed by a uniformly random
   catalogue call, the scan's random explorer in text;
2. **tokenizer**: a byte-level BPE trained on that corpus with ``tokenizers``, so the env's tool
   syntax and transcript phrases are single tokens or few (bytes cover any other text), with
   ChatML special tokens and chat template;
3. **model**: a Qwen2-style decoder (hidden 128, 4 heads, 2 KV heads: vLLM's CPU attention needs
   a head size of at least 32), randomly initialised from the seed;
4. **syntax warm-up**: a few hundred steps of next-token training on the corpus completions, so
   the starting policy writes valid calls, about uniformly at random, the way a pretrained agent
   model starts; a randomly initialised model would write nothing but parse errors.

The directory is cached under the system temp folder by a hash of the corpus and the settings, so
a second scan of the same env and seed reuses it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.seeding import child_rng, child_seed

SYSTEM_PROMPT = "You are an agent that uses tools. Answer with exactly one tool call."
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
BUILDER_VERSION = 4
MARKER = "envaudit-tiny-model.json"
"""File in a tiny model's directory: how it was built (and that its tokenizer is read as is)."""


@dataclass(frozen=True)
class TinyModelSpec:
    """Shape and warm-up of the tiny model built when no ``--model`` is given."""

    vocab_size: int = 1024
    hidden_size: int = 128
    intermediate_size: int = 256
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 2048
    corpus_episodes: int = 48
    warmup_steps: int = 300
    warmup_batch: int = 16
    warmup_lr: float = 3e-3

    def __post_init__(self) -> None:
        head = self.hidden_size // self.num_attention_heads
        if head < 32 or self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size / num_attention_heads must be a whole head size of at least 32 "
                             f"(vLLM's CPU attention), got {self.hidden_size} / {self.num_attention_heads}")
        if self.vocab_size < 300:
            raise ValueError(f"vocab_size must be at least 300 (256 bytes + special tokens + merges), "
                             f"got {self.vocab_size}")


def system_prompt_of(env: gym.Env) -> str:
    """The env's own system prompt (an ecosystem adapter's ``system_prompt``), else envaudit's."""
    return getattr(env.unwrapped, "system_prompt", None) or SYSTEM_PROMPT


def chat_messages(observation: str, system: str = SYSTEM_PROMPT) -> list[dict[str, str]]:
    """The chat the engine shows the model for one turn: a system line and the transcript."""
    return [{"role": "system", "content": system}, {"role": "user", "content": str(observation)}]


def prompt_ids(tokenizer: Any, observation: str, system: str = SYSTEM_PROMPT) -> list[int]:
    """Token ids of one turn's prompt, through the tokenizer's chat template when it has one."""
    messages = chat_messages(observation, system)
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):  # transformers 5 may return a BatchEncoding
            ids = ids["input_ids"]
        return [int(i) for i in ids]
    text = f"{system}\n\n{observation}\n\nTool call:"
    return [int(i) for i in tokenizer(text, add_special_tokens=True)["input_ids"]]


# -- corpus -------------------------------------------------------------------------------------
def collect_turns(make_env: Callable[[], gym.Env], episodes: int, seed: int) -> list[tuple[str, str]]:
    """(observation, call) for every turn of ``episodes`` random text-mode episodes."""
    rng = child_rng(seed, "lm", "corpus")
    env = make_env()
    if not isinstance(env.action_space, gym.spaces.Text) or not isinstance(env.observation_space, gym.spaces.Text):
        env.close()
        raise TypeError(
            f"the LM engine needs a text tool env (Text actions and observations), got actions "
            f"{env.action_space} and observations {env.observation_space}; use a text-mode id such as "
            "envaudit/CodeFix-Text-v0 or envaudit.textmode.make_text_env(MyToolEnv)")
    turns: list[tuple[str, str]] = []
    try:
        for _ in range(episodes):
            env.action_space.seed(int(rng.integers(2**31)))
            obs, _ = env.reset(seed=int(rng.integers(2**31)))
            done = False
            while not done:
                call = env.action_space.sample()
                turns.append((str(obs), str(call)))
                obs, _, terminated, truncated, _ = env.step(call)
                done = terminated or truncated
    finally:
        env.close()
    return turns


def corpus_key(turns: Sequence[tuple[str, str]], spec: TinyModelSpec, seed: int,
               system: str = SYSTEM_PROMPT) -> str:
    extra = [] if system == SYSTEM_PROMPT else [system]  # keys of envaudit's own prompt stay as they were
    digest = hashlib.sha256(json.dumps([BUILDER_VERSION, asdict(spec), seed, list(turns), *extra]).encode())
    return digest.hexdigest()[:16]


# -- tokenizer ----------------------------------------------------------------------------------
def train_tokenizer(texts: Sequence[str], vocab_size: int) -> Any:
    """A byte-level BPE tokenizer trained on ``texts`` (a ``PreTrainedTokenizerFast``)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(list(texts), trainer=trainer)
    return _wrap_tokenizer(PreTrainedTokenizerFast, tokenizer_object=tok)


def _wrap_tokenizer(cls: Any, **source: Any) -> Any:
    fast = cls(**source, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None, unk_token=None)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def load_tokenizer(model_dir: str | os.PathLike) -> Any:
    """The tokenizer of ``model_dir``, exactly as the trainer and the engine must both use it.

    A tiny model's tokenizer is read from its ``tokenizer.json`` as is: ``AutoTokenizer`` would
    pick the tokenizer class of the model type (Qwen2) and re-split the text its own way.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    path = Path(model_dir)
    if (path / MARKER).exists():
        return _wrap_tokenizer(PreTrainedTokenizerFast, tokenizer_file=str(path / "tokenizer.json"))
    return AutoTokenizer.from_pretrained(str(path))


def is_tiny_model(model_dir: str | os.PathLike) -> bool:
    return (Path(model_dir) / MARKER).exists()


# -- model --------------------------------------------------------------------------------------
def build_tiny_model(
    make_env: Callable[[], gym.Env],
    *,
    seed: int = 0,
    spec: TinyModelSpec | None = None,
    cache_dir: str | os.PathLike | None = None,
    system: str | None = None,
) -> Path:
    """Build (or reuse from the cache) the tiny model for ``make_env``'s text env; returns its dir.
    ``system`` is the env's system prompt when the caller already has it (``env_system_prompt``)."""
    spec = spec or TinyModelSpec()
    turns = collect_turns(make_env, spec.corpus_episodes, seed)
    system = system or env_system_prompt(make_env)
    root = Path(cache_dir) if cache_dir is not None else Path(tempfile.gettempdir()) / "envaudit-lm"
    out = root / f"tiny-{corpus_key(turns, spec, seed, system)}"
    if (out / "done").exists():
        return out
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=_mkdir(root)))
    try:
        _build(turns, spec, seed, tmp, system)
        (tmp / "done").write_text("ok\n")
        try:
            tmp.rename(out)
        except OSError:  # another process built it first: use theirs
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def env_system_prompt(make_env: Callable[[], gym.Env]) -> str:
    env = make_env()
    try:
        return system_prompt_of(env)
    finally:
        env.close()


def _build(turns: Sequence[tuple[str, str]], spec: TinyModelSpec, seed: int, out: Path,
           system: str = SYSTEM_PROMPT) -> None:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    rendered = [render_chat(obs, system) + call + "<|im_end|>\n" for obs, call in turns]
    tokenizer = train_tokenizer(rendered, spec.vocab_size)
    eos, pad = tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=spec.hidden_size, intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers, num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads, max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=True, bos_token_id=eos, eos_token_id=eos, pad_token_id=pad,
        use_sliding_window=False, torch_dtype="float32",
    )
    with torch.random.fork_rng(devices=[]):  # the global torch RNG stays as the caller left it
        torch.manual_seed(child_seed(seed, "lm", "init"))
        model = Qwen2ForCausalLM(config).float()
    rows = [(prompt_ids(tokenizer, obs, system), tokenizer(call, add_special_tokens=False)["input_ids"] + [eos])
            for obs, call in turns]
    warm_up(model, rows, spec, seed, pad)
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = pad
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / MARKER).write_text(json.dumps({"builder_version": BUILDER_VERSION, "seed": seed,
                                                   "spec": asdict(spec), "turns": len(turns)}, indent=1))


def render_chat(observation: str, system: str = SYSTEM_PROMPT) -> str:
    """``CHAT_TEMPLATE`` rendered as text for one turn (what the tokenizer is trained on)."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n"
                   for m in chat_messages(observation, system)) \
        + "<|im_start|>assistant\n"


def warm_up(model: Any, rows: Sequence[tuple[list[int], list[int]]], spec: TinyModelSpec, seed: int,
            pad_id: int) -> list[float]:
    """Next-token training on the completions of ``rows`` (prompt ids, completion ids); returns losses."""
    import torch

    from envaudit.grpo.lm_scoring import completion_logprobs
    from envaudit.grpo.torch_engine import Adam

    rng = np.random.default_rng(child_seed(seed, "lm", "warmup"))
    optimizer = Adam(model.parameters(), lr=spec.warmup_lr)
    model.train()
    losses = []
    for _ in range(spec.warmup_steps):
        batch = [rows[i] for i in rng.choice(len(rows), size=min(spec.warmup_batch, len(rows)), replace=False)]
        logp, _, mask = completion_logprobs(model, batch, pad_id)
        loss = -(logp * mask).sum() / mask.sum()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses
