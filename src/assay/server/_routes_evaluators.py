"""Online evaluators (``/api/v1/platform/evaluators``, the SDK's ``client.evaluators``):
refused by name.

LangSmith runs these rules on incoming runs (online evaluation). assay's online evaluation runs
evaluators written in code (``assay online``, ``evaluate_online``); a rule stored here would
never run and would look like a working one, so every call gets a 422 saying where online
evaluation is instead of a bare 404.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ._deps import StoreDep
from ._errors import ApiError

__all__ = ["NOT_SERVED", "router"]

router = APIRouter()

NOT_SERVED = ("online evaluator rules (/api/v1/platform/evaluators, client.evaluators) are not "
              "served by assay: its online evaluation is configured in code - `assay online "
              "PROJECT -e module:evaluator` or assay.evaluate_online() - not through this API "
              "(see the README, 'Online evaluation of production traces')")


@router.api_route("/api/v1/platform/evaluators", methods=["GET", "POST", "PATCH", "PUT",
                                                           "DELETE"])
@router.api_route("/api/v1/platform/evaluators/{rest:path}",
                  methods=["GET", "POST", "PATCH", "PUT", "DELETE"])
def evaluators_not_served(store: StoreDep) -> JSONResponse:  # a key is still needed (401)
    raise ApiError(422, "unsupported", NOT_SERVED)
