"""A real Hive metastore server (thrift, from scripts/metastore.py: the Hive jars PySpark
ships, with its Derby database in a temp folder) for the whole test session.

The tests here run the CLI and their readers in processes of their own, each with its own
JVM whose session catalog is that metastore (the shared `spark` fixture has no Hive
support). The server is stopped and its data deleted at the end of the session.
"""

from __future__ import annotations

import atexit
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "metastore.py"


def metastore_module() -> ModuleType:
    """scripts/metastore.py as a module (it is a script, not part of the package)."""
    name = "ticdc_sync_scripts_metastore"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPT)
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


@pytest.fixture(scope="session")
def hive_metastore():
    server = metastore_module().Metastore(die_with_parent=True)
    atexit.register(server.close)  # the last resort if the teardown never runs
    try:
        server.start()
        yield server
    finally:
        server.close()
        atexit.unregister(server.close)
