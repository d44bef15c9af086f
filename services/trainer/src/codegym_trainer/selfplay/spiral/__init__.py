"""SPIRAL: the policy plays both roles of a two-role game against itself.

``rollout``: a step's games as samples (turns with their game's return); ``evaluation``: win rates against
fixed opponents; ``run``: ``codegym-train --task spiral``.
"""

from __future__ import annotations

from .evaluation import SelfPlayEvaluator, SelfPlayPoint
from .rollout import SelfPlayRollout, game_return

__all__ = ["SelfPlayEvaluator", "SelfPlayPoint", "SelfPlayRollout", "game_return"]
