"""Loading the policy: where ``--model`` points, a local model, the embedded GGUF rebuilt as a trainable model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from codegym_trainer.config import EMBEDDED_MODEL, ConfigError
from codegym_trainer.policy_loading import load_model, load_tokenizer, resolve_source


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
