"""Stateful interpreter sessions: a Python kernel kept between calls, in a worker of its own."""
