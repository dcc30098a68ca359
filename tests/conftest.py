"""Settings for the whole suite.

Hypothesis: no per-example deadline. The suite runs on shared, loaded machines (and some
properties fsync), where a 200 ms deadline fails tests that are correct; budgets are set per
test with ``max_examples``.
"""

from hypothesis import settings

settings.register_profile("ariane", deadline=None)
settings.load_profile("ariane")
