"""Wide records built by keyword only: with twenty fields, a positional call that skips
or swaps one still type-checks and silently means something else."""

from __future__ import annotations

import functools
from typing import Any, TypeVar

T = TypeVar("T")


def keyword_only(cls: type[T]) -> type[T]:
    """CLS (a dataclass) whose constructor refuses positional arguments (dataclass's
    kw_only needs Python 3.10; the builder runs on 3.9)."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if args:
            raise TypeError(f"{cls.__name__}() takes keyword arguments only")
        init(self, **kwargs)

    cls.__init__ = __init__  # type: ignore[method-assign]
    return cls
