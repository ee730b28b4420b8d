"""The driver JVM's time zone (`session.time_zone_options`): UTC by default, after a
profile's own driver options, and left out when an operator sets `user.timezone`."""

from __future__ import annotations

from ticdc_sync.spark.runtime.session import DRIVER_TIME_ZONE, time_zone_options

KEY = "spark.driver.extraJavaOptions"


def test_the_driver_runs_in_utc_by_default():
    assert time_zone_options({}, "") == {KEY: DRIVER_TIME_ZONE}
    assert time_zone_options({KEY: "-Xss4m"}, "-Xmx2g") == {KEY: f"-Xss4m {DRIVER_TIME_ZONE}"}


def test_a_zone_an_operator_gives_wins():
    assert time_zone_options({KEY: "-Duser.timezone=Asia/Tokyo"}, "") == {}
    assert time_zone_options({}, "-Duser.timezone=Asia/Tokyo") == {}
