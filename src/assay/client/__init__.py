"""The ``Client``: one set of LangSmith-named methods over the local store or a server."""

from ._client import Client, get_default_client

__all__ = ["Client", "get_default_client"]
