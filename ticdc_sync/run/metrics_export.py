"""Where a run's metrics (`metrics.RunMetrics`) go, through the Prometheus client: served over
HTTP while the run runs (`--metrics-port`, the profile's `run.metrics_port`), written to a
file for node exporter's textfile collector (`--metrics-file`), pushed to a Pushgateway
(`--metrics-push`). Also which of these a run was asked for (`MetricsOptions`), checked
before the run starts.

The server is the client's (`start_http_server`): one daemon thread, stopped by `stop()`
at the end of the run. The file is written by the client's `write_to_textfile` (a temp
file renamed over it, so the collector never reads half a file). Decides nothing about
the values. No pyspark.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from prometheus_client import (
    CollectorRegistry,
    push_to_gateway,
    start_http_server,
    write_to_textfile,
)

from ticdc_sync.core.errors import UserError

DEFAULT_ADDRESS = "127.0.0.1"
PUSH_JOB = "ticdc_sync"
# How long a push may take before the run gives up on it (a warning, not an error).
PUSH_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class MetricsOptions:
    """Where a run's metrics go; each None when not asked for."""

    port: int | None = None  # serve on it (0: any free port, printed)
    address: str = DEFAULT_ADDRESS
    port_from: str = "--metrics-port"  # where the port was set (for errors)
    file: Path | None = None  # node exporter's textfile collector
    push: str | None = None  # a Pushgateway's URL

    @property
    def wanted(self) -> bool:
        return self.port is not None or self.file is not None or self.push is not None


def metrics_options(
    *,
    port: int | None,
    address: str | None,
    file: str | None,
    push: str | None,
    profile_port: int | None = None,
    profile_address: str | None = None,
) -> MetricsOptions:
    """The options of `run` (flags win over the profile's `run.metrics_port` and
    `run.metrics_address`), checked: a clear error for a bad one, before anything runs."""
    chosen_port = port if port is not None else profile_port
    port_from = "--metrics-port" if port is not None else "run.metrics_port (profiles.yml)"
    if chosen_port is not None and not 0 <= chosen_port <= 65535:
        raise UserError(
            f"{port_from} {chosen_port}: not a TCP port (hint: 1-65535, or 0 for any free one)"
        )
    addr = address if address is not None else profile_address or DEFAULT_ADDRESS
    addr_from = "--metrics-address" if address is not None else "run.metrics_address"
    _check_address(addr, addr_from)
    path = Path(file) if file is not None else None
    if path is not None:
        if path.suffix != ".prom":
            raise UserError(
                f"--metrics-file {file}: node exporter's textfile collector reads only files "
                "ending in .prom (hint: e.g. --metrics-file /var/lib/node_exporter/ticdc_sync.prom)"
            )
        if not path.parent.is_dir():
            raise UserError(
                f"--metrics-file {file}: folder {path.parent} does not exist (hint: create it, "
                "or point at the textfile collector's --collector.textfile.directory)"
            )
    if push is not None:
        url = urlparse(push if "://" in push else f"http://{push}")
        if url.scheme not in ("http", "https") or not url.hostname:
            raise UserError(
                f"--metrics-push {push}: not a Pushgateway URL (hint: e.g. http://pushgateway:9091)"
            )
    return MetricsOptions(port=chosen_port, address=addr, port_from=port_from, file=path, push=push)


def _check_address(addr: str, where: str) -> None:
    try:
        ipaddress.ip_address(addr)
    except ValueError:
        if not addr or any(c in addr for c in " /:"):
            raise UserError(
                f"{where} {addr!r}: not an address to listen on (hint: 127.0.0.1, the "
                "default; 0.0.0.0 for every interface; or a host name)"
            ) from None


class MetricsServer:
    """`registry` served over HTTP on `address:port` by the client's server thread (a
    daemon) until `stop()`."""

    def __init__(self, registry: CollectorRegistry, options: MetricsOptions) -> None:
        assert options.port is not None
        try:
            self._server, self._thread = start_http_server(
                options.port, addr=options.address, registry=registry
            )
        except OSError as e:
            raise UserError(
                f"{options.port_from} {options.port}: cannot serve metrics on "
                f"{options.address}:{options.port} ({e.strerror or e}) (hint: pick a free "
                "port, or check --metrics-address)"
            ) from None
        host, port = self._server.server_address[:2]
        self.port = int(port)
        shown = f"[{host}]" if ":" in str(host) else host
        self.url = f"http://{shown}:{self.port}/metrics"

    def stop(self) -> None:
        """Stop serving and wait for the server's thread to end."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def write_file(registry: CollectorRegistry, path: Path) -> None:
    """The metrics as node exporter's textfile collector reads them, replacing `path` at
    once (written beside it, then renamed)."""
    write_to_textfile(str(path), registry)


def export(
    registry: CollectorRegistry,
    options: MetricsOptions,
    grouping: dict[str, str],
    warn: Callable[[str], None],
) -> None:
    """The metrics to the file and the Pushgateway the run was asked for, if any. A failure
    is a warning: the run's own work is done and stays done."""
    if options.file is not None:
        try:
            write_file(registry, options.file)
        except OSError as e:
            warn(f"warning: --metrics-file {options.file}: not written ({e.strerror or e})")
    if options.push is not None:
        try:
            push(registry, options.push, grouping)
        except OSError as e:  # URLError and HTTPError are OSErrors
            warn(f"warning: --metrics-push {options.push}: not pushed ({_why(e)})")


def _why(e: OSError) -> str:
    reason = getattr(e, "reason", None)
    return str(reason if reason is not None else e.strerror or e)


def push(
    registry: CollectorRegistry, url: str, grouping: dict[str, str], timeout: float | None = None
) -> None:
    """The metrics to the Pushgateway at `url` (job `ticdc_sync`, grouped by `grouping`),
    replacing what this group pushed before (HTTP PUT)."""
    push_to_gateway(
        url,
        job=PUSH_JOB,
        registry=registry,
        grouping_key=grouping,
        timeout=PUSH_TIMEOUT_SECONDS if timeout is None else timeout,
    )
