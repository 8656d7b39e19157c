"""The console's typed items as JSON-able data and back, for recordings.

Driven by the dataclasses themselves (``dataclasses.fields`` and ``typing.get_type_hints``),
so a field added to ``probes/wire/samples.py`` is recorded without touching this module.  The
rules that keep old recordings readable:

* a key the class no longer has is ignored; a key the class gained since takes the
  field's default (a field without a default is required);
* ``None`` in a field whose default is ``None`` is left out when encoding;
* enums travel by value, tuples as lists, mappings as objects with string keys;
* ``decode`` checks every value's type and raises :class:`CodecError` naming the class and
  field; ``encode`` trusts the dataclass's types (they come from our own decoders).

Each class's field plan is built once, on first use, and cached: a plan is a tuple of
per-field steps, with plain scalars handled inline rather than through a call.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, Union

from probes.analysis.findings import Finding
from probes.errors import RigwatchError
from probes.triage import Code
from probes.wire.events import (
    ClockOffset,
    Connected,
    Disconnected,
    JobChange,
    SourceHealth,
    XidEvent,
)
from probes.wire.samples import (
    FabricSample,
    Hello,
    HostSample,
    LogEvent,
    LogSourceState,
    ProbeError,
)

Item = (Hello | HostSample | LogEvent | LogSourceState | ProbeError | Connected | Disconnected
        | ClockOffset | JobChange | SourceHealth | Finding | FabricSample | XidEvent)
"""Everything a recording holds: what a host session reports, and the findings."""

KINDS: Mapping[str, type[Any]] = {
    "hello": Hello,
    "sample": HostSample,
    "log": LogEvent,
    "logsource": LogSourceState,
    "error": ProbeError,
    "connected": Connected,
    "disconnected": Disconnected,
    "clock": ClockOffset,
    "job": JobChange,
    "source": SourceHealth,
    "finding": Finding,
    "fabric": FabricSample,
    "xid": XidEvent,
}
"""Type tag (``"t"`` in the encoded data, ``kind`` in a recording) -> class."""

TAG_KEY = "t"

_TAGS: dict[type[Any], str] = {cls: tag for tag, cls in KINDS.items()}


class CodecError(RigwatchError, ValueError):
    """Data that does not fit the class it claims to be.

    ``cls`` and ``field`` name where it failed (the innermost dataclass), so a damaged or
    newer recording says what it could not read.
    """

    title = "Unreadable recorded item"

    def __init__(self, cls: str, field: str | None, problem: str) -> None:
        where = f"{cls}.{field}" if field else cls
        super().__init__(f"{where}: {problem}")
        self.cls = cls
        self.field = field
        self.problem = problem


class _Wrong(Exception):
    """A value of the wrong type, before it is known which field it sits in."""


_MISSING: Any = object()

# How a field's value is checked when decoding.  Scalars are checked inline in the
# generated code; everything else goes through a decoder function.
_EXACT = 0
"""``type(v) is arg`` (str, int, bool: a bool is not accepted for an int)."""
_FLOAT = 1
"""A float, or an int made float."""
_CALL = 2
"""``arg(v)``: containers, enums, nested dataclasses."""

Encoder = Callable[[Any], Any]
Decoder = Callable[[Any], Any]


@dataclasses.dataclass(frozen=True)
class _Plan:
    """A class's encoder and decoder, generated once from its fields."""

    encode: Callable[[Any], dict[str, Any]]
    decode: Callable[[Any], Any]


_PLANS: dict[type[Any], _Plan] = {}


def kind_of(item: Item) -> str:
    """The type tag of an item (``"sample"``, ``"finding"``…)."""
    try:
        return _TAGS[type(item)]
    except KeyError:
        raise CodecError(type(item).__name__, None, "not a recordable item") from None


def encode(item: Item) -> dict[str, Any]:
    """An item as JSON-able data with its type tag under ``"t"``."""
    tag = kind_of(item)
    out = _plan(type(item)).encode(item)
    out[TAG_KEY] = tag
    return out


def decode(data: Mapping[str, Any]) -> Item:
    """The item ``encode`` made; raises :class:`CodecError` for data that does not fit."""
    if not isinstance(data, Mapping):
        raise CodecError("item", None, f"expected an object, got {_describe(data)}")
    tag = data.get(TAG_KEY)
    cls = KINDS.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise CodecError("item", TAG_KEY, f"unknown type tag {tag!r}")
    item: Item = _plan(cls).decode(data)
    return item


