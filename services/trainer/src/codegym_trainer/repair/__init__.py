"""Code repair (``codegym-train --task code-repair``): the policy answers, reads its public tests' feedback,
and answers again, up to ``--max-turns`` turns, through the trainer's seam (:mod:`.rollout`)."""

from .rollout import CodeRepairRollout, public_task

__all__ = ["CodeRepairRollout", "public_task"]
