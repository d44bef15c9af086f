"""The differential verdict test (issues 26 and 31): codegym's routes against a plain reference, on programs a
policy writes, so that a family of attacks or of honest programs judged wrong shows here before it shows in a
reward.

Four layers, each judged by the plain reference (``reference.py``) and by codegym's routes (``routes.py``):

- the corpus (``corpus.py``, ``test_verdict_diff.py``): small tasks and completions made by hand in every
  form, each attack family of a round as a variant (``variants.py``, ``comparisons.py``, ``families.py``);
- real completions (``completions.py``): the embedded model's answers to HumanEval, generated once by
  ``make_completions.py`` and shipped in ``fixtures/``;
- repeats (``test_repeats.py``): a program judged twice across its time limit, the caches on;
- the generative layer (``generative.py``, ``test_generative.py``): programs hypothesis builds from the I/O
  idioms of each language (``idioms.py``) and the attack families' building blocks (``blocks.py``).

A new family is one building block away. An attack is written once as a block of ``blocks.BLOCKS`` (a function
body: its mechanism, setting ``_STOLEN`` where it steals an answer), and the generative layer runs it in every
form and place, alone and with every other block; an honest idiom is a reader or writer of its language in
``idioms.py``. Where a family needs a task or a route of its own (a dataset's rule, a set-up, a cache), it is a
list of items in the corpus (``families.py`` is the pattern: a task, its variants with their labels, and the
routes and forms they go to), and ``report.family`` names it in ``bench/verdict_diff.py --by-family``.
"""
