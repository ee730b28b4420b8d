"""The driver's JIT options (`session.jit_options`): added by default, after a profile's own
driver options, and left out when an operator sets a JIT option of their own, in the
profile or in SPARK_SUBMIT_OPTS."""

from __future__ import annotations

from ticdc_sync.spark.runtime.session import DRIVER_JIT_OPTIONS, jit_options

KEY = "spark.driver.extraJavaOptions"


def test_the_driver_compiles_later_by_default():
    assert jit_options({}, "") == {KEY: DRIVER_JIT_OPTIONS}
    assert jit_options({"spark.sql.shuffle.partitions": "4"}, "-Xmx2g") == {KEY: DRIVER_JIT_OPTIONS}


def test_a_profiles_own_driver_options_are_kept_before_it():
    conf = {KEY: "-Dlog4j2.level=warn -Xss4m"}
    assert jit_options(conf, "") == {KEY: f"-Dlog4j2.level=warn -Xss4m {DRIVER_JIT_OPTIONS}"}


def test_jit_options_of_an_operator_win():
    for theirs in (
        "-XX:TieredStopAtLevel=1",
        "-XX:CompileThresholdScaling=1",
        "-XX:-TieredCompilation",
        "-Xint",
    ):
        assert jit_options({KEY: f"-Xss4m {theirs}"}, "") == {}, theirs
        assert jit_options({}, f"-XX:+UseSerialGC {theirs}") == {}, theirs
