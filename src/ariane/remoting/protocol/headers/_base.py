"""Typed custom headers <-> ``ext_fields`` (RocketMQ ``CommandCustomHeader`` and
``RemotingCommand.decodeCommandCustomHeader`` / ``makeCustomHeaderToNet``).

A header is a slotted dataclass decorated with ``@header``. Each field maps to one ``extFields``
key: the camelCase form of the attribute name (``queue_id`` -> ``queueId``) unless a ``Key``
says otherwise (``clientID``, the one-letter keys of ``SendMessageRequestHeaderV2``...). The
annotation gives the Java type:

* ``str`` (String), ``I32`` (int/Integer), ``I64`` (long/Long), ``bool`` (boolean/Boolean);
* ``X | None`` with default ``None``: optional, omitted from ``ext_fields`` when ``None``;
* no default: required (``@CFNotNull``): a missing key raises ``HeaderFieldError``.

For speed the decorator compiles one ``from_ext_fields`` and one ``to_ext_fields`` per class
(the way ``dataclasses`` builds ``__init__``), so parsing a send header is a straight run of
dict lookups and conversions (``from_ext_fields_py``, the reference). In the compiled build
``from_ext_fields`` first makes one ``_speedups.header_parse`` call (``_speedups_header.h``) that
fills the slots straight from the dict in the plain case (digits, "true"/"false"/"1"/"0") and
hands anything else to that twin; ``tests/unit/remoting/test_header_native.py`` checks they
agree for every header class. Parsing follows Java: integers must parse and fit the Java type;
booleans are true for "true" (any case) and also for "1", which C++ 1.2.4 sends.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, TypeVar, cast, dataclass_transform

from ariane.common import native
from ariane.errors import HeaderFieldError

__all__ = ["I32", "I64", "CommandHeader", "FieldSpec", "Key", "header"]


class Key:
    """Annotation marker overriding the ``extFields`` key of a field."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class _Width:
    __slots__ = ("bits",)

    def __init__(self, bits: int) -> None:
        self.bits = bits


#: Java ``int``/``Integer``.
I32 = Annotated[int, _Width(32)]
#: Java ``long``/``Long``.
I64 = Annotated[int, _Width(64)]


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """How one header field maps to an ``extFields`` entry.

    Attributes:
        name: the Python attribute.
        key: the ``extFields`` key.
        kind: ``"str"``, ``"i32"``, ``"i64"`` or ``"bool"``.
        required: whether the key must be present.
        optional: whether ``None`` is a legal value.
    """

    name: str
    key: str
    kind: str
    required: bool
    optional: bool


H = TypeVar("H", bound="CommandHeader")


class CommandHeader:
    """Base of every typed header; ``@header`` fills in the two conversions."""

    __slots__ = ()

    #: The field table, set by ``@header``.
    FIELDS: ClassVar[tuple[FieldSpec, ...]] = ()
    #: RocketMQ's Java class name, used in error messages.
    JAVA_NAME: ClassVar[str] = "CommandHeader"

    @classmethod
    def from_ext_fields(cls: type[H], ext: Mapping[str, str]) -> H:
        """Parse the header out of a command's ``ext_fields``; unknown keys are ignored.

        Raises:
            HeaderFieldError: a required key is missing or a value does not parse.
        """
        raise NotImplementedError

    def to_ext_fields(self) -> dict[str, str]:
        """The ``ext_fields`` map for this header (``None`` fields omitted)."""
        raise NotImplementedError


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


