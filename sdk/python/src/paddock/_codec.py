"""JSON to dataclasses and back, by the fields' type hints and metadata.

Decoding is lenient where the API may grow: a key no field names is
ignored, and an enum value this version does not list is kept as the
string it is. It is strict where a value could be misread: a required
field that is missing, or a value of the wrong JSON type, is a DecodeError.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from typing import Any, Dict, List, Literal, Union

from .errors import DecodeError

_NONE = type(None)


@functools.lru_cache(maxsize=None)
def _fields(cls):
    hints = typing.get_type_hints(cls)
    return tuple((f.name, f.metadata.get("json", f.name), bool(f.metadata.get("required")), hints[f.name])
                 for f in dataclasses.fields(cls))


def decode(tp: Any, value: Any, where: str = "answer") -> Any:
    """Decode a JSON value into tp: a dataclass, List[X], Dict[str, X],
    Optional[X], a Literal, a primitive or Any."""
    if tp is Any:
        return value
    origin = typing.get_origin(tp)
    if origin is Union:
        args = [a for a in typing.get_args(tp) if a is not _NONE]
        if value is None:
            return None
        return decode(args[0], value, where) if len(args) == 1 else value
    if value is None:
        # JSON null where a value was expected: a nullable field's, or an
        # empty list Go wrote as null.
        return None
    if origin is Literal:
        if not isinstance(value, str):
            raise DecodeError(f"{where}: expected a string, got {type(value).__name__}")
        return value
    if origin in (list, List):
        if not isinstance(value, list):
            raise DecodeError(f"{where}: expected an array, got {type(value).__name__}")
        (item,) = typing.get_args(tp)
        return [decode(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin in (dict, Dict):
        if not isinstance(value, dict):
            raise DecodeError(f"{where}: expected an object, got {type(value).__name__}")
        _, item = typing.get_args(tp)
        return {k: decode(item, v, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise DecodeError(f"{where}: expected an object for {tp.__name__}, got {type(value).__name__}")
        kw = {}
        for name, key, required, hint in _fields(tp):
            if key in value:
                kw[name] = decode(hint, value[key], f"{where}.{key}")
            elif required:
                raise DecodeError(f"{where}: {tp.__name__} lacks its required field {key!r}")
        return tp(**kw)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DecodeError(f"{where}: expected a number, got {type(value).__name__}")
        return float(value)
    if tp in (str, int, bool):
        if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
            raise DecodeError(f"{where}: expected {tp.__name__}, got {type(value).__name__}")
        return value
    return value


def encode(value: Any) -> Any:
    """A dataclass (or a list or dict of them) as JSON: fields that are
    None are left out, so that the daemon sees only what was set."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for name, key, _, _ in _fields(type(value)):
            v = getattr(value, name)
            if v is not None:
                out[key] = encode(v)
        return out
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items() if v is not None}
    return value


def build(cls, request, fields: Dict[str, Any]):
    """A request body of class cls: request as given, or made from the
    keyword arguments (an unknown one is a TypeError, as for any call)."""
    if request is not None and fields:
        raise TypeError(f"give a {cls.__name__} or its fields as keyword arguments, not both")
    if request is None:
        request = cls(**fields)
    elif not isinstance(request, cls):
        raise TypeError(f"expected a {cls.__name__}, got {type(request).__name__}")
    return request
