"""An error of Spark's reaches the user with its cause: after `error: target ...:` the Java
exception's class and the first line of its message (not py4j's "An error occurred while
calling o2150.filter."), and its whole trace in the log file (on stderr too with
`--debug`)."""

from __future__ import annotations

import io

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException

from tests.spark.engine_harness import canal_row, load, make_project, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.core.console import Console
from ticdc_sync.plan.model import Rows
from ticdc_sync.spark import runner
from ticdc_sync.spark.apply import executor
from ticdc_sync.spark.runtime import raised

pytestmark = pytest.mark.spark

SCHEMA = "CREATE TABLE shop.e (id INT PRIMARY KEY, v VARCHAR(10));\n"
MT = {"id": "int", "v": "varchar"}


def test_a_java_error_is_said_by_its_class_and_first_message_line(spark):
    # As PySpark converts it (a CapturedException over the Java one).
    with pytest.raises(Exception) as caught:  # noqa: PT011 - PySpark picks the class
        spark._jvm.java.lang.Long.parseLong("x")
    failure = raised.spark_failure(caught.value)
    assert failure is not None
    assert str(failure) == 'java.lang.NumberFormatException: For input string: "x"'
    assert "java.lang.Long.parseLong" in failure.trace  # the Java frames, in the trace
    # As py4j raises what PySpark does not convert: its first line names only the call.
    raw = Py4JJavaError(
        "An error occurred while calling o2150.filter.\n",
        spark._jvm.java.lang.IllegalArgumentException("bad\nsecond line"),
    )
    assert str(raised.spark_failure(raw)) == "java.lang.IllegalArgumentException: bad"

    # A StackOverflowError has no message: its class says it.
    overflow = Py4JJavaError(
        "An error occurred while calling o2150.filter.\n", spark._jvm.java.lang.StackOverflowError()
    )
    assert str(raised.spark_failure(overflow)) == "java.lang.StackOverflowError"
    # A wrapper whose message is its cause's text: the cause is followed.
    wrapped = spark._jvm.java.lang.RuntimeException(
        spark._jvm.java.lang.IllegalStateException("the real reason")
    )
    assert str(raised.spark_failure(Py4JJavaError("x", wrapped))) == (
        "java.lang.RuntimeException: java.lang.IllegalStateException: the real reason; "
        "caused by java.lang.IllegalStateException: the real reason"
    )

    with pytest.raises(AnalysisException) as analysis:
        spark.sql("SELECT no_such_column").collect()
    said = str(raised.spark_failure(analysis.value))
    assert "AnalysisException" in said.split(":")[0] and "no_such_column" in said, said
    assert "\n" not in said
    assert raised.spark_failure(ValueError("not Spark's")) is None


@pytest.mark.parametrize("debug", [False, True], ids=["log", "debug"])
def test_a_targets_spark_error_names_its_cause_and_logs_its_trace(
    spark, tmp_path, monkeypatch, debug
):
    # Every segment MERGEd (a round would land it without `StepRunner._run`).
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        schema_sql=SCHEMA,
        defaults="defaults:\n  rewrite_below: 0\n",
    )
    row = canal_row("shop", "e", "INSERT", 100, {"id": "1", "v": "a"}, MT, ["id"])
    write_captures(root, "t", [(0, 0, None, row), (0, 1, None, wm(200))])
    run_step = executor.StepRunner._run

    def failing(self, step):
        if isinstance(step, Rows):  # a JVM error where the rows would be read
            self.writer.spark._jvm.java.lang.Long.parseLong("not a number")
        run_step(self, step)

    monkeypatch.setattr(executor.StepRunner, "_run", failing)
    out, err = io.StringIO(), io.StringIO()
    console = Console(stdout=out, stderr=err, progress="off", debug=debug)
    console.open_log(tmp_path / "run.log", "test")
    code = runner.run(load(root), spark=spark, console=console)
    console.close()
    assert code == 1
    errors = [x for x in err.getvalue().splitlines() if x.startswith("error:")]
    assert errors == [
        'error: target e: java.lang.NumberFormatException: For input string: "not a number"'
    ], err.getvalue()
    log = (tmp_path / "run.log").read_text()
    assert "trace of the error of e:" in log and "java.lang.Long.parseLong" in log
    assert ("java.lang.Long.parseLong" in err.getvalue()) == debug
