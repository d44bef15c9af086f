"""The evaluator as a service: start an evaluation job, poll its progress, fetch its results."""
