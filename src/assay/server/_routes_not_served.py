"""API families of LangSmith's that assay does not serve, refused by name (a 422 saying what
and where to go instead, never a bare 404 that reads like a broken server).

- Online evaluators (``/api/v1/platform/evaluators``, the SDK's ``client.evaluators``):
  LangSmith runs these rules on incoming runs. assay's online evaluation runs evaluators
  written in code (``assay online``, ``evaluate_online``); a rule stored here would never run
  and would look like a working one.
- The prompt hub (``push_prompt``, ``pull_prompt``, ``list_prompts``...: ``/repos``,
  ``/commits``, and ``/settings`` for the workspace's handle): prompt management, not
  evaluation; prompts stay in the user's code or repository.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ._deps import StoreDep
from ._errors import ApiError

__all__ = ["NOT_SERVED", "PROMPTS_NOT_SERVED", "router"]

router = APIRouter()
_METHODS = ["GET", "POST", "PATCH", "PUT", "DELETE"]  # every call of a family refused alike

NOT_SERVED = ("online evaluator rules (/api/v1/platform/evaluators, client.evaluators) are not "
              "served by assay: its online evaluation is configured in code - `assay online "
              "PROJECT -e module:evaluator` or assay.evaluate_online() - not through this API "
              "(see the README, 'Online evaluation of production traces')")


@router.api_route("/api/v1/platform/evaluators", methods=_METHODS)
@router.api_route("/api/v1/platform/evaluators/{rest:path}", methods=_METHODS)
def evaluators_not_served(store: StoreDep) -> JSONResponse:  # a key is still needed (401)
    raise ApiError(422, "unsupported", NOT_SERVED)


PROMPTS_NOT_SERVED = ("the prompt hub (push_prompt, pull_prompt, list_prompts, ...: /repos, "
                      "/commits, /settings) is not served by assay: keep prompts in your code "
                      "or repository; assay serves datasets, experiments, traces and feedback")
@router.api_route("/settings", methods=_METHODS)
@router.api_route("/repos", methods=_METHODS)
@router.api_route("/repos/{rest:path}", methods=_METHODS)
@router.api_route("/commits/{rest:path}", methods=_METHODS)
def prompts_not_served(store: StoreDep) -> JSONResponse:  # a key is still needed (401)
    raise ApiError(422, "unsupported", PROMPTS_NOT_SERVED)
