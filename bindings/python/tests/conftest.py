"""What the binding tests share: a real omrd of the release build, started per test on
ephemeral ports with a data directory of its own (the embedded store), and the `omr` command
line beside it. OMR_BIN_DIR names the directory holding both (default: target/release)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import tempfile
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
BIN = pathlib.Path(os.environ.get("OMR_BIN_DIR", ROOT / "target" / "release"))


class Omrd:
    """One omrd process and its URLs."""

    def __init__(self, env: dict[str, str]):
        self.dir = tempfile.TemporaryDirectory(prefix="omr-py-")
        data = pathlib.Path(self.dir.name) / "data"
        self.log = open(pathlib.Path(self.dir.name) / "omrd.log", "w+")
        full = {k: v for k, v in os.environ.items() if not k.startswith("OMR_")}
        full.update(
            {
                # Every request of a test comes from one address: the limits have their own tests.
                "OMR_RATE_LIMIT_PER_SECOND": "0",
                "OMR_READ_RATE_LIMIT_PER_SECOND": "0",
                "OMR_DIGEST_RATE_LIMIT_PER_SECOND": "0",
                "OMR_POLL_INTERVAL_MS": "100",
                # omr-light-v1: every ask detects the open batch up to the head, so that a
                # test's few messages are detected (`until_detected`) without waiting for a
                # refresh mark.
                "OMR_LIGHT_REFRESH_MESSAGES": "1",
                "RUST_LOG": "warn",
            }
        )
        full.update(env)
        self.proc = subprocess.Popen(
            [str(BIN / "omrd"), "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0",
             "--data-dir", str(data)],
            env=full, stdout=self.log, stderr=subprocess.STDOUT,
        )
        addr = data / "omrd.addr"
        deadline = time.monotonic() + 30
        while not (addr.exists() and addr.stat().st_size > 0):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"omrd did not start:\n{self.output()}")
            time.sleep(0.05)
        a = json.loads(addr.read_text())
        scheme = "https" if a.get("tls") else "http"
        self.http = f"{scheme}://{a['http']}"
        self.grpc = f"{scheme}://{a['grpc']}"

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def params(self) -> dict:
        assert self.http.startswith("http:"), "params() reads a plain-text server"
        with urllib.request.urlopen(f"{self.http}/v1/params") as r:
            return json.load(r)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        out = self.output()
        self.log.close()
        self.dir.cleanup()
        assert "panicked" not in out, out


@pytest.fixture
def omrd_factory():
    started = []

    def start(**env: str) -> Omrd:
        o = Omrd(env)
        started.append(o)
        return o

    yield start
    for o in started:
        o.stop()


@pytest.fixture
def light(omrd_factory) -> Omrd:
    """omrd on omr-light-v1 with its defaults (no attachments)."""
    return omrd_factory(OMR_PARAM_SET="omr-light-v1")


def omr_cli(*args: str) -> str:
    """Run the `omr` command line; its standard output (it must succeed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMR_")}
    out = subprocess.run([str(BIN / "omr"), *args], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def client_for(o: Omrd):
    import omr

    return omr.Client(omr.ClientConfig(http_url=o.http, grpc_url=o.grpc))


async def light_recipient(server: Omrd, path):
    """A client of `server` and omr-light-v1 keys generated at `path`, registered."""
    import omr

    client = client_for(server)
    keys = await omr.generate_keys(str(path), "omr-light-v1")
    await client.register(keys)
    return client, keys


async def until_detected(client, keys, index: int):
    """Wait until the server has detected board index `index` for `keys`."""
    import asyncio

    while (await client.status(keys)).cursor <= index:
        await asyncio.sleep(0.1)


async def retrieve_until(client, keys, want: int, timeout: float = 60.0):
    """Retrieve until `want` messages came in all, acknowledging each inbox (so that each
    retrieval returns only new ones); every message retrieved, in order."""
    import asyncio

    got = []
    deadline = asyncio.get_running_loop().time() + timeout
    while len(got) < want:
        inbox = await client.retrieve(keys)
        got.extend(inbox.messages)
        keys.acknowledge(inbox)
        if len(got) >= want:
            break
        assert asyncio.get_running_loop().time() < deadline, f"only {len(got)} of {want} messages"
        await asyncio.sleep(0.2)
    return got
