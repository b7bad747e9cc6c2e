"""langsmith peer: ``evaluate(..., upload_results=False)`` over locally built Example objects.

No-op target and one trivial evaluator; ``--concurrency 0`` is LangSmith's sequential default.
Runs offline: tracing off, an unroutable endpoint, nothing uploaded.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import time
import uuid
from datetime import UTC, datetime

from langsmith import Client, evaluate
from langsmith.schemas import Example, LangSmithInfo


def target(inputs: dict) -> dict:
    return {"y": inputs["x"]}


def matches(outputs: dict, reference_outputs: dict) -> bool:
    return outputs["y"] == reference_outputs["y"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=0)
    ap.add_argument("--sleep-ms", type=float, default=0.0)
    args = ap.parse_args()
    fn = target
    if args.sleep_ms:
        delay = args.sleep_ms / 1000

        # A sync target in LangSmith's thread pool: langsmith 0.15's aevaluate traces the target
        # with enabled=True even when upload_results=False (it then tries to upload every run),
        # so the async path is not "local"; the sync path is.
        def fn(inputs: dict) -> dict:  # type: ignore[misc]
            time.sleep(delay)
            return {"y": inputs["x"]}

    dataset_id = uuid.uuid4()
    now = datetime.now(UTC)
    examples = [Example(id=uuid.uuid4(), dataset_id=dataset_id, inputs={"x": i},
                        outputs={"y": i}, created_at=now) for i in range(args.n)]
    # info given up front: the client does not even ask the (unroutable) endpoint for /info
    client = Client(api_url="http://127.0.0.1:9", api_key="offline", info=LangSmithInfo())
    c0 = time.process_time()  # CPU of all threads: steadier than wall on a busy machine
    t0 = time.perf_counter()
    res = evaluate(fn, data=examples, evaluators=[matches], client=client,
                   upload_results=False, max_concurrency=args.concurrency)
    rows = list(res)
    seconds = time.perf_counter() - t0
    cpu_seconds = time.process_time() - c0
    assert len(rows) == args.n, f"langsmith returned {len(rows)} rows"
    scores = [r["evaluation_results"]["results"][0].score for r in rows]
    assert all(s is True or s == 1 for s in scores), f"unexpected scores {set(scores)}"
    print(json.dumps({"peer": "langsmith", "n": args.n, "concurrency": args.concurrency,
                      "seconds": seconds, "cpu_seconds": cpu_seconds,
                      "version": importlib.metadata.version("langsmith")}))


if __name__ == "__main__":
    main()
