"""RocketMQ's ``filter`` module: SQL92 property filters and TAG subscription expressions.

* :mod:`ariane.filter.sql92` - ``compile(text) -> CompiledFilter``; evaluate on properties.
* :mod:`ariane.filter.expression` - ``ExpressionType``, ``parse_tag_expression``,
  ``build_subscription``.

Pure code: no I/O, no logging; imports only :mod:`ariane.common` and :mod:`ariane.errors`.
The grammar, types and semantics are described in ``docs/filters.md``.
"""

from ariane.errors import FilterEvaluationError, FilterSyntaxError

__all__ = ["FilterEvaluationError", "FilterSyntaxError"]
