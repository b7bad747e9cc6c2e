"""Attachment throughput through ``assay serve``, beside plain file copy on the same disk.

    .venv/bin/python bench/attachments.py [--n 10000] [--size 102400] [--batch 100]
                                          [--database-url postgresql+psycopg://...]

A dataset of N examples with one image of SIZE bytes each (random bytes behind a PNG header:
incompressible and all distinct, so neither compression nor deduplication flatters the figure),
uploaded with the official ``langsmith`` SDK (``create_examples``, BATCH examples a request)
to a server run as its own process (``uvicorn --factory assay.server:app_from_env``), then
downloaded the way the SDK does (``list_examples(include_attachments=True)``: one GET per
attachment on its signed URL). Then the server alone (up to 2,000 examples: multipart bodies
built before the clock starts, one keep-alive connection, for upload and download), a
deduplicated upload (the same image for every example) and a range read.

The floor is plain file copy on the same disk: writing N files of SIZE bytes (copied from a
source directory, then ``os.sync()``) and reading them back. Figures are MB/s (10^6 bytes) of
attachment payload; the ratio says what share of the disk's plain copy speed the server keeps.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent / "src"))

PNG_HEAD = b"\x89PNG\r\n\x1a\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _image(size: int) -> bytes:
    return PNG_HEAD + os.urandom(size - len(PNG_HEAD))


def _mbps(nbytes: int, seconds: float) -> float:
    return nbytes / 1e6 / seconds if seconds > 0 else float("inf")


def file_copy_floor(n: int, size: int, where: Path) -> tuple[float, float]:
    """(write MB/s, read MB/s) of N plain files on the disk holding ``where``."""
    src, dst = where / "src", where / "dst"
    src.mkdir()
    dst.mkdir()
    for i in range(n):
        (src / f"{i:06d}.png").write_bytes(_image(size))
    os.sync()
    t0 = time.perf_counter()
    for i in range(n):
        shutil.copyfile(src / f"{i:06d}.png", dst / f"{i:06d}.png")
    os.sync()
    write = time.perf_counter() - t0
    t0 = time.perf_counter()
    total = 0
    for i in range(n):
        total += len((dst / f"{i:06d}.png").read_bytes())
    read = time.perf_counter() - t0
    assert total == n * size
    shutil.rmtree(src)
    shutil.rmtree(dst)
    return _mbps(n * size, write), _mbps(n * size, read)


def _start_server(db_url: str, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ASSAY_DATABASE_URL": db_url, "ASSAY_SERVER_NO_AUTH": "1",
           "ASSAY_MAX_BODY_BYTES": str(256 * 1024 * 1024),
           "PYTHONPATH": str(_HERE.parent / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "assay.server:app_from_env",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        env=env)
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ok", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("assay serve did not start")


def server_throughput(n: int, size: int, batch: int, db_url: str) -> dict[str, float]:
    from langsmith import Client as LangSmithClient

    port = _free_port()
    proc = _start_server(db_url, port)
    try:
        ls = LangSmithClient(api_url=f"http://127.0.0.1:{port}", api_key="unused")
        ds = ls.create_dataset(f"bench-attachments-{uuid.uuid4().hex[:8]}")
        images = [_image(size) for _ in range(min(n, batch))]  # made before the clock starts
        t0 = time.perf_counter()
        for start in range(0, n, batch):
            count = min(batch, n - start)
            ls.create_examples(dataset_id=ds.id, examples=[
                {"inputs": {"i": start + k}, "attachments": {
                    "image": ("image/png", images[k][:-8] + (start + k).to_bytes(8, "big"))}}
                for k in range(count)])
        upload = time.perf_counter() - t0

        t0 = time.perf_counter()
        got = 0
        for ex in ls.list_examples(dataset_id=ds.id, include_attachments=True):
            got += len(ex.attachments["image"]["reader"].read())
        download = time.perf_counter() - t0
        assert got == n * size, (got, n * size)

        # deduplicated: the same image for every example of a second dataset
        same = _image(size)
        ds2 = ls.create_dataset(f"bench-dedup-{uuid.uuid4().hex[:8]}")
        m = min(n, 1000)
        t0 = time.perf_counter()
        for start in range(0, m, batch):
            ls.create_examples(dataset_id=ds2.id, examples=[
                {"inputs": {"i": start + k}, "attachments": {"image": ("image/png", same)}}
                for k in range(min(batch, m - start))])
        dedup = time.perf_counter() - t0

        # the server alone: prebuilt bodies, one keep-alive connection (no SDK on the clock)
        import httpx

        from assay.client._remote_attachments import _encode

        raw_n = min(n, 2000)
        ds3 = ls.create_dataset(f"bench-raw-{uuid.uuid4().hex[:8]}")
        bodies = []
        for start in range(0, raw_n, batch):
            parts = []
            for k in range(min(batch, raw_n - start)):
                ex_id = str(uuid.uuid4())
                data = images[k][:-8] + (10**9 + start + k).to_bytes(8, "big")
                parts += [(ex_id, b"{}", "application/json"),
                          (f"{ex_id}.inputs", b'{"i": 0}', "application/json"),
                          (f"{ex_id}.attachment.image", data, f"image/png; length={len(data)}")]
            bodies.append(_encode(parts))
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as http:
            t0 = time.perf_counter()
            for body, ctype in bodies:
                r = http.post(f"/v1/platform/datasets/{ds3.id}/examples", content=body,
                              headers={"content-type": ctype})
                assert r.status_code == 201, r.text
            raw_up = time.perf_counter() - t0
            urls = [e["attachment_urls"]["attachment.image"]["presigned_url"]
                    for off in range(0, raw_n, 100)
                    for e in http.get("/examples", params={
                        "dataset": str(ds3.id), "offset": off, "limit": 100,
                        "select": ["attachment_urls"]}).json()]
            t0 = time.perf_counter()
            got = sum(len(http.get(u).content) for u in urls)
            raw_down = time.perf_counter() - t0
            assert got == raw_n * size

        import requests

        url = next(iter(ls.list_examples(dataset_id=ds.id, include_attachments=True, limit=1))
                   ).attachments["image"]["presigned_url"]
        t0 = time.perf_counter()
        reps = 200
        for _ in range(reps):
            r = requests.get(url, headers={"Range": "bytes=0-4095"})
            assert r.status_code == 206 and len(r.content) == 4096
        ranged = (time.perf_counter() - t0) / reps
    finally:
        proc.terminate()
        proc.wait(10)
    return {"upload": _mbps(n * size, upload), "download": _mbps(n * size, download),
            "upload_s": upload, "download_s": download,
            "dedup": _mbps(m * size, dedup), "dedup_n": m, "range_ms": ranged * 1e3,
            "raw_n": raw_n, "raw_up": _mbps(raw_n * size, raw_up),
            "raw_down": _mbps(raw_n * size, raw_down)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=10_000, help="examples (one attachment each)")
    p.add_argument("--size", type=int, default=100 * 1024, help="bytes per attachment")
    p.add_argument("--batch", type=int, default=100, help="examples per create_examples call")
    p.add_argument("--database-url", default=None,
                   help="a PostgreSQL URL (default: a fresh SQLite file in a temp directory)")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="assay-bench-att-",
                                     dir=os.environ.get("TMPDIR")) as tmp:
        where = Path(tmp)
        db_url = a.database_url or f"sqlite:///{where / 'assay.db'}"
        backend = "postgresql" if a.database_url else "sqlite"
        print(f"attachments: n={a.n} size={a.size} B ({a.n * a.size / 1e6:.0f} MB), "
              f"batch={a.batch}, backend={backend}, disk of {where}")
        fw, fr = file_copy_floor(a.n, a.size, where)
        print(f"  plain file copy (same disk): write {fw:8.1f} MB/s   read {fr:8.1f} MB/s")
        s = server_throughput(a.n, a.size, a.batch, db_url)
        print(f"  assay serve + langsmith SDK: upload {s['upload']:7.1f} MB/s "
              f"({s['upload_s']:.1f} s, {s['upload'] / fw:.2f}x file write)")
        print(f"                               download {s['download']:5.1f} MB/s "
              f"({s['download_s']:.1f} s, {s['download'] / fr:.2f}x file read; one GET each)")
        print(f"  server alone ({s['raw_n']} examples, prebuilt bodies, keep-alive httpx): "
              f"upload {s['raw_up']:.1f} MB/s ({s['raw_up'] / fw:.2f}x file write), "
              f"download {s['raw_down']:.1f} MB/s ({s['raw_down'] / fr:.2f}x file read)")
        print(f"  deduplicated upload ({s['dedup_n']} x the same image): {s['dedup']:.1f} MB/s "
              "of payload")
        print(f"  range read (4 KiB of one attachment): {s['range_ms']:.2f} ms a request")
        if not a.database_url:
            size = (where / "assay.db").stat().st_size
            distinct = (a.n + s["raw_n"] + 1) * a.size
            print(f"  SQLite file: {size / 1e6:.0f} MB for {distinct / 1e6:.0f} MB of distinct "
                  "payload (all three datasets)")


if __name__ == "__main__":
    main()
