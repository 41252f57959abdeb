"""Python (the bindings) against the Rust command line on the same work, on omr-light-v1:
keygen, send, and the retrieval of k = 50 messages among a board of N (default 2^16), each timed
whole (the CLI's time includes starting its process, as a user of either pays it). Rounds
alternate Python and CLI; the medians are printed with their ratio.

    target/python-venv/bin/python bindings/python/bench.py [--board 65536] [--rounds 3]

It starts its own omrd (release build, embedded store, rate limits off) in a temporary
directory. The board is filled from Python (messages prepared and posted 64 at a time).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent / "tests"))
from conftest import BIN, Omrd, omr_cli  # noqa: E402

import omr  # noqa: E402


def timed(f):
    t = time.perf_counter()
    r = f()
    return time.perf_counter() - t, r


async def atimed(coro):
    t = time.perf_counter()
    r = await coro
    return time.perf_counter() - t, r


def cli(*args: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMR_")}
    t = time.perf_counter()
    out = subprocess.run([str(BIN / "omr"), *args], env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    assert out.returncode == 0, out.stderr
    return dt


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--board", type=int, default=1 << 16)
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    server = Omrd({"OMR_PARAM_SET": "omr-light-v1"})
    work = pathlib.Path(tempfile.mkdtemp(prefix="omr-bench-"))
    try:
        client = omr.Client(omr.ClientConfig(http_url=server.http, grpc_url=server.grpc))
        srv = ["--http", server.http, "--grpc", server.grpc]
        rows = {}

        # keygen
        py, rs = [], []
        for r in range(a.rounds):
            dt, _ = await atimed(omr.generate_keys(str(work / f"py{r}"), "omr-light-v1"))
            py.append(dt)
            rs.append(cli("keygen", "--out", str(work / f"cli{r}"), "--param-set", "omr-light-v1", "--json"))
        rows["keygen"] = (py, rs)

        alice = omr.KeyDirectory.open(str(work / "py0"))
        stranger = omr.KeyDirectory.open(str(work / "py1"))
        await client.register(alice)

        # send (one sealed message to an address, stamped when asked)
        py, rs = [], []
        addr = alice.address()
        for r in range(a.rounds):
            dt, _ = await atimed(client.send(addr, b"python"))
            py.append(dt)
            rs.append(cli("send", "--to", addr, "--message", "cli", *srv, "--json"))
        rows["send"] = (py, rs)

        # The board: k messages to alice among N in all.
        have = json.loads(subprocess.check_output(
            ["curl", "-s", f"{server.http}/v1/params"]))["board_head"]
        n = a.board - have
        mine = set(range(0, n, max(1, n // a.k))[: a.k - 2 * a.rounds])
        t = time.perf_counter()
        for start in range(0, n, 64):
            batch = []
            for i in range(start, min(n, start + 64)):
                to = addr if i in mine else stranger.address()
                batch.append(client.prepare(to, f"message {i}".encode()))
            prepared = await asyncio.gather(*batch)
            await asyncio.gather(*(client.post(p) for p in prepared))
        print(f"board of {a.board} filled in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        while (await client.status(alice)).lag > 0:
            await asyncio.sleep(0.5)

        # retrieve k among the board from a fresh state, each side on a copy of the directory
        py, rs = [], []
        k = None
        for r in range(a.rounds):
            for side in ("py", "cli"):
                d = work / f"retrieve-{side}"
                shutil.rmtree(d, ignore_errors=True)
                shutil.copytree(work / "py0", d)
                (d / "digest-state.json").unlink(missing_ok=True)
                if side == "py":
                    keys = omr.KeyDirectory.open(str(d))
                    dt, inbox = await atimed(client.retrieve(keys))
                    k = len(inbox.messages)
                    py.append(dt)
                else:
                    rs.append(cli("digest", "--keys", str(d), *srv, "--json"))
        rows[f"retrieve k={k} of {a.board}"] = (py, rs)

        print(f"{'work':<28} {'Python (s)':>11} {'CLI (s)':>9} {'Python/CLI':>10}")
        for name, (py, rs) in rows.items():
            p, c = statistics.median(py), statistics.median(rs)
            print(f"{name:<28} {p:>11.3f} {c:>9.3f} {p / c:>10.2f}")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