def encode_dataclass(obj: Any) -> dict[str, Any]:
    """Any supported dataclass (nested ones too) as data, without a type tag."""
    return _plan(type(obj)).encode(obj)


def decode_dataclass(cls: type[Any], data: Any) -> Any:
    """``cls`` rebuilt from ``encode_dataclass`` data."""
    return _plan(cls).decode(data)


def _plan(cls: type[Any]) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _build_plan(cls)
        _PLANS[cls] = plan
    return plan


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    encoder: Encoder | None
    """None: the value is stored as it is."""
    code: int
    arg: Any
    nullable: bool
    default: Any
    """``_MISSING`` for a required field."""
    factory: Callable[[], Any] | None


def _build_plan(cls: type[Any]) -> _Plan:
    """Generate the class's encode and decode functions (as ``dataclasses`` does for
    ``__init__``): one straight-line function per class runs several times faster than a
    loop over field descriptions, and a sample holds hundreds of fields."""
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{cls!r} is not a dataclass")
    hints = typing.get_type_hints(cls)
    fields: list[_Field] = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        inner, nullable = _strip_none(hints[f.name])
        encoder, code, arg = _compile(inner, cls, f.name)
        factory = None if f.default_factory is dataclasses.MISSING else f.default_factory
        default = _MISSING if f.default is dataclasses.MISSING else f.default
        fields.append(_Field(f.name, encoder, code, arg, nullable, default, factory))
    fast_new = (not hasattr(cls, "__post_init__") and "__slots__" not in cls.__dict__
                and all(f.init or f.default is not dataclasses.MISSING
                        for f in dataclasses.fields(cls)))
    # (a field left out of ``__init__`` with a plain default reads the class's default:
    # ``HostSample``'s wire-only fields)
    return _Plan(_generate_encoder(cls, fields), _generate_decoder(cls, fields, fast_new))


def _generate_encoder(cls: type[Any], fields: list[_Field]) -> Callable[[Any], dict[str, Any]]:
    env: dict[str, Any] = {"CN": cls.__name__, "Wrong": _Wrong, "CodecError": CodecError}
    lines = ["def encode(o):", "    d = {}"]
    for i, f in enumerate(fields):
        key = repr(f.name)
        lines.append(f"    v = o.{f.name}")
        if f.nullable and f.default is None:
            lines.append("    if v is not None:")
        elif f.nullable and f.encoder is not None:
            lines.append(f"    if v is None: d[{key}] = None")
            lines.append("    else:")
        else:
            lines.append("    if True:")
        if f.encoder is None:
            lines.append(f"        d[{key}] = v")
        else:
            env[f"e{i}"] = f.encoder
            lines += ["        try:",
                      f"            d[{key}] = e{i}(v)",
                      "        except Wrong as e:",
                      f"            raise CodecError(CN, {key}, str(e)) from None"]
    lines.append("    return d")
    fn: Callable[[Any], dict[str, Any]] = _compile_function(cls, "encode", lines, env)
    return fn


def _generate_decoder(cls: type[Any], fields: list[_Field], fast_new: bool) -> Callable[[Any], Any]:
    env: dict[str, Any] = {"C": cls, "CN": cls.__name__, "M": _MISSING, "Mapping": Mapping,
                           "Wrong": _Wrong, "CodecError": CodecError, "bad": _bad,
                           "new": object.__new__, "setattr": object.__setattr__}
    lines = ["def decode(d):",
             "    if type(d) is not dict and not isinstance(d, Mapping):",
             "        raise CodecError(CN, None, 'expected an object, got ' + describe(d))",
             "    get = d.get"]
    env["describe"] = _describe
    for i, f in enumerate(fields):
        key = repr(f.name)
        lines.append(f"    v = get({key}, M)")
        if f.default is _MISSING and f.factory is None:
            lines.append(f"    if v is M: raise CodecError(CN, {key}, 'missing')")
        elif f.factory is not None:
            env[f"f{i}"] = f.factory
            lines.append(f"    if v is M: v = f{i}()")
        else:
            env[f"D{i}"] = f.default
            lines.append(f"    if v is M: v = D{i}")
        lines.append("    elif v is None:")
        lines.append("        pass" if f.nullable
                     else f"        raise CodecError(CN, {key}, 'is null')")
        if f.code == _EXACT:
            env[f"T{i}"] = f.arg
            lines.append(f"    elif type(v) is not T{i}: raise bad(CN, {key}, T{i}.__name__, v)")
        elif f.code == _FLOAT:
            lines += ["    elif type(v) is not float:",
                      "        if type(v) is not int:",
                      f"            raise bad(CN, {key}, 'float', v)",
                      "        v = float(v)"]
        else:
            env[f"c{i}"] = f.arg
            lines += ["    else:",
                      "        try:",
                      f"            v = c{i}(v)",
                      "        except Wrong as e:",
                      f"            raise CodecError(CN, {key}, str(e)) from None"]
        lines.append(f"    a{i} = v")
    if fast_new:
        # The checks above are __init__'s whole job here; filling __dict__ skips its
        # object.__setattr__ per field (frozen dataclasses pay one per field).
        items = ", ".join(f"{f.name!r}: a{i}" for i, f in enumerate(fields))
        lines += ["    o = new(C)", f"    setattr(o, '__dict__', {{{items}}})", "    return o"]
    else:
        args = ", ".join(f"{f.name}=a{i}" for i, f in enumerate(fields))
        lines += ["    try:", f"        return C({args})",
                  "    except (TypeError, ValueError) as e:",
                  "        raise CodecError(CN, None, str(e)) from None"]
    fn: Callable[[Any], Any] = _compile_function(cls, "decode", lines, env)
    return fn


