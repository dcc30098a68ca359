"""Request dispatch shared by server and client (RocketMQ ``NettyRemotingAbstract.
processRequestCommand``, ``NettyRequestProcessor``, ``RPCHook``).

How it works: a request is looked up by code in the processor table (falling back to the
default processor). Before that, every ``RemotingHook.before_request`` runs; a hook may answer
the request itself (ACL) by returning a response or raising ``RequestError``.

A processor is ``process(ctx, request)`` — a method of an object or a plain callable — that
returns one of:

* a ``RemotingCommand``: the response, sent at once (no task is created: the fast path);
* ``None``: no response now; the processor may answer later with ``ctx.send_response``
  (long polling) or never (one-way semantics);
* an awaitable (``async def`` processors): it runs as a task and its result is the response.

Responses get the request's opaque, the response flag and the request's header
serialisation. One-way requests never get a response, not even an error. Errors never escape:
``RequestError`` becomes a response with its code and remark; a request that does not decode
(``RemoteProtocolError``, ``InvalidArgumentError``) becomes INVALID_PARAMETER; any other
exception becomes SYSTEM_ERROR with a remark and is logged with its traceback. Unknown codes are answered with
REQUEST_CODE_NOT_SUPPORTED.

*Run processors* (``register_run_processor``) take a whole run of consecutive requests of
their codes from one read (``handle_run``, called by the channel): the send processor handles
a read's plain single sends in one pass (``broker/processors/send_run.py``). A run processor
owns every request it is given (it answers each, or hands it to ``handle_request``, in
arrival order). Runs are only formed while every hook says it ignores the code
(``hook.ignores(code)``; a hook without that method, an ACL, disables them): ``run_codes``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import Any, Protocol, TypeAlias, cast

from ariane.errors import (
    ArianeError,
    InvalidArgumentError,
    LocalProtocolError,
    RemoteProtocolError,
    RequestError,
)
from ariane.remoting.channel import Channel
from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.command import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    RemotingCommand,
    make_response_for,
)
from ariane.remoting.protocol.rawsend import RAW_CLASS

__all__ = [
    "Dispatcher",
    "DispatchingEndpoint",
    "ProcessFunction",
    "ProcessResult",
    "RemotingHook",
    "RequestContext",
    "RequestProcessor",
    "RunProcessor",
]

logger = logging.getLogger(__name__)

ProcessResult: TypeAlias = RemotingCommand | Awaitable[RemotingCommand | None] | None
#: ``run(channel, requests)``: handles every request of a run (see the module docstring)
RunProcessor: TypeAlias = Callable[[Channel, list[RemotingCommand]], None]


class RequestContext:
    """What a processor knows about the request in hand.

    Attributes:
        channel: the connection the request came on.
        request: the request.
    """

    __slots__ = ("_dispatcher", "channel", "request", "responded")

    def __init__(self, dispatcher: Dispatcher, channel: Channel, request: RemotingCommand) -> None:
        self._dispatcher = dispatcher
        self.channel = channel
        self.request = request
        self.responded = False

    @property
    def remote_addr(self) -> str:
        """The peer as ``"host:port"``."""
        return self.channel.remote_addr

    def send_response(self, response: RemotingCommand) -> bool:
        """Answer the request now or later (long polling); the first answer wins.

        Returns:
            ``True`` if the response was queued, ``False`` if the request was one-way, was
            already answered or the connection is gone.
        """
        return self._dispatcher.respond(self, response)


class RequestProcessor(Protocol):
    """An object that processes requests (``NettyRequestProcessor``)."""

    def process(self, ctx: RequestContext, request: RemotingCommand) -> ProcessResult:
        """Process one request; see the module docstring for the result forms."""
        ...


ProcessFunction: TypeAlias = Callable[[RequestContext, RemotingCommand], ProcessResult]


class RemotingHook(Protocol):
    """Cross-cutting code around every request (``RPCHook``): ACL, metrics, tracing.

    On a server, ``before_request`` may return a response (or raise ``RequestError``) to answer
    the request without processing it. On a client, it runs before each request is sent and
    may add ``ext_fields`` (signatures); a returned response is used as the answer instead of
    sending. ``after_response`` sees every response (``None`` for one-way requests). A hook
    whose ``after_response`` does nothing may say so with a class attribute
    ``observes_responses = False``: a server's dispatcher then does not call it per response.
    """

    def before_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Inspect or amend a request; return a response to short-circuit it."""
        ...

    def after_response(
        self, channel: Channel, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        """Observe a response."""
        ...


class Dispatcher:
    """Processor table, hooks and the request/response bookkeeping around them."""

    def __init__(self) -> None:
        self._processors: dict[int, ProcessFunction] = {}
        self._default: ProcessFunction | None = None
        self.hooks: list[RemotingHook] = []
        self._response_hooks: list[RemotingHook] = []  # hooks but observes_responses = False
        self._tasks: set[asyncio.Future[RemotingCommand | None]] = set()
        self._runs: dict[int, RunProcessor] = {}
        #: codes a channel hands over as runs (``handle_run``); empty while a hook objects
        self.run_codes: frozenset[int] = frozenset()
        #: whether a channel may hand a run's plain single sends as ``RawSend`` frames (set by
        #: the send pass while it takes them)
        self.raw_sends = False

    def register_run_processor(self, codes: Iterable[int], run: RunProcessor) -> None:
        """Route runs of consecutive requests with one of ``codes`` to ``run`` (the request
        processors of those codes stay registered for everything else)."""
        for code in codes:
            self._runs[int(code)] = run
        self._update_run_codes()

    def _update_run_codes(self) -> None:
        codes = set(self._runs)
        for hook in self.hooks:
            ignores = getattr(hook, "ignores", None)
            if ignores is None:
                codes.clear()
                break
            codes = {c for c in codes if ignores(c)}
        self.run_codes = frozenset(codes)

    def handle_run(self, channel: Channel, requests: list[RemotingCommand]) -> None:
        """Process a run of requests whose codes are in ``run_codes`` (called by the channel,
        inline), each sub-run of one run processor in one call."""
        runs = self._runs
        start = 0
        count = len(requests)
        while start < count:
            run = runs.get(requests[start].code)
            end = start + 1
            while end < count and runs.get(requests[end].code) is run:
                end += 1
            part = requests[start:end] if start or end < count else requests
            if run is None:  # unregistered since the channel looked
                for request in part:
                    self.handle_request(channel, request)
            else:
                run(channel, part)
            start = end

    def register_processor(self, code: int, processor: RequestProcessor | ProcessFunction) -> None:
        """Route requests with ``code`` to ``processor`` (replacing any previous one)."""
        self._processors[int(code)] = _as_function(processor)

    def register_default_processor(self, processor: RequestProcessor | ProcessFunction) -> None:
        """Route requests with no registered code to ``processor``."""
        self._default = _as_function(processor)

    def register_hook(self, hook: RemotingHook) -> None:
        """Add a hook; hooks run in registration order."""
        self.hooks.append(hook)
        if getattr(hook, "observes_responses", True) is not False:
            self._response_hooks.append(hook)
        self._update_run_codes()

    @property
    def tasks(self) -> set[asyncio.Future[RemotingCommand | None]]:
        """Requests being processed asynchronously."""
        return self._tasks

    def handle_request(self, channel: Channel, request: RemotingCommand) -> None:
        """Process one request (called by the channel, inline)."""
        if request.__class__ is RAW_CLASS:  # a frame a run left raw (rawsend.py)
            request = cast(Any, request).command()
        ctx = RequestContext(self, channel, request)
        try:
            for hook in self.hooks:
                early = hook.before_request(channel, request)
                if early is not None:
                    self.respond(ctx, early)
                    return
            process = self._processors.get(request.code, self._default)
            if process is None:
                result: ProcessResult = make_response_for(
                    request,
                    ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                    f" request type {request.code} not supported",
                )
            else:
                result = process(ctx, request)
        except Exception as exc:  # every failure becomes a response
            self.respond(ctx, self._error_response(ctx, exc))
            return
        if result is None:
            return
        if isinstance(result, RemotingCommand):
            self.respond(ctx, result)
            return
        # a coroutine becomes a task, a future is used as is; either way no wrapper coroutine
        try:
            future = asyncio.ensure_future(result)
        except TypeError:
            bad = TypeError(f"processor returned {type(result).__name__}, not a response")
            self.respond(ctx, self._error_response(ctx, bad))
            return
        channel.begin_async()
        if isinstance(future, asyncio.Task):
            self._tasks.add(future)
        future.add_done_callback(partial(self._finish, ctx))

    def _finish(self, ctx: RequestContext, future: asyncio.Future[RemotingCommand | None]) -> None:
        self._tasks.discard(future)
        ctx.channel.end_async()
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            response: RemotingCommand | None = (
                self._error_response(ctx, exc) if isinstance(exc, Exception) else None
            )
        else:
            response = future.result()
        if response is not None:
            self.respond(ctx, response)

    def respond(self, ctx: RequestContext, response: RemotingCommand) -> bool:
        """Send ``response`` for ``ctx.request`` (see ``RequestContext.send_response``)."""
        request = ctx.request
        if ctx.responded or request.flag & FLAG_ONEWAY:
            ctx.responded = True
            return False
        ctx.responded = True
        response.opaque = request.opaque
        response.flag |= FLAG_RESPONSE
        response.serialize_type = request.serialize_type
        for hook in self._response_hooks:
            try:
                hook.after_response(ctx.channel, request, response)
            except Exception:
                logger.exception("after_response hook %r failed", hook)
        try:
            return ctx.channel.send(response)
        except LocalProtocolError as exc:
            logger.error(
                "%r: cannot encode the response to %s: %s", ctx.channel, request.describe(), exc
            )
            return ctx.channel.send(
                make_response_for(
                    request, ResponseCode.SYSTEM_ERROR, f"response not encodable: {exc}"
                )
            )

    @staticmethod
    def _error_response(ctx: RequestContext, exc: Exception) -> RemotingCommand:
        request = ctx.request
        if isinstance(exc, RequestError):
            logger.debug("%r: %s rejected: %s", ctx.channel, request.describe(), exc.remark)
            return make_response_for(request, exc.code, exc.remark)
        if isinstance(exc, (RemoteProtocolError, InvalidArgumentError)):
            # the request itself is malformed (a body or field that does not decode)
            logger.info("%r: %s refused: %s", ctx.channel, request.describe(), exc)
            return make_response_for(
                request, ResponseCode.INVALID_PARAMETER, f"{type(exc).__name__}: {exc}"
            )
        if isinstance(exc, ArianeError):
            logger.warning("%r: %s failed: %s", ctx.channel, request.describe(), exc)
        else:
            logger.error("%r: processing %s raised", ctx.channel, request.describe(), exc_info=exc)
        return make_response_for(request, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")


def _as_function(processor: RequestProcessor | ProcessFunction) -> ProcessFunction:
    process = getattr(processor, "process", None)
    if callable(process):
        return process  # type: ignore[no-any-return]
    if callable(processor):
        return processor
    raise TypeError(f"{processor!r} is neither a processor nor a callable")


class DispatchingEndpoint:
    """Processor and hook registration shared by ``RemotingServer`` and ``RemotingClient``."""

    dispatcher: Dispatcher

    def register_processor(self, code: int, processor: RequestProcessor | ProcessFunction) -> None:
        """Route incoming requests with ``code`` to ``processor``."""
        self.dispatcher.register_processor(code, processor)

    def register_default_processor(self, processor: RequestProcessor | ProcessFunction) -> None:
        """Route every unregistered code to ``processor`` (else REQUEST_CODE_NOT_SUPPORTED)."""
        self.dispatcher.register_default_processor(processor)

    def register_hook(self, hook: RemotingHook) -> None:
        """Run ``hook`` around every request (server: received; client: sent)."""
        self.dispatcher.register_hook(hook)
