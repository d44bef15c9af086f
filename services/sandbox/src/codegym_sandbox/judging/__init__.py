"""Judging: what a request to judge programs means, and every verdict decision above a single run.

- ``schedule``: which runs go to which worker together, in what order, and early stop (``/v1/evaluate``);
- ``judge``: a test's verdict from its run, a program's from its tests', an execution's from its steps;
- ``harness``: the Python harnesses of call and assert tests (the assert runner's stdin, its exit status);
- ``compare``: a program's output against the expected output (a returned value: ``agent/call_test``);
- ``wire``: a step in the native wire model, for the judge's answers and the routes'.

Layers (checked by import-linter, see the root ``pyproject.toml``): ``api`` → ``judging`` → ``executor`` →
``backends`` → ``agent``. How one finished run ended (limits, signal, exit status, memory, a failed compile,
a Python SyntaxError) is :func:`codegym_sandbox.verdicts.run_end`, one function in a low-level module, not
here: the executor gives every step that ``RunEnd``, to cache it (a timeout or a sandbox error is never
cached), to count it and to answer ``/v1/execute`` and ``/run_code`` with it, and it may not import the layer
above it. A run's end is no verdict: the judge decides every test's from it (AC or WA for a run that exited,
assert and call tests) and the program's; the API's routes only adapt HTTP to these calls, and clients take
the verdicts as given.
"""
