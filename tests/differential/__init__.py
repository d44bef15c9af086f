"""Issue 26's differential verdict test: codegym's routes against a plain reference, on a corpus of completions."""
