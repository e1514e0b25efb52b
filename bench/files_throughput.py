"""Files through the gateway (not a timed test; prints figures).

  * upload and download of one large file (50 MB) through the Files API, over loopback HTTP, against a
    plain copy of the same file on the same disk (`shutil.copyfile`); the target is within 2x of the copy;
  * for reference, the same download from a bare Starlette FileResponse under uvicorn (no gateway): the
    floor of serving a file over ASGI with this machine's Python;
  * the time copying files into a new python session adds: the first call of a container made with 10
    files (100 KB each) against the first call of an auto container without files (Docker backend,
    kernels from the warm pool, the scripted engine).

Run: .venv/bin/python bench/files_throughput.py [--mb 50] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import Gateway, ensure_sandbox_image, free_port, gateway_config, sandbox_section, start_emulator, wait_for_port  # noqa: E402


def timed(work, runs: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def throughput(tmp: Path, megabytes: int, runs: int) -> None:
    size = megabytes * 1024 * 1024
    files = {"max_file_bytes": size + 1, "tenant_quota_bytes": size * (3 * runs + 4)}
    gateway = Gateway(gateway_config("http://127.0.0.1:9", tmp, files=files), tmp).start()
    try:
        source = tmp / "source.bin"
        source.write_bytes(os.urandom(size))
        copy = timed(lambda: shutil.copyfile(source, tmp / "copy.bin"), runs)
        ids: list[str] = []
        with httpx.Client(base_url=gateway.url, timeout=120) as client:

            def upload() -> None:
                with source.open("rb") as file:
                    answer = client.post("/v1/files", data={"purpose": "user_data"}, files={"file": ("source.bin", file)})
                answer.raise_for_status()
                ids.append(answer.json()["id"])

            def download() -> None:
                with client.stream("GET", f"/v1/files/{ids[0]}/content") as answer, (tmp / "download.bin").open("wb") as out:
                    for chunk in answer.iter_bytes(1024 * 1024):
                        out.write(chunk)

            up = timed(upload, runs)
            down = timed(download, runs)
            assert (tmp / "download.bin").read_bytes() == source.read_bytes()
        bare = bare_download(tmp, source, runs)
        for name, seconds in (("plain copy", copy), ("upload", up), ("download", down), ("bare ASGI download", bare)):
            ratio = "" if name == "plain copy" else f"   {seconds / copy:4.1f}x the copy's time"
            print(f"{name:<19} {megabytes} MB: {seconds * 1000:7.1f} ms  {megabytes / seconds:7.0f} MB/s{ratio}")
    finally:
        gateway.stop()


BARE_APP = """
import sys, uvicorn
from starlette.applications import Starlette
from starlette.responses import FileResponse
from starlette.routing import Route
class Download(FileResponse):
    chunk_size = 1024 * 1024
async def get(request):
    return Download(sys.argv[1], media_type="application/octet-stream")
uvicorn.run(Starlette(routes=[Route("/f", get)]), port=int(sys.argv[2]), log_level="warning")
"""


def bare_download(tmp: Path, source: Path, runs: int) -> float:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", BARE_APP, str(source), str(port)])
    try:
        wait_for_port(port)
        with httpx.Client(timeout=120) as client:

            def download() -> None:
                with client.stream("GET", f"http://127.0.0.1:{port}/f") as answer, (tmp / "bare.bin").open("wb") as out:
                    for chunk in answer.iter_bytes(1024 * 1024):
                        out.write(chunk)

            return timed(download, runs)
    finally:
        server.terminate()
        server.wait()


def session_copy(tmp: Path, runs: int) -> None:
    emulator = start_emulator(tmp)
    image = ensure_sandbox_image()
    sandbox = sandbox_section("docker", f"bench-files-{os.getpid()}", pool_size=2, max_sessions=4 * runs + 8, max_sessions_per_tenant=4 * runs + 8)
    gateway = Gateway(gateway_config(emulator.url, tmp, sandbox=sandbox | {"image": image}), tmp).start()
    try:
        with httpx.Client(base_url=gateway.url, timeout=120) as client:
            uploads = []
            for number in range(10):
                answer = client.post("/v1/files", data={"purpose": "user_data"}, files={"file": (f"f{number}.bin", os.urandom(100_000))})
                uploads.append(answer.json()["id"])

            def first_call(tool: dict[str, object]) -> float:
                time.sleep(1.0)  # the pool refills between samples: every first call gets a warm kernel
                started = time.perf_counter()
                answer = client.post("/v1/responses", json={"model": "openai/gpt-oss-20b", "input": "[[python 1]]", "tools": [tool]})
                elapsed = time.perf_counter() - started
                assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text
                return elapsed

            without, with_files = [], []
            for _ in range(runs):
                without.append(first_call({"type": "code_interpreter", "container": {"type": "auto"}}))
                container = client.post("/v1/containers", json={"name": "bench", "file_ids": uploads}).json()["id"]
                with_files.append(first_call({"type": "code_interpreter", "container": container}))
        plain, filled = statistics.median(without), statistics.median(with_files)
        print(f"first python call, new session, no files:        p50 {plain * 1000:6.1f} ms")
        print(f"first python call, new session, 10 files x 100 KB: p50 {filled * 1000:6.1f} ms  (+{(filled - plain) * 1000:.1f} ms)")
    finally:
        gateway.stop()
        emulator.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=ROOT / "build" if (ROOT / "build").is_dir() else None) as tmp:
        throughput(Path(tmp), args.mb, args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        session_copy(Path(tmp), args.runs * 2)


if __name__ == "__main__":
    main()
