"""How long the language server takes to answer ``initialize``, from the process start.

    python benchmarks/server_start.py [--repeat 7] [--command 'graphfix server']

Each run starts the server (default: this checkout's ``python -m fixer server``), sends
``initialize`` and waits for the answer; it prints the wall time and the server's CPU time up to
then (read from /proc, Linux; CPU is the stable figure on a loaded machine), then the median and
the best. ``--floor`` also times a bare Python that reads ``initialize`` and answers it with json
alone: the part of the start no graphfix change can remove (the interpreter's own start).
Goal (issue 24): 0.2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLOOR = (  # answers every request with {"capabilities": {}} until the end of input
    "import json, sys\n"
    "while line := sys.stdin.buffer.readline():\n"
    "    if line.lower().startswith(b'content-length:'):\n"
    "        sys.stdin.buffer.readline()\n"
    "        ask = json.loads(sys.stdin.buffer.read(int(line.split(b':')[1])))\n"
    "        if 'id' in ask:\n"
    "            body = json.dumps({'jsonrpc': '2.0', 'id': ask['id'], 'result': {'capabilities': {}}}).encode()\n"
    "            sys.stdout.buffer.write(b'Content-Length: %d\\r\\n\\r\\n%s' % (len(body), body))\n"
    "            sys.stdout.buffer.flush()\n"
)


def message(payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def read_message(stream) -> dict:
    length = 0
    while True:
        line = stream.readline()
        if not line:
            raise EOFError("the server closed its output before answering")
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return json.loads(stream.read(length))


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def one_start(command: list[str]) -> tuple[float, float]:
    """(wall seconds, server CPU seconds) from the process start to the initialize answer."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    started = time.perf_counter()
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    server.stdin.write(message({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                "params": {"processId": os.getpid(), "rootUri": None, "capabilities": {}}}))
    server.stdin.flush()
    while True:
        answer = read_message(server.stdout)
        if answer.get("id") == 1:
            break
    wall = time.perf_counter() - started
    cpu = cpu_seconds(server.pid)
    assert "capabilities" in answer.get("result", {}), answer
    server.stdin.write(message({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
    server.stdin.write(message({"jsonrpc": "2.0", "method": "exit"}))
    server.stdin.close()
    server.wait(timeout=30)
    return wall, cpu


def measure(name: str, command: list[str], repeat: int) -> None:
    runs = [one_start(command) for _ in range(repeat)]
    walls, cpus = [w for w, _ in runs], [c for _, c in runs]
    print(f"{name}: initialize answered in {statistics.median(walls):.3f} s wall (best {min(walls):.3f}), "
          f"{statistics.median(cpus):.3f} s CPU (best {min(cpus):.3f}); {repeat} starts")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--command", default=f"{shlex.quote(sys.executable)} -m fixer server")
    parser.add_argument("--floor", action="store_true", help="also time a bare Python answering initialize")
    args = parser.parse_args()
    one_start(shlex.split(args.command))  # warm the file cache and the bytecode
    measure("graphfix server", shlex.split(args.command), args.repeat)
    if args.floor:
        measure("bare Python answering initialize (the floor)", [sys.executable, "-c", FLOOR], args.repeat)


if __name__ == "__main__":
    main()
