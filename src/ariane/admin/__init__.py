"""RocketMQ's ``admin`` tools: the ``mqadmin`` command line (``ariane admin <command>``).

Built on ``ariane.client.Admin``; see ``docs/admin.md``. ``cli`` holds the command group,
``command`` the shared machinery (options, errors, output), and one module per command family
(``topic``, ``group``, ``cluster``, ``offsets``, ``messages``, ``namesrv``, ``stats``).
"""
