"""``ndvm.frozen``: a frozen dataclass whose ``__init__`` behaves as the generated one."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from ndvm.frozen import frozen


@frozen
class Point:
    x: float
    y: float = 2.0
    tags: list[str] = dataclasses.field(default_factory=list, compare=False)


@frozen(repr=False)
class Checked:
    n: int

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError("negative")

    def __repr__(self) -> str:
        return f"<{self.n}>"


@dataclasses.dataclass(frozen=True)
class Reference:
    x: float
    y: float = 2.0
    tags: list[str] = dataclasses.field(default_factory=list, compare=False)


def test_arguments_and_defaults_as_the_generated_init() -> None:
    for args, kwargs in [((1.0,), {}), ((1.0, 3.0), {}), ((), {"y": 4.0, "x": 0.5})]:
        ours, ref = Point(*args, **kwargs), Reference(*args, **kwargs)
        assert (ours.x, ours.y, ours.tags) == (ref.x, ref.y, ref.tags)
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Point(1.0, z=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Point(1.0, x=3)  # type: ignore[misc]


def test_default_factory_gives_each_instance_its_own() -> None:
    a, b = Point(1.0), Point(1.0)
    a.tags.append("a")
    assert b.tags == [] and a.tags == ["a"]


def test_frozen_eq_hash_replace_and_pickle() -> None:
    p = Point(1.0, 2.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 3.0  # type: ignore[misc]
    assert p == Point(1.0, 2.5, ["other"]) and p != Point(1.0, 2.6)
    assert hash(p) == hash(Point(1.0, 2.5))
    q = dataclasses.replace(p, y=7.0)
    assert (q.x, q.y) == (1.0, 7.0) and p.y == 2.5
    assert pickle.loads(pickle.dumps(p)) == p
    assert repr(p) == "Point(x=1.0, y=2.5, tags=[])"
    assert [f.name for f in dataclasses.fields(p)] == ["x", "y", "tags"]


def test_post_init_and_options() -> None:
    assert repr(Checked(3)) == "<3>"
    with pytest.raises(ValueError, match="negative"):
        Checked(-1)


def test_unsupported_classes_are_refused() -> None:
    with pytest.raises(TypeError, match="positional fields"):

        @frozen
        class KwOnly:
            a: int = dataclasses.field(kw_only=True)

    with pytest.raises(TypeError, match="positional fields"):

        @frozen
        class NoInit:
            a: int = dataclasses.field(init=False, default=0)

    with pytest.raises(TypeError, match="positional fields"):

        @frozen
        class WithInitVar:
            a: int
            b: dataclasses.InitVar[int] = 0

    with pytest.raises(TypeError, match="instance dict"):

        @frozen(slots=True)
        class Slotted:
            a: int
