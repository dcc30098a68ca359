"""The one exception tree of Ariane.

Expected outcomes on hot paths are status enums (``PutStatus``, ``GetStatus``...), as in
RocketMQ; exceptions mean bad input, corruption, transport failure or a broker refusal.

::

    ArianeError
    ├── ConfigError                 bad configuration value (names the key)
    │   └── WorkerPythonError       Spark's Python workers cannot import ariane (PYSPARK_PYTHON)
    ├── InvalidArgumentError        a caller passed something illegal
    │   ├── FilterSyntaxError       a SQL92 filter expression does not compile (position)
    │   └── FilterEvaluationError   a SQL92 filter failed on one message (not a match)
    ├── StoreError
    │   ├── CorruptionError         bytes on disk or on the wire do not decode (path, pos)
    │   ├── StoreDamagedError       the store refuses to start: damage it must not guess about
    │   └── StoreClosedError        the store was shut down
    ├── ProtocolError
    │   ├── LocalProtocolError      we were asked to encode something illegal
    │   ├── RemoteProtocolError     the peer sent bytes that do not decode
    │   └── TraceDecodeError        a message-trace record does not decode (names the record)
    ├── ConnectionError_
    │   ├── ConnectionClosedError   the connection went away while a request was in flight
    │   └── ConnectError            could not connect
    ├── RequestTimeoutError         no response within the timeout
    ├── DataLossError               messages a reader was asked for no longer exist
    ├── AclError                    an ACL file, rule or account is invalid (names what)
    ├── RequestError                a request cannot be served; the server answers (code, remark)
    │   └── HeaderFieldError        a custom-header field is missing or malformed (names the key)
    └── BrokerResponseError         a response code other than SUCCESS (code, remark);
                                    subclasses per code are registered by the client layer

``retriable`` tells a caller whether trying again (possibly elsewhere) can help.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "AclError",
    "ArianeError",
    "BrokerResponseError",
    "ConfigError",
    "ConnectError",
    "ConnectionClosedError",
    "ConnectionError_",
    "CorruptionError",
    "DataLossError",
    "FilterEvaluationError",
    "FilterSyntaxError",
    "HeaderFieldError",
    "InvalidArgumentError",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
    "RequestError",
    "RequestTimeoutError",
    "StoreClosedError",
    "StoreDamagedError",
    "StoreError",
    "TraceDecodeError",
    "WorkerPythonError",
]


class ArianeError(Exception):
    """Root of every error Ariane raises on purpose."""

    retriable: ClassVar[bool] = False


class ConfigError(ArianeError):
    """A configuration value is missing or illegal.

    Args:
        key: the configuration key (RocketMQ property name when there is one).
        message: what is wrong with it.
    """

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class ConfigFileError(ConfigError):
    """A configuration file is missing or cannot be read (its path is the key)."""


class WorkerPythonError(ConfigError):
    """Spark's Python workers cannot import Ariane, or run another Python minor version than
    the driver (``ariane.spark.workers``); the key is ``PYSPARK_PYTHON``."""


class InvalidArgumentError(ArianeError):
    """A caller passed an illegal argument (topic name, size, offset...)."""


class FilterSyntaxError(InvalidArgumentError):
    """A SQL92 filter expression is not valid (RocketMQ's ``MQFilterException`` on compile).

    Args:
        message: what is wrong.
        position: the 0-based character offset in the expression where the problem is.
    """

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} at position {position}")
        self.position = position


class FilterEvaluationError(InvalidArgumentError):
    """Evaluating a compiled SQL92 filter on one message's properties raised an error.

    RocketMQ's expressions throw here (a property that does not parse as the number it is
    compared with, a boolean compared with a string); the broker logs it and treats the
    message as not matching.
    """


class StoreError(ArianeError):
    """Base of message store failures."""


class CorruptionError(StoreError):
    """Bytes do not decode as the format says.

    Args:
        message: what was wrong.
        path: the file, if the bytes came from one.
        pos: the byte position of the problem, if known.
    """

    def __init__(self, message: str, *, path: str | None = None, pos: int | None = None) -> None:
        where = ""
        if path is not None:
            where += f" in {path}"
        if pos is not None:
            where += f" at {pos}"
        super().__init__(message + where)
        self.path = path
        self.pos = pos


class StoreDamagedError(StoreError):
    """The store's files are damaged in a way recovery must not guess about (a CommitLog file
    of the wrong size, a missing or overlapping one, a damaged checkpoint, ConsumeQueue
    entries pointing at the wrong records). Nothing was changed on disk.

    Args:
        path: the damaged file or directory.
        what: what is wrong with it.
        root: the store directory (for the repair command in the message).
        aside: what a repair moves aside to get past it (default: ``path``).
    """

    def __init__(
        self, path: str, what: str, root: str, aside: tuple[str, ...] | None = None
    ) -> None:
        super().__init__(
            f"{what} ({path}); nothing was changed. Check the disk and restore the file if "
            f"you can, or run 'ariane store repair {root}' to set the damaged files aside "
            "(copies are kept) and recover what precedes them"
        )
        self.path = path
        self.what = what
        self.root = root
        self.aside = aside if aside is not None else (path,)


class StoreClosedError(StoreError):
    """The store was shut down."""


class ProtocolError(ArianeError):
    """Base of remoting protocol errors."""


class LocalProtocolError(ProtocolError):
    """We were asked to encode something the protocol cannot carry."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes that do not decode as a RemotingCommand frame."""


