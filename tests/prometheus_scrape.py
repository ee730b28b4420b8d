"""What the metrics tests share: a scrape's samples parsed with prometheus-client's own
parser, and a Pushgateway stand-in on 127.0.0.1 that keeps each push it is given."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    """Every sample of a scrape by (name, sorted labels), parsed by the client's parser."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in out, f"{key} twice"
            out[key] = s.value
    return out


def value(got: Samples, name: str, **labels: str) -> float | None:
    return got.get((name, tuple(sorted(labels.items()))))


class _Gateway(http.server.BaseHTTPRequestHandler):
    """Keeps each request it gets (method, path, body) in the server's `got`."""

    def do_PUT(self) -> None:  # noqa: N802 - http.server's name
        n = int(self.headers.get("Content-Length") or 0)
        self.server.got.append((self.command, self.path, self.rfile.read(n).decode()))  # type: ignore[attr-defined]
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        return None


@contextmanager
def recording_gateway() -> Iterator[http.server.HTTPServer]:
    """A Pushgateway stand-in on 127.0.0.1 (any free port; `server_address[1]`) whose `got`
    lists each push as (method, path, body); stopped when the block ends."""
    server = http.server.HTTPServer(("127.0.0.1", 0), _Gateway)
    server.got = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
