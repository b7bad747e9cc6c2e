"""Judge models: the LLMs that score agents' answers.

    get_judge("openai:gpt-4o-mini")                       -> OpenAIJudge
    get_judge("anthropic:claude-sonnet-4-5")              -> AnthropicJudge (extra 'anthropic')
    get_judge("openai-compatible:qwen2.5@http://127.0.0.1:8000/v1")
    get_judge(my_function)                                -> FunctionJudge

Every judge call goes through one retry policy (429/5xx/timeouts, ``Retry-After`` honoured),
asks for structured output by JSON schema where the endpoint supports it, re-asks a bounded
number of times on malformed or invalid replies, and is traced as an llm run with its tokens.
Failures raise ``assay.errors.JudgeError`` with the judge, the attempts and the problem.
"""

from .._sync import run_sync
from ._anthropic import AnthropicJudge
from ._base import BaseJudge
from ._function import FunctionJudge
from ._openai import OpenAIJudge
from ._parse import extract_json_object, strict_json_schema
from ._registry import get_judge, judge_providers, register_judge_provider
from ._structured import agenerate_structured, generate_structured
from ._types import Completion, JudgeModel, JudgeOptions, Message, OutputSchema

__all__ = [
    "AnthropicJudge",
    "BaseJudge",
    "Completion",
    "FunctionJudge",
    "JudgeModel",
    "JudgeOptions",
    "Message",
    "OpenAIJudge",
    "OutputSchema",
    "agenerate_structured",
    "extract_json_object",
    "generate_structured",
    "get_judge",
    "judge_providers",
    "register_judge_provider",
    "run_sync",
    "strict_json_schema",
]
