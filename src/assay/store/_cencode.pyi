from collections.abc import Callable
from typing import Any

def encoded_rows(posts: list[Any], width: int, positions: tuple[int, ...],
                 dumps: Callable[..., bytes], default: Callable[[Any], Any],
                 slow: Callable[[Any], str], esc: bytes, /) -> list[Any]: ...
def admitted_post(cls: type[Any], micros: Callable[[Any], Any], not_plain: object,
                  escape: Callable[[str], str], dumps: Callable[..., bytes],
                  default: Callable[[Any], Any], slow: Callable[[Any], str], esc: bytes,
                  raw: Any, run_id: str | None, /) -> Any: ...
def row_layout(blank: list[Any], positions: tuple[int, ...],
               dotted_segment_us: Callable[[int, str], str], /) -> None: ...
def admitted_row(post: dict[str, Any], tenant: str, session: str, /
                 ) -> tuple[list[Any], int] | None: ...
