"""The machinery every ``mqadmin`` command shares: options, running, errors, output.

How it works: ``admin_command(name, summary)`` turns ``async def handler(ctx, **options) ->
View`` into a click command with the global options (``-n/--namesrvAddr``, ``--json``,
``--timeout-ms``). Running it starts an ``Admin`` (``ctx.admin``) on a fresh event loop, awaits
the handler, closes the admin and prints the ``View`` as tables or JSON. Every failure becomes
one line on stderr and a non-zero exit status: 1 when the operation failed (unreachable
NameServer, unknown topic, a broker's refusal), 2 for bad command-line input (click's usage
errors are shortened to one line too). ``ARIANE_DEBUG=1`` adds the traceback of unexpected
errors. Like RocketMQ's ``ServerUtil``, the NameServer address comes from ``-n``, then the
``NAMESRV_ADDR`` environment variable, then ``127.0.0.1:9876``. Requests are signed (ACL) with
``--ak``/``--sk`` (``--aclAccessKey``/``--aclSecretKey``) when given, else with the account of
``$ROCKETMQ_HOME/conf/tools.yml`` as RocketMQ's tools do.
"""

from __future__ import annotations

import asyncio
import os
import sys
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, NoReturn

import click

from ariane.admin.output import View, render_json, render_text
from ariane.admin.timefmt import parse_timestamp

if TYPE_CHECKING:
    from ariane.acl.credentials import SessionCredentials
    from ariane.client import Producer
    from ariane.client.admin import Admin

__all__ = [
    "DEFAULT_NAMESRV_ADDR",
    "OFFSET",
    "QUEUE_ID",
    "AdminCommand",
    "AdminContext",
    "CommandFailed",
    "OneLineUsage",
    "OneLineUsageError",
    "PermType",
    "TimestampType",
    "admin_command",
    "describe_error",
    "one_of",
    "resolve_credentials",
    "resolve_namesrv_addr",
]

DEFAULT_NAMESRV_ADDR = "127.0.0.1:9876"
EXIT_FAILED = 1
EXIT_USAGE = 2
#: a queue id is an int32 on the wire (RocketMQ's ``queueId``)
QUEUE_ID = click.IntRange(0, 2**31 - 1)
#: a queue or CommitLog offset is an int64
OFFSET = click.IntRange(0, 2**63 - 1)

Handler = Callable[..., Awaitable[View]]


class CommandFailed(Exception):
    """An expected failure a command reports in one line (exit status 1)."""


class OneLineUsageError(click.UsageError):
    """A usage error shown as a single line (``mqadmin topicRoute: error: ...``)."""

    def show(self, file: IO[Any] | None = None) -> None:
        name = self.ctx.command_path if self.ctx is not None else "ariane"
        message = " ".join(self.format_message().split())
        click.echo(f"{name}: error: {message} (see --help)", file=file or sys.stderr)


