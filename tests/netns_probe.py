"""Listeners and probes for the network-namespace tests (run with `ip netns exec`, as root, in the namespace).

`python netns_probe.py listen READY PORT...`: answers TCP on every PORT (any address) and DNS-sized UDP on 53,
then writes READY. `python netns_probe.py probe [--from ADDRESS] HOST:PORT...`: tries every TCP connection at
once and prints `HOST:PORT open|refused|timeout`, one a line, in the order given.
"""

from __future__ import annotations

import socket
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# A dropped SYN gets no answer; a path that is open answers in well under this on one machine (the handshake is the
# kernel's, over a veth pair: a loaded machine delays the prober's wake-up, not the answer it then finds).
TIMEOUT = 0.5


def listen(ready: str, ports: list[int]) -> None:
    servers = []
    for port in ports:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("0.0.0.0", port))
        server.listen(16)
        servers.append(server)
    dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    dns.bind(("0.0.0.0", 53))

    def accept(server: socket.socket) -> None:
        while True:
            connection, _ = server.accept()
            connection.close()

    def answer() -> None:
        while True:
            data, peer = dns.recvfrom(512)
            dns.sendto(data, peer)

    for server in servers:
        threading.Thread(target=accept, args=(server,), daemon=True).start()
    threading.Thread(target=answer, daemon=True).start()
    Path(ready).write_text("ready\n")
    threading.Event().wait()


def connect(target: str, source: str | None) -> str:
    host, port = target.rsplit(":", 1)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as client:
        client.settimeout(TIMEOUT)
        if source:
            client.bind((source, 0))
        try:
            client.connect((host, int(port)))
        except ConnectionRefusedError:
            return "refused"
        except TimeoutError:
            return "timeout"
        except OSError as error:  # no route, unreachable: dropped as far as the prober can tell
            return f"error {error.errno}"
    return "open"


def probe(arguments: list[str]) -> None:
    source = None
    if arguments[:1] == ["--from"]:
        source, arguments = arguments[1], arguments[2:]
    with ThreadPoolExecutor(max_workers=len(arguments) or 1) as pool:
        results = list(pool.map(lambda target: connect(target, source), arguments))
    for target, result in zip(arguments, results, strict=True):
        print(f"{target} {result}")


if __name__ == "__main__":
    if sys.argv[1] == "listen":
        listen(sys.argv[2], [int(port) for port in sys.argv[3:]])
    else:
        probe(sys.argv[2:])
