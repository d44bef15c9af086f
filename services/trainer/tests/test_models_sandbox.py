from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from codegym_trainer.config import EMBEDDED_MODEL, ConfigError, TrainConfig
from codegym_trainer.models import load_model, load_tokenizer, resolve_source
from codegym_trainer.sandbox import sandbox_argv


def test_model_sources(tmp_path: Path) -> None:
    embedded = resolve_source(EMBEDDED_MODEL)
    assert embedded.gguf_file is not None and embedded.gguf_file.endswith(".gguf")
    assert resolve_source("org/name").name_or_path == "org/name"
    assert resolve_source(str(tmp_path)).name_or_path == str(tmp_path)
    gguf = resolve_source(str(tmp_path), "m.gguf")
    assert gguf.gguf_file == "m.gguf"
    with pytest.raises(ConfigError, match="no such GGUF file"):
        resolve_source(str(tmp_path / "missing.gguf"))
    with pytest.raises(ConfigError, match="no such directory"):
        resolve_source("./not-there")


def test_local_model_loads_trainable(tiny_model_dir: Path) -> None:
    source = resolve_source(str(tiny_model_dir))
    tok = load_tokenizer(source, offline=True)
    model = load_model(source, offline=True)
    assert tok.padding_side == "left" and tok.pad_token is not None
    assert any(p.requires_grad for p in model.parameters())


@pytest.mark.slow
def test_embedded_gguf_becomes_a_trainable_model() -> None:
    source = resolve_source(EMBEDDED_MODEL)
    tok = load_tokenizer(source, offline=True)
    model = load_model(source, offline=True)
    assert not getattr(model, "is_quantized", False)
    assert getattr(model.config, "quantization_config", None) is None
    ids = tok("def add(a, b):", return_tensors="pt")["input_ids"]
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    assert torch.isfinite(loss)
    assert model.model.embed_tokens.weight.grad is not None


def test_sandbox_command_follows_the_flags() -> None:
    argv = sandbox_argv(TrainConfig(sandbox_backend="docker", sandbox_workers=3), 9999)
    assert argv[:1] == [sys.executable] and "--backend" in argv and "docker" in argv
    assert argv[argv.index("--workers") + 1] == "3" and argv[argv.index("--port") + 1] == "9999"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    with_python = sandbox_argv(TrainConfig(python_version=version), 9999)
    assert with_python[0] == "env" and with_python[1].startswith("CODEGYM_SANDBOX_PYTHON=")
    with pytest.raises(ConfigError, match=r"python9\.99"):
        sandbox_argv(TrainConfig(python_version="9.99"), 9999)
