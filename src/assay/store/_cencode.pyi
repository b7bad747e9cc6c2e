from collections.abc import Callable
from typing import Any

def encoded_rows(posts: list[Any], width: int, positions: tuple[int, ...],
                 dumps: Callable[..., bytes], default: Callable[[Any], Any],
                 slow: Callable[[Any], str], esc: bytes, /) -> list[Any]: ...
