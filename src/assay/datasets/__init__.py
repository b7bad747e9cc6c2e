"""Dataset files: import and export of examples as JSONL, CSV and OpenAI fine-tuning JSONL;
Google ADK eval sets read."""

from ._io import csv_examples, default_name, detect_format, read_examples, write_examples
from ._openai_ft import openai_line, openai_lines

__all__ = ["csv_examples", "default_name", "detect_format", "openai_line", "openai_lines",
           "read_examples", "write_examples"]
