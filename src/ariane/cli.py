"""The ``ariane`` command line: one entry point, sub-commands loaded on first use.

Each sub-command lives next to the code it drives and is registered here by dotted path, so
``ariane --help`` stays fast and a broken optional part cannot break the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

import click

from ariane.admin.command import OneLineUsage, OneLineUsageError
from ariane.errors import ArianeError

if TYPE_CHECKING:
    from ariane.broker.controller import BrokerController
    from ariane.broker.services import BrokerService

__all__ = ["LazyGroup", "OneLineUsageError", "main"]


class LazyGroup(OneLineUsage, click.Group):
    """A click group whose sub-commands are imported only when used.

    Args:
        lazy_commands: sub-command name -> ``"module.path:attribute"`` of a ``click.Command``.
    """

    def __init__(
        self, *args: object, lazy_commands: dict[str, str] | None = None, **kwargs: object
    ) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy_commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self.lazy_commands.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module_name, _, attr = target.partition(":")
        command = getattr(importlib.import_module(module_name), attr)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command

    def invoke(self, ctx: click.Context) -> object:
        """Run the sub-command; a usage error prints one line (status 2) and an error of ours
        it lets through (a NameServer nobody answers, a broker's refusal...) one line with
        status 1, never a traceback."""
        try:
            return super().invoke(ctx)
        except OneLineUsageError:
            raise
        except click.UsageError as exc:
            raise OneLineUsageError(exc.format_message(), exc.ctx) from None
        except ArianeError as exc:
            raise click.ClickException(str(exc)) from None


COMMANDS: dict[str, str] = {
    "store": "ariane.store.tools.cli:store",
    "bench": "ariane.bench.cli:bench",
    "namesrv": "ariane.namesrv.cli:namesrv",
    "broker": "ariane.broker.cli:broker",
    "standalone": "ariane.standalone:standalone",
    "cluster": "ariane.cluster:cluster",
    "admin": "ariane.admin.cli:admin",
    "pipeline": "ariane.spark.cli:pipeline",
    # the web dashboard (issue 17)
    "dashboard": "ariane.dashboard.cli:dashboard",
}


@click.group(
    cls=LazyGroup, lazy_commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.version_option(package_name="ariane")
def main() -> None:
    """Ariane: a RocketMQ-compatible message broker in Python."""
    from ariane.broker import services

    services.register(_grpc_service)


def _grpc_service(broker: BrokerController) -> BrokerService | None:
    """The gRPC proxy (issue 16) when the broker has ``grpcServerPort``; imported on use."""
    if broker.config.grpc_server_port < 0:
        return None
    from ariane.proxy.launch import grpc_service

    return grpc_service(broker)
