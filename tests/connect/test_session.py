"""A Spark Connect session as ticdc-sync opens one: the server checked, the run's settings
set (a server setting in the profile is an error naming it), ticdc_sync uploaded for the
server's Python workers."""

from __future__ import annotations

import pytest

from ticdc_sync.core.errors import UserError
from ticdc_sync.core.model import Output
from ticdc_sync.spark.runtime.session import build_session

pytestmark = pytest.mark.connect


def test_the_servers_python_workers_run_the_uploaded_package(remote):
    def where(batches):
        import pyarrow as pa

        import ticdc_sync

        for _ in batches:
            yield pa.RecordBatch.from_pydict({"f": [ticdc_sync.__file__]})

    (row,) = remote.range(1).mapInArrow(where, "f string").collect()
    # The artifact (a zip named by its content), not an installed ticdc_sync.
    assert ".zip/ticdc_sync/__init__.py" in row["f"], row["f"]
    assert remote.conf.get("spark.sql.session.timeZone") == "UTC"


def test_a_server_setting_in_the_profile_is_an_error_naming_it(connect_server):
    output = Output(
        "connect",
        spark_remote=connect_server.remote,
        spark_conf={"spark.sql.extensions": "x", "spark.sql.shuffle.partitions": "3"},
    )
    with pytest.raises(UserError) as e:
        build_session(output, kafka=False)
    text = str(e.value)
    assert f"the Spark Connect server {connect_server.remote} does not let a client set" in text
    assert "spark.sql.extensions" in text and "shuffle.partitions" not in text
