"""The reader as of a TSO (`ticdc_sync.spark.as_of`: `as_of`, `register_views`) through a
Spark Connect client: tests/spark/test_as_of.py's views and refusals, over the server."""

from __future__ import annotations

import pytest

from tests.spark import test_as_of as reader

pytestmark = pytest.mark.connect


def test_latest_views_and_refusals_over_connect(remote, tmp_path):
    reader.test_latest_views_and_refusals(remote, tmp_path)
