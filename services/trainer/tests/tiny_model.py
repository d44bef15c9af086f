"""A tiny causal LM built on the spot: a byte-level BPE tokenizer trained in a second and a 2-layer Llama.

A test fixture (``conftest.py``'s ``tiny_model_dir``), not part of the trainer: for smoke tests of the whole
GRPO loop and for the learning-signal benchmark (``bench/learning_signal.py``), where a real model would take
minutes a step. The tokenizer learns whole tokens for short Python programs (``print(1)``), so a
one-token completion can already be a valid program and GRPO has something to find.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIAL = ["<|pad|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]

# Short programs (valid, and broken ones) and prose, so the vocabulary holds both kinds of tokens.
CORPUS = [
    "print(1)",
    "print(2)",
    "print('hi')",
    "x = 1",
    "pass",
    "print(x)",
    "def f(a, b):\n    return a + b",
    "import sys",
    "1 +",
    "print(",
    "return )",
    "))",
    "Write a Python program that reads from standard input and writes to standard output.",
    "You are an expert programmer. Answer with a single complete program in one fenced code block.",
    "Write a function that returns the sum of two numbers.",
] * 20


def build_tiny_model(directory: Path, *, seed: int = 0, hidden: int = 64, layers: int = 2) -> Path:
    """Write a tiny Llama and its tokenizer to ``directory`` (loadable with ``from_pretrained``)."""
    directory.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator(CORPUS, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=bpe, pad_token="<|pad|>", eos_token="<|end|>", bos_token="<|system|>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(directory)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
        tie_word_embeddings=True,
    )
    LlamaForCausalLM(config).save_pretrained(directory)
    return directory
