"""The metadata keys that name the conversation (thread) a run is a turn of, as LangSmith reads
them: the first present wins. One list for the store's threads (``store/_threads.py``), the
filter language's ``thread_id`` and the OpenTelemetry mapping, which files a span's
conversation id under one of them."""

THREAD_KEYS = ("session_id", "thread_id", "conversation_id")

__all__ = ["THREAD_KEYS"]
