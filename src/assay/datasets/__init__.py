"""Dataset files: import and export of examples as JSONL and CSV."""

from ._io import detect_format, read_examples, write_examples

__all__ = ["read_examples", "write_examples", "detect_format"]
