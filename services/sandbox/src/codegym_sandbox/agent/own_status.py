"""What the kernel says of this process in ``/proc/self/status``: standard library only, for the agent's processes and
the server's pools alike."""

from __future__ import annotations


def status_kb(field: str) -> int:
    """A field of this process's ``/proc/self/status`` in kB (``RssAnon:``, ``VmSize:``), 0 where the kernel does
    not say."""
    key = field.encode()
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0
