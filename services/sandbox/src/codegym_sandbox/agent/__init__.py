"""The sandbox agent: forks, isolates and supervises untrusted programs. Standard library only."""