class OneLineUsage(click.Command):
    """Usage errors print one line (mix in before ``click.Group`` for groups)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except OneLineUsageError:
            raise
        except click.UsageError as exc:
            raise OneLineUsageError(exc.format_message(), ctx) from None


class AdminCommand(OneLineUsage):
    """A click command whose usage errors print one line."""


class TimestampType(click.ParamType[int]):
    """Epoch ms, ``now`` or ``yyyy-MM-dd#HH:mm:ss:SSS`` (see ``timefmt``)."""

    name = "timestamp"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_timestamp(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class PermType(click.ParamType[int]):
    """A ``PermName`` value: 2 (write), 4 (read) or 6 (read and write)."""

    name = "perm"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            perm = int(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a permission (2, 4 or 6)", param, ctx)
        if perm not in (2, 4, 6):
            self.fail(f"{perm} is not a permission: use 2 (W), 4 (R) or 6 (RW)", param, ctx)
        return perm


def resolve_namesrv_addr(option: str | None, environ: dict[str, str] | None = None) -> str:
    """``-n``, else ``$NAMESRV_ADDR``, else ``127.0.0.1:9876``; checked to be host:port items.

    Raises:
        click.BadParameter: an item is not ``host:port`` with a valid port.
    """
    env = os.environ if environ is None else environ
    raw = option or env.get("NAMESRV_ADDR") or DEFAULT_NAMESRV_ADDR
    items = [a.strip() for a in raw.replace(",", ";").split(";") if a.strip()]
    if not items:
        raise click.BadParameter(f"{raw!r} names no NameServer", param_hint="'-n'")
    for item in items:
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise click.BadParameter(
                f"{item!r} is not host:port (e.g. 127.0.0.1:9876)", param_hint="'-n'"
            )
    return ";".join(items)


def resolve_credentials(
    access_key: str | None, secret_key: str | None, environ: dict[str, str] | None = None
) -> SessionCredentials | None:
    """``--ak``/``--sk``, else ``$ROCKETMQ_HOME/conf/tools.yml``, else none.

    Raises:
        click.BadParameter: only one of the two flags, or an unreadable tools.yml.
    """
    from ariane.acl.credentials import SessionCredentials
    from ariane.acl.plain import credentials_from_tools_yml
    from ariane.errors import AclError

    if access_key or secret_key:
        if not (access_key and secret_key):
            raise click.BadParameter("give both --ak and --sk", param_hint="'--ak'")
        return SessionCredentials(access_key, secret_key)
    env = os.environ if environ is None else environ
    home = env.get("ROCKETMQ_HOME")
    if not home:
        return None
    path = os.path.join(home, "conf", "tools.yml")
    try:
        with open(path, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror}") from None
    try:
        return credentials_from_tools_yml(text, path)
    except AclError as exc:
        raise click.BadParameter(str(exc)) from None


def one_of(ctx: click.Context, **options: object) -> None:
    """Require exactly one of ``options`` to be given (RocketMQ's ``-b``/``-c`` groups).

    Raises:
        OneLineUsageError: none or more than one was given.
    """
    given = [name for name, value in options.items() if value not in (None, False)]
    if len(given) != 1:
        flags = " or ".join(f"-{n}" if len(n) == 1 else f"--{n}" for n in options)
        raise OneLineUsageError(f"give exactly one of {flags}", ctx)


@dataclass(slots=True)
class AdminContext:
    """What a handler gets: the started ``Admin`` and the global options."""

    admin: Admin
    namesrv_addr: str
    timeout_ms: int
    click_ctx: click.Context

    def usage_error(self, message: str) -> OneLineUsageError:
        """A one-line usage error for this command (raise it)."""
        return OneLineUsageError(message, self.click_ctx)

    def producer(self, group: str) -> Producer:
        """A producer of ``group`` on the command's NameServers, signed like the admin, with
        the command's timeout (start it with ``async with``)."""
        from dataclasses import replace

        from ariane.client import Producer

        config = replace(self.admin.client_config, instance_name=f"mqadmin-{group}-{os.getpid()}")
        return Producer(group, client_config=config, send_timeout_ms=self.timeout_ms)


def describe_error(exc: BaseException) -> str:
    """One line saying what went wrong, for people (codes by name, causes appended)."""
    from ariane.errors import BrokerResponseError, ConnectError, RequestTimeoutError

    if isinstance(exc, BrokerResponseError):
        from ariane.remoting.protocol.codes import ResponseCode

        try:
            name = ResponseCode(exc.code).name
        except ValueError:
            name = f"code {exc.code}"
        text = f"{name}: {exc.remark}" if exc.remark else name
    elif isinstance(exc, ConnectError):
        text = f"cannot connect: {exc}"
    elif isinstance(exc, RequestTimeoutError):
        text = f"timed out: {exc}"
    else:
        text = str(exc) or type(exc).__name__
    cause = exc.__cause__
    if cause is not None and not isinstance(exc, CommandFailed):
        text = f"{text} ({describe_error(cause)})"
    return " ".join(text.split())


def _fail(command: str, message: str, status: int = EXIT_FAILED) -> NoReturn:
    click.echo(f"{command}: {message}", err=True)
    sys.exit(status)


async def _run(handler: Handler, ctx: AdminContext, kwargs: dict[str, Any]) -> View:
    admin = ctx.admin
    await admin.start()
    try:
        return await handler(ctx, **kwargs)
    finally:
        await admin.close()


def _execute(
    handler: Handler,
    click_ctx: click.Context,
    namesrv_addr: str | None,
    as_json: bool,
    timeout_ms: int,
    kwargs: dict[str, Any],
) -> None:
    name = click_ctx.command_path
    access_key = kwargs.pop("acl_access_key", None)
    secret_key = kwargs.pop("acl_secret_key", None)
    try:
        addr = resolve_namesrv_addr(namesrv_addr)
        credentials = resolve_credentials(access_key, secret_key)
    except click.BadParameter as exc:
        raise OneLineUsageError(exc.format_message(), click_ctx) from None
    from ariane.client.admin import Admin
    from ariane.errors import ArianeError

    admin = Admin(
        namesrv_addr=addr,
        instance_name=f"mqadmin-{os.getpid()}",
        timeout_ms=timeout_ms,
        credentials=credentials,
    )
    ctx = AdminContext(admin, addr, timeout_ms, click_ctx)
    try:
        view = asyncio.run(_run(handler, ctx, kwargs))
    except OneLineUsageError:
        raise
    except click.UsageError as exc:
        raise OneLineUsageError(exc.format_message(), click_ctx) from None
    except (CommandFailed, ArianeError) as exc:
        _fail(name, describe_error(exc))
    except KeyboardInterrupt:
        _fail(name, "interrupted", 130)
    except Exception as exc:
        if os.environ.get("ARIANE_DEBUG"):
            traceback.print_exc()
        _fail(name, f"internal error: {type(exc).__name__}: {describe_error(exc)}")
    try:
        if as_json:
            render_json(view)
        else:
            render_text(view)
    except BrokenPipeError:
        sys.stderr.close()  # the reader went away (| head): not an error worth a traceback


_GLOBAL_OPTIONS: Sequence[Callable[[Any], Any]] = (
    click.option(
        "-n",
        "--namesrvAddr",
        "namesrv_addr",
        metavar="ADDR",
        default=None,
        help="NameServer address list, e.g. 192.168.0.1:9876;192.168.0.2:9876 "
        f"(default: $NAMESRV_ADDR, then {DEFAULT_NAMESRV_ADDR}).",
    ),
    click.option("--json", "as_json", is_flag=True, help="Print JSON (stable keys) for scripts."),
    click.option(
        "--timeout-ms",
        "timeout_ms",
        type=click.IntRange(1, 600_000),
        default=5000,
        show_default=True,
        help="Timeout of each request.",
    ),
    click.option(
        "--ak",
        "--aclAccessKey",
        "acl_access_key",
        metavar="AK",
        default=None,
        help="ACL account to sign requests with (default: accessKey of "
        "$ROCKETMQ_HOME/conf/tools.yml).",
    ),
    click.option(
        "--sk",
        "--aclSecretKey",
        "acl_secret_key",
        metavar="SK",
        default=None,
        help="That account's secret (default: secretKey of tools.yml).",
    ),
)


def admin_command(name: str, summary: str) -> Callable[[Handler], click.Command]:
    """Make ``handler`` (decorated with its own ``click.option``s) the command ``name``.

    Args:
        name: the RocketMQ command name (``updateTopic``).
        summary: the one-line description shown in the command list.
    """

    def decorate(handler: Handler) -> click.Command:
        @click.pass_context
        def callback(
            click_ctx: click.Context,
            /,
            namesrv_addr: str | None,
            as_json: bool,
            timeout_ms: int,
            **kwargs: Any,
        ) -> None:
            _execute(handler, click_ctx, namesrv_addr, as_json, timeout_ms, kwargs)

        params = list(getattr(handler, "__click_params__", ()))
        callback.__click_params__ = params  # type: ignore[attr-defined]
        for option in _GLOBAL_OPTIONS:
            option(callback)
        command = click.command(
            name,
            cls=AdminCommand,
            help=handler.__doc__,
            short_help=summary,
            context_settings={"help_option_names": ["-h", "--help"]},
        )(callback)
        return command

    return decorate
