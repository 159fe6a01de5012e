"""A metrics endpoint on loopback for the real Prometheus of the observability tests to scrape: fixed bodies per
path, optionally behind a bearer token and TLS, as the tenants' HAMi, konnectivity-server and Kamaji serve them."""

from __future__ import annotations

import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Fake:
    server: ThreadingHTTPServer
    port: int
    requests: list[tuple[str, str]]  # (path, Authorization header) of every GET, in order
    bodies: dict[str, str]  # what it answers, per path: a test may change it while it serves

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        """The target goes away, as a sleeping tenant's does: its port stops answering."""
        self.server.shutdown()
        self.server.server_close()


def serve(bodies: dict[str, str], token: str | None = None, context: ssl.SSLContext | None = None) -> Fake:
    """A server answering GET on each path of `bodies` with its body (and only with `token`, when given)."""
    seen: list[tuple[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            seen.append((self.path, self.headers.get("Authorization", "")))
            if self.path not in bodies:
                self.send_error(404)
            elif token is not None and self.headers.get("Authorization") != f"Bearer {token}":
                self.send_error(403)
            else:
                data = bodies[self.path].encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if context:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    # Polled often, so a stop (a tenant going to sleep, a test's teardown) takes no half-second per server.
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    return Fake(server, server.server_address[1], seen, bodies)
