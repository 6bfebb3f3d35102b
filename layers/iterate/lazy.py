"""`lazy`: functools.cached_property without its lock.

Before Python 3.12, cached_property holds one lock per property, shared by every instance of the class:
threads computing `folded` for two different columns (pyarrow work that releases the GIL) wait for each
other. The detectors examine columns in threads, so that lock serialised them. Here two threads may both
compute a value the first time (the same value: these are pure functions of the instance); neither waits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class lazy(Generic[T]):
    """A property computed on first use and then kept in the instance's __dict__."""

    def __init__(self, func: Callable[[Any], T]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> lazy[T]: ...

    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> T: ...

    def __get__(self, obj: object | None, objtype: type | None = None) -> T | lazy[T]:
        if obj is None:
            return self
        value = self.func(obj)
        obj.__dict__[self.name] = value  # shadows this (non-data) descriptor from now on
        return value
