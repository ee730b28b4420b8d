"""One `run` per warehouse at a time: an exclusive lock file in the warehouse state folder.

Local warehouses only: the lock is a file created with O_EXCL holding the owner's pid, and
a lock whose pid is gone is taken over. Never touches tables.
"""

from __future__ import annotations

import os

from ticdc_sync.errors import UserError
from ticdc_sync.locations import local_path, state_location


class RunLock:
    """One `run` per project at a time: an exclusive lock file in the warehouse state folder."""

    def __init__(self, warehouse: str) -> None:
        self.path = local_path(state_location(warehouse, "run.lock"))
        self.held = False

    def __enter__(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if self._stale():
                    self.path.unlink(missing_ok=True)
                    continue
                owner = self.path.read_text(errors="replace").strip()
                raise UserError(
                    f"another `ticdc-sync run` holds {self.path} ({owner}) "
                    "(hint: wait for it to finish; if no run is active, delete the lock file)"
                ) from None
            with os.fdopen(fd, "w") as f:
                f.write(f"pid {os.getpid()}\n")
            self.held = True
            return self
        raise UserError(f"cannot take the run lock {self.path}")

    def _stale(self) -> bool:
        try:
            text = self.path.read_text()
            pid = int(text.split()[1])
        except (OSError, ValueError, IndexError):
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        """Give the lock up (also from a signal handler that ends the process)."""
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False
