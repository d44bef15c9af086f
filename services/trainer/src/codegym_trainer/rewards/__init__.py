"""Rewards for GRPO: the reward tables and the sandbox-backed reward function in TRL's shape."""

from __future__ import annotations

from .sandbox_reward import BatchReport, SandboxReward, answer_text
from .schemes import execution_reward, tests_reward
from .verdict_rates import VerdictStats

__all__ = ["BatchReport", "SandboxReward", "VerdictStats", "answer_text", "execution_reward", "tests_reward"]
