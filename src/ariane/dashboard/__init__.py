"""Ariane's web dashboard (RocketMQ's rocketmq-dashboard, the book's rocketmq-console): a web
app over :class:`ariane.client.Admin`, served by Python, with the same pages and vocabulary
(Dashboard, Cluster, Topic, Consumer, Producer, Message, DLQ Message, Message Trace, ACL).

Start it with ``ariane dashboard --namesrv HOST:PORT --port 8080`` (``docs/dashboard.md``).
It needs the ``dashboard`` extra (Starlette, Jinja2, uvicorn).
"""

from __future__ import annotations

__all__: list[str] = []
