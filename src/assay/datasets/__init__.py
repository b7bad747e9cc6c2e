"""Dataset files: import and export of examples as JSONL and CSV; Google ADK eval sets read."""

from ._io import default_name, detect_format, read_examples, write_examples

__all__ = ["default_name", "detect_format", "read_examples", "write_examples"]
