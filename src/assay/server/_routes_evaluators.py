"""Online evaluators (``/api/v1/platform/evaluators``, the SDK's ``client.evaluators``):
refused by name.

LangSmith runs these rules on incoming runs (online evaluation). assay has no online
evaluation yet, and an evaluator stored but never run would look like a working one, so every
call gets a 422 saying so instead of a bare 404.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ._deps import StoreDep
from ._errors import ApiError

__all__ = ["NOT_SERVED", "router"]

router = APIRouter()

NOT_SERVED = ("online evaluators (/api/v1/platform/evaluators, client.evaluators) are not "
              "served by assay: it has no online evaluation; score runs with evaluate() and "
              "assay's evaluators instead (see the README, 'The team server and the LangSmith "
              "SDKs')")


@router.api_route("/api/v1/platform/evaluators", methods=["GET", "POST", "PATCH", "PUT",
                                                           "DELETE"])
@router.api_route("/api/v1/platform/evaluators/{rest:path}",
                  methods=["GET", "POST", "PATCH", "PUT", "DELETE"])
def evaluators_not_served(store: StoreDep) -> JSONResponse:  # a key is still needed (401)
    raise ApiError(422, "unsupported", NOT_SERVED)
