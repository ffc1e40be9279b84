"""``frozen``: ``dataclass(frozen=True)`` with an ``__init__`` that stores into the instance dict.

The ``__init__`` that ``dataclasses`` writes for a frozen class assigns every field through
``object.__setattr__``, about 2,000 CPython 3.11 instructions a field; the one written here
stores the fields in ``self.__dict__`` (what ``object.__setattr__`` does in the end), so a
record built on a hot path (``Program`` per compile, ``Calibration`` per fit) costs what a
plain class costs. Everything else is the dataclass's: ``repr``, ``eq``, ``hash``, the frozen
``__setattr__``, ``dataclasses.replace`` and ``fields``. Positional and keyword arguments,
defaults, default factories and ``__post_init__`` behave as in the generated ``__init__``;
classes with slots, keyword-only fields, ``InitVar`` s or ``init=False`` fields are refused.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, TypeVar

T = TypeVar("T")


def frozen(cls: type[T] | None = None, **options: Any) -> Any:
    """``@frozen`` or ``@frozen(repr=False, ...)``: ``cls`` as ``@dataclass(frozen=True,
    **options)`` with the faster ``__init__``."""
    if cls is None:
        return lambda c: frozen(c, **options)
    cls = dataclasses.dataclass(frozen=True, **options)(cls)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    names = [f.name for f in fields]
    generated = list(inspect.signature(cls.__init__).parameters)[1:]
    if generated != names or any(f.kw_only or not f.init for f in fields):
        raise TypeError(f"frozen: {cls.__name__} needs plain positional fields only")
    if hasattr(cls, "__slots__"):
        raise TypeError(f"frozen: {cls.__name__} must keep its instance dict (no slots)")
    env: dict[str, Any] = {"_MISSING": dataclasses.MISSING}
    params, body = [], ["d = self.__dict__"]
    for f in fields:
        if f.default is not dataclasses.MISSING:
            env[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            env[f"_f_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_MISSING")
            body.append(f"if {f.name} is _MISSING: {f.name} = _f_{f.name}()")
        else:
            params.append(f.name)
        body.append(f"d[{f.name!r}] = {f.name}")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    source = f"def __init__(self, {', '.join(params)}):\n    " + "\n    ".join(body)
    exec(source, env)  # noqa: S102 - the text is built from the class's own field names
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[misc]
    return cls