def _specs(cls: type) -> tuple[FieldSpec, ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    specs = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        optional = False
        origin = typing.get_origin(hint)
        if origin is typing.Union or origin is types.UnionType:
            args = [a for a in typing.get_args(hint) if a is not type(None)]
            if len(args) != 1:
                raise TypeError(f"{cls.__name__}.{f.name}: unsupported type {hint!r}")
            optional = True
            hint = args[0]
        key = _camel(f.name)
        width = 0
        if typing.get_origin(hint) is Annotated:
            base, *extras = typing.get_args(hint)
            for extra in extras:
                if isinstance(extra, Key):
                    key = extra.name
                elif isinstance(extra, _Width):
                    width = extra.bits
            hint = base
            # an Annotated[X | None, Key(...)] spelling
            if typing.get_origin(hint) in (typing.Union, types.UnionType):
                args = [a for a in typing.get_args(hint) if a is not type(None)]
                optional = True
                hint = args[0]
                if typing.get_origin(hint) is Annotated:
                    hint, *inner = typing.get_args(hint)
                    width = next((x.bits for x in inner if isinstance(x, _Width)), width)
        if hint is str:
            kind = "str"
        elif hint is bool:
            kind = "bool"
        elif hint is int:
            kind = "i64" if width == 64 else "i32"
        else:
            raise TypeError(f"{cls.__name__}.{f.name}: unsupported type {hint!r}")
        has_default = f.default is not dataclasses.MISSING
        if optional and not has_default:
            raise TypeError(f"{cls.__name__}.{f.name}: optional fields need a default")
        specs.append(FieldSpec(f.name, key, kind, not has_default, optional))
    return tuple(specs)


#: the compiled plain-case parser (``_speedups_header.h``), None in the pure build
_HEADER_PARSE: Callable[[type, tuple[Any, ...], Mapping[str, str]], Any] | None = getattr(
    native.speedups, "header_parse", None
)
_KINDS = {"str": 0, "i32": 1, "i64": 2, "bool": 3}

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def _bad(cls: type[CommandHeader], key: str, problem: str) -> HeaderFieldError:
    return HeaderFieldError(cls.JAVA_NAME, key, problem)


def _to_int(cls: type[CommandHeader], key: str, value: str, low: int, high: int) -> int:
    try:
        number = int(value)
    except (ValueError, TypeError):
        raise _bad(cls, key, f"is not an integer: {value!r}") from None
    if not low <= number <= high:
        raise _bad(cls, key, f"is out of range: {value!r}")
    return number


def _to_bool(value: str) -> bool:
    return value == "true" or value == "1" or value.lower() == "true"


def _compile(cls: type[CommandHeader], specs: tuple[FieldSpec, ...]) -> None:
    defaults = {
        f.name: f.default
        for f in dataclasses.fields(cast(Any, cls))
        if f.default is not dataclasses.MISSING
    }
    parse = ["def from_ext_fields_py(cls, ext):", "    get = ext.get"]
    args = []
    for i, spec in enumerate(specs):
        var = f"v{i}"
        parse.append(f"    {var} = get({spec.key!r})")
        if spec.required:
            parse.append(f"    if {var} is None: raise _bad(cls, {spec.key!r}, 'is missing')")
            guard = ""
        else:
            guard = f"if {var} is not None: "
        if spec.kind in ("i32", "i64"):
            low, high = (_I32_MIN, _I32_MAX) if spec.kind == "i32" else (_I64_MIN, _I64_MAX)
            # inline int(); fall back to the checked helper only on trouble
            indent = "    " if spec.required else "        "
            if not spec.required:
                parse.append(f"    if {var} is not None:")
            parse.append(f"{indent}try: {var} = int({var})")
            parse.append(
                f"{indent}except (ValueError, TypeError): {var} = _to_int(cls, {spec.key!r}, {var}, {low}, {high})"
            )
            parse.append(
                f"{indent}if not {low} <= {var} <= {high}: _to_int(cls, {spec.key!r}, str({var}), {low}, {high})"
            )
        elif spec.kind == "bool":
            parse.append(f"    {guard}{var} = _to_bool({var})")
        if not spec.required:
            default = defaults[spec.name]
            if default is None:
                pass  # get() already gave None: no line to run per parse (hot path)
            elif isinstance(default, (bool, int, str)):
                parse.append(f"    if {var} is None: {var} = {default!r}")
            else:
                parse.append(f"    if {var} is None: {var} = _defaults[{spec.name!r}]")
        args.append(f"    obj.{spec.name} = {var}")
    # bypass __init__: the values are already converted and complete
    parse.append("    obj = _new(cls)")
    parse.extend(args)
    parse.append("    return obj")

    build = ["def to_ext_fields(self):"]
    always = [s for s in specs if not s.optional]
    maybe = [s for s in specs if s.optional]
    items = ", ".join(f"{s.key!r}: {_render(s, f'self.{s.name}')}" for s in always)
    build.append(f"    out = {{{items}}}")
    for s in maybe:
        build.append(f"    v = self.{s.name}")
        build.append(f"    if v is not None: out[{s.key!r}] = {_render(s, 'v')}")
    build.append("    return out")

    namespace: dict[str, Any] = {
        "_bad": _bad,
        "_to_int": _to_int,
        "_to_bool": _to_bool,
        "_defaults": defaults,
        "_new": object.__new__,
    }
    plan = _plan(cls, specs, defaults)
    if plan is None:  # the pure build: the twin is the parser
        fast = parse.copy()
        fast[0] = "def from_ext_fields(cls, ext):"
    else:  # the plain case in one C call; anything else to the twin
        namespace.update(_fast=_HEADER_PARSE, _plan=plan)
        fast = [
            "def from_ext_fields(cls, ext):",
            "    obj = _fast(cls, _plan, ext)",
            "    if obj is None: return from_ext_fields_py(cls, ext)",
            "    return obj",
        ]
    source = "\n".join(parse) + "\n\n" + "\n".join(fast) + "\n\n" + "\n".join(build)
    exec(source, namespace)
    from_py = namespace["from_ext_fields_py"]
    from_fn = namespace["from_ext_fields"]
    to_fn = namespace["to_ext_fields"]
    from_py.__qualname__ = f"{cls.__qualname__}.from_ext_fields_py"
    from_fn.__qualname__ = f"{cls.__qualname__}.from_ext_fields"
    to_fn.__qualname__ = f"{cls.__qualname__}.to_ext_fields"
    cls.from_ext_fields = classmethod(from_fn)  # type: ignore[method-assign,assignment]
    cls.from_ext_fields_py = classmethod(from_py)  # type: ignore[attr-defined]
    cls.to_ext_fields = to_fn  # type: ignore[method-assign]


def _plan(
    cls: type[CommandHeader], specs: tuple[FieldSpec, ...], defaults: dict[str, Any]
) -> tuple[tuple[str, int, bool, Any, Any], ...] | None:
    """``header_parse``'s plan for ``cls``: (key, kind, required, default, slot) per field, or
    None in the pure build (or when a field is not a plain slot)."""
    if _HEADER_PARSE is None:
        return None
    plan = []
    for spec in specs:
        slot = next((k.__dict__[spec.name] for k in cls.__mro__ if spec.name in k.__dict__), None)
        if not isinstance(slot, types.MemberDescriptorType):
            return None
        kind = _KINDS[spec.kind]
        plan.append((spec.key, kind, spec.required, defaults.get(spec.name), slot))
    return tuple(plan)


def _render(spec: FieldSpec, expr: str) -> str:
    if spec.kind == "str":
        return expr
    if spec.kind == "bool":
        return f"('true' if {expr} else 'false')"
    return f"str({expr})"


@dataclass_transform(kw_only_default=True)
def header(java_name: str | None = None) -> Callable[[type[H]], type[H]]:
    """Class decorator: make a slotted keyword-only dataclass and compile its conversions.

    Args:
        java_name: RocketMQ's class name for error messages (defaults to the Python name).
    """

    def wrap(cls: type[H]) -> type[H]:
        made = dataclass(slots=True, kw_only=True)(cls)
        made.JAVA_NAME = java_name or cls.__name__
        made.FIELDS = _specs(made)
        _compile(made, made.FIELDS)
        return made

    return wrap