class TraceDecodeError(ProtocolError):
    """A message-trace record (``ariane.common.trace``) does not decode."""


class ConnectionError_(ArianeError):
    """Base of connection failures."""

    retriable: ClassVar[bool] = True


class ConnectionClosedError(ConnectionError_):
    """The connection closed while a request was in flight."""


class ConnectError(ConnectionError_):
    """Could not open a connection."""


class RequestTimeoutError(ArianeError):
    """No response arrived within the timeout."""

    retriable: ClassVar[bool] = True


class DataLossError(ArianeError):
    """Messages a reader was asked for are gone (deleted by retention, a queue truncated).

    Raised by readers that promise not to skip data silently (Spark's ``failOnDataLoss``).
    """


class AclError(ArianeError):
    """An ACL document, IP rule or account is invalid (RocketMQ's ``AclException`` for
    configuration problems); the message names the file, account or rule."""


class RequestError(ArianeError):
    """A request cannot be served; a server turns this into a response, never a crash.

    Processors raise it (or return an error response themselves); the remoting server answers
    with ``code`` and ``remark``.

    Args:
        code: the RocketMQ response code to answer with (``ResponseCode``).
        remark: the text for the response's remark.
    """

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class HeaderFieldError(RequestError):
    """A custom-header field (``extFields`` key) is missing or does not parse.

    Answered with INVALID_PARAMETER (code 29): the request is the client's mistake. (RocketMQ
    answers SYSTEM_ERROR for a missing ``@CFNotNull`` field; clients treat both codes alike,
    as an error of that request, and SYSTEM_ERROR is kept for the server's own failures.)

    Args:
        header: the header class name (RocketMQ's Java class name).
        key: the ``extFields`` key.
        problem: what is wrong ("is missing", "is not an integer: 'x'").
    """

    def __init__(self, header: str, key: str, problem: str) -> None:
        super().__init__(29, f"{header}: the custom field {key} {problem}")
        self.header = header
        self.key = key


class BrokerResponseError(ArianeError):
    """The server answered with a response code other than SUCCESS.

    Args:
        code: the RocketMQ response code.
        remark: the server's remark, if any.
    """

    def __init__(self, code: int, remark: str | None = None) -> None:
        super().__init__(f"code={code} remark={remark or ''}")
        self.code = code
        self.remark = remark
