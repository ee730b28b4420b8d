"""Tests of how ticdc-sync behaves as a program on a machine: each runs the CLI (or a
session) in a new process, with its own JVM, and reads the result with the shared session.

Marked `spark`; the shared session (re-exported below) only reads the targets back.
"""

from __future__ import annotations

from tests.spark.conftest import spark  # noqa: F401 - the one shared SparkSession fixture
