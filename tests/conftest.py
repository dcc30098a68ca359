"""Settings for the whole suite.

Hypothesis: no per-example deadline. The suite runs on shared, loaded machines (and some
properties fsync), where a 200 ms deadline fails tests that are correct; budgets are set per
test with ``max_examples``.

xdist groups: ``make test`` runs ``--dist loadgroup`` so that the tests of one
``xdist_group`` (one Spark JVM, one shared cluster...) run in the same worker. pytest-xdist
3.8 marks an item's group by assigning ``item._nodeid``, which pytest 9 no longer reads (the
id lives in ``item._id``), so every group was silently spread over both workers. The hook
below adds the ``@group`` suffix the way xdist means to, and steps aside once xdist's own
suffix shows.
"""

from __future__ import annotations

import pytest
from _pytest.nodeid import NodeId
from hypothesis import settings

settings.register_profile("ariane", deadline=None)
settings.load_profile("ariane")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        groups = {
            str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
            for mark in item.iter_markers("xdist_group")
        }
        if groups and "@" not in item.nodeid:
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(sorted(groups))}")
