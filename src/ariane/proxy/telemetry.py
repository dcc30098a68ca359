"""The Telemetry stream (RocketMQ proxy's ``ClientActivity#telemetry``).

How it works: the client opens one bidirectional stream per endpoint and writes its
``Settings`` first (and again every few minutes). Each settings message registers the client
in the broker, is stored for later RPCs (Heartbeat, ReceiveMessage) and is answered on the
same stream with ``{status OK, settings}`` holding the effective settings; the stream becomes
the client's command channel (the last one opened wins), on which transaction checks, thread
stack and verify-message requests are written. Answers to those (thread stacks, verify
results) are handed back to the broker's waiting request.

Bad streams end with a gRPC error and a message, never a hang: settings that are neither a
producer's nor a consumer's, or invalid names, end the stream with INVALID_ARGUMENT; a stream
that sends no settings within ``settings_timeout_ms`` ends with DEADLINE_EXCEEDED.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc

from ariane.proxy.clients import TelemetryStream
from ariane.proxy.core import CallContext, Malformed, ProxyCore
from ariane.proxy.producer import ProducerService
from ariane.proxy.settings import effective_settings
from ariane.proxy.status import ProxyError, code_name, status
from ariane.proxy.v2 import definition_pb2 as pb
from ariane.proxy.v2 import service_pb2 as spb

__all__ = ["TelemetryService"]

logger = logging.getLogger(__name__)


class _StreamError(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class TelemetryService:
    """Serves ``Telemetry``."""

    def __init__(self, core: ProxyCore, producer: ProducerService) -> None:
        self.core = core
        self.producer = producer

    async def Telemetry(
        self,
        request_iterator: AsyncIterator[spb.TelemetryCommand | Malformed],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[spb.TelemetryCommand]:
        try:
            ctx = self.core.context(context)
        except ProxyError as exc:
            code = (
                grpc.StatusCode.UNAUTHENTICATED
                if exc.code == pb.UNAUTHORIZED
                else grpc.StatusCode.INVALID_ARGUMENT
            )
            await context.abort(code, exc.message)
        stream = TelemetryStream()
        failure: list[_StreamError] = []
        reader = asyncio.create_task(self._read(request_iterator, ctx, stream, failure))
        try:
            while True:
                command = await stream.queue.get()
                if command is None:
                    break
                yield command
        finally:
            stream.close()
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            session = ctx.session
            if session.stream is stream:
                session.stream = None
        if failure:
            await context.abort(failure[0].code, failure[0].message)

    async def _read(
        self,
        requests: AsyncIterator[spb.TelemetryCommand | Malformed],
        ctx: CallContext,
        stream: TelemetryStream,
        failure: list[_StreamError],
    ) -> None:
        timeout = self.core.cfg.settings_timeout_ms / 1000
        iterator = requests.__aiter__()
        got_settings = False
        try:
            while True:
                try:
                    if got_settings:
                        command = await iterator.__anext__()
                    else:
                        command = await asyncio.wait_for(iterator.__anext__(), timeout)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    raise _StreamError(
                        grpc.StatusCode.DEADLINE_EXCEEDED,
                        f"no settings received within {timeout:.0f} s: a Telemetry stream must "
                        "start with the client's settings",
                    ) from None
                if isinstance(command, Malformed):
                    raise _StreamError(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"malformed {command.type_name}: {command.error}",
                    )
                kind = command.WhichOneof("command")
                if kind == "settings":
                    await self._settings(ctx, stream, command.settings)
                    got_settings = True
                elif kind in ("thread_stack_trace", "verify_message_result"):
                    self.core.clients.client_answer(ctx.session, command)
                elif not got_settings:
                    raise _StreamError(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"a Telemetry stream must start with settings, got {kind or 'nothing'}",
                    )
        except _StreamError as exc:
            failure.append(exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning("telemetry of %s failed: %r", ctx.client_id, exc)
            failure.append(_StreamError(grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}"))
        finally:
            stream.close()

    async def _settings(
        self, ctx: CallContext, stream: TelemetryStream, settings: pb.Settings
    ) -> None:
        kind = settings.WhichOneof("pub_sub")
        try:
            if kind is None:
                raise ProxyError(
                    pb.BAD_REQUEST, "there is no publishing or subscription data in settings"
                )
            group = None
            if kind == "subscription" and settings.subscription.group.name:
                group = self.core.broker.groups.find(settings.subscription.group.name)
            reply = effective_settings(settings, self.core.cfg, group)
            ctx.session.settings = reply
            await self.producer.register(ctx, reply)
        except ProxyError as exc:
            if exc.code == pb.UNAUTHORIZED and kind is not None:
                # the settings are still answered (Node.js clients wait for them with no time
                # limit): the client starts, and each call it makes is refused with the reason
                stream.write(
                    spb.TelemetryCommand(
                        status=status(exc.code, exc.message),
                        settings=ctx.session.settings or settings,
                    )
                )
                return
            if exc.code == pb.UNAUTHORIZED:
                code = grpc.StatusCode.PERMISSION_DENIED
            elif 40000 <= exc.code < 50000:
                code = grpc.StatusCode.INVALID_ARGUMENT
            else:
                code = grpc.StatusCode.INTERNAL
            raise _StreamError(
                code,
                f"process client telemetryCommand failed: {code_name(exc.code)}: {exc.message}",
            ) from None
        previous = ctx.session.stream
        ctx.session.stream = stream
        if previous is not None and previous is not stream:
            logger.debug("client %s replaced its telemetry stream", ctx.client_id)
        stream.write(spb.TelemetryCommand(status=status(), settings=reply))
