"""Where programs run. A backend starts agents and hands out one at a time per run."""