def _compile_function(cls: type[Any], name: str, lines: list[str], env: dict[str, Any]) -> Any:
    source = "\n".join(lines) + "\n"
    code = compile(source, f"<codec {name} {cls.__module__}.{cls.__qualname__}>", "exec")
    exec(code, env)
    return env[name]


def _bad(cls: str, field: str, want: str, v: Any) -> CodecError:
    return CodecError(cls, field, f"expected {want}, got {_describe(v)}")


def _strip_none(tp: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); anything else -> (tp, False)."""
    if typing.get_origin(tp) in (Union, types.UnionType):
        args = typing.get_args(tp)
        rest = tuple(a for a in args if a is not type(None))
        if len(rest) < len(args):
            if len(rest) == 1:
                return rest[0], True
            return Union[rest], True  # noqa: UP007 - rebuilding a union from its members
    return tp, False


def _compile(tp: Any, owner: type[Any], name: str) -> tuple[Encoder | None, int, Any]:
    """(encoder, decode step code, decode step argument) for a field's type."""
    if tp is str or tp is int or tp is bool:
        return None, _EXACT, tp
    if tp is float:
        return None, _FLOAT, None
    if tp is Any or tp is object:
        return _encode_free, _CALL, _decode_free
    if tp is Code:
        return _code_encoder, _CALL, _code_decoder
    if isinstance(tp, type) and issubclass(tp, Enum):
        return _enum_encoder(), _CALL, _enum_decoder(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _nested_encoder(tp), _CALL, _nested_decoder(tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _seq_codec(args[0], owner, name, tuple)
        return _fixed_tuple_codec(args, owner, name)
    if origin is list:
        return _seq_codec(args[0], owner, name, list)
    if origin in (dict, Mapping):
        if args and args[0] is not str:
            raise TypeError(f"{owner.__name__}.{name}: mapping keys must be str, not {args[0]}")
        return _mapping_codec(args[1] if args else Any, owner, name)
    if origin in (Union, types.UnionType):
        return _scalar_union_codec(args, owner, name)
    raise TypeError(f"{owner.__name__}.{name}: the codec cannot handle {tp!r}")


def _as_functions(tp: Any, owner: type[Any], name: str) -> tuple[Encoder | None, Decoder]:
    """A type's codec as an (encoder, decoder) pair of callables, for inside containers."""
    inner, nullable = _strip_none(tp)
    encoder, code, arg = _compile(inner, owner, name)
    if code == _EXACT:
        want: type[Any] = arg

        def decoder(v: Any) -> Any:
            if type(v) is not want:
                raise _Wrong(f"expected {want.__name__}, got {_describe(v)}")
            return v
    elif code == _FLOAT:
        decoder = _decode_float
    else:
        decoder = arg
    if nullable:
        inner_enc, inner_dec = encoder, decoder

        def decoder(v: Any) -> Any:
            return None if v is None else inner_dec(v)

        if inner_enc is not None:
            def encoder(v: Any) -> Any:
                return None if v is None else inner_enc(v)
    return encoder, decoder


def _decode_float(v: Any) -> float:
    t = type(v)
    if t is float:
        return float(v)
    if t is int:
        return float(v)
    raise _Wrong(f"expected float, got {_describe(v)}")


def _seq_codec(elem: Any, owner: type[Any], name: str,
               make: type[Any]) -> tuple[Encoder | None, int, Any]:
    e_enc, e_dec = _as_functions(elem, owner, name)

    def encoder(v: Any) -> Any:
        if e_enc is None:
            return list(v)
        return [e_enc(x) for x in v]

    def decoder(v: Any) -> Any:
        if type(v) is not list:
            raise _Wrong(f"expected a list, got {_describe(v)}")
        return make([e_dec(x) for x in v])

    return encoder, _CALL, decoder


def _fixed_tuple_codec(args: tuple[Any, ...], owner: type[Any],
                       name: str) -> tuple[Encoder | None, int, Any]:
    parts = [_as_functions(a, owner, name) for a in args]

    def encoder(v: Any) -> Any:
        return [x if e is None else e(x) for (e, _), x in zip(parts, v, strict=True)]

    def decoder(v: Any) -> Any:
        if type(v) is not list or len(v) != len(parts):
            raise _Wrong(f"expected a list of {len(parts)}, got {_describe(v)}")
        return tuple(d(x) for (_, d), x in zip(parts, v, strict=True))

    return encoder, _CALL, decoder


def _mapping_codec(value_tp: Any, owner: type[Any],
                   name: str) -> tuple[Encoder | None, int, Any]:
    v_enc, v_dec = _as_functions(value_tp, owner, name)

    def encoder(v: Any) -> Any:
        if v_enc is None:
            return dict(v)
        return {k: v_enc(x) for k, x in v.items()}

    def decoder(v: Any) -> Any:
        if type(v) is not dict:
            raise _Wrong(f"expected an object, got {_describe(v)}")
        out = {}
        for k, x in v.items():
            if type(k) is not str:
                raise _Wrong(f"expected string keys, got {_describe(k)}")
            out[k] = v_dec(x)
        return out

    return encoder, _CALL, decoder


def _scalar_union_codec(args: tuple[Any, ...], owner: type[Any],
                        name: str) -> tuple[Encoder | None, int, Any]:
    """``int | str`` and the like; a union of dataclasses would need a tag, so it is refused."""
    allowed: list[type[Any]] = []
    for a in args:
        if a not in (str, int, float, bool):
            raise TypeError(f"{owner.__name__}.{name}: the codec cannot handle a union with {a!r}")
        allowed.append(a)
    names = " or ".join(a.__name__ for a in allowed)

    def decoder(v: Any) -> Any:
        t = type(v)
        if t in allowed:
            return v
        if t is int and float in allowed:
            return float(v)
        raise _Wrong(f"expected {names}, got {_describe(v)}")

    return None, _CALL, decoder


def _enum_encoder() -> Encoder:
    def encoder(v: Any) -> Any:
        return v.value

    return encoder


def _enum_decoder(cls: type[Enum]) -> Decoder:
    members = {m.value: m for m in cls}

    def decoder(v: Any) -> Any:
        try:
            return members[v]
        except (KeyError, TypeError):
            raise _Wrong(f"{v!r} is not a {cls.__name__}") from None

    return decoder


_CODES = {c.value: c for c in Code}


def _code_encoder(v: Any) -> Any:
    return v.value if isinstance(v, Code) else v


def _code_decoder(v: Any) -> Any:
    """A finding code as its ``Code`` member; one this version does not know (a newer
    recording's) stays its string, as codes were read before ``Code`` typed them."""
    if type(v) is not str:
        raise _Wrong(f"{v!r} is not a finding code")
    return _CODES.get(v, v)


def _nested_encoder(cls: type[Any]) -> Encoder:
    return _plan(cls).encode


def _nested_decoder(cls: type[Any]) -> Decoder:
    return _plan(cls).decode


def _encode_free(v: Any) -> Any:
    """A value typed ``object`` (``Finding.extra``): JSON-able data, tuples as lists."""
    if v is None or type(v) in (str, int, float, bool):
        return v
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, (list, tuple)):
        return [_encode_free(x) for x in v]
    if isinstance(v, Mapping):
        out = {}
        for k, x in v.items():
            if not isinstance(k, str):
                raise _Wrong(f"mapping key {k!r} is not a string")
            out[k] = _encode_free(x)
        return out
    if isinstance(v, (str, int, float)):
        return v
    raise _Wrong(f"{_describe(v)} is not JSON-able")


def _decode_free(v: Any) -> Any:
    return v


def _describe(v: Any) -> str:
    text = repr(v)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{type(v).__name__} {text}"
