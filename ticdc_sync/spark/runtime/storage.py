"""Object storage for the warehouse: what a Spark session needs to keep Delta tables on S3.

A warehouse `s3a://bucket/path` (or `s3://`, served by the same S3A connector) needs
Hadoop's S3A connector jar, `org.apache.hadoop:hadoop-aws`, of exactly the Hadoop version
Spark is built with (its pom brings the AWS SDK v2 `bundle` jar it was built against), and
a few Hadoop settings. Those settings come from the standard AWS environment variables,
read when the session is built:

    AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL   a non-AWS endpoint (S3Proxy, MinIO, Ceph, R2)
    AWS_REGION / AWS_DEFAULT_REGION          the signing region
    AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN)   the credentials
    AWS_ALLOW_HTTP=true                      allow a plain-http endpoint (as delta-rs asks)
    AWS_VIRTUAL_HOSTED_STYLE_REQUEST=true    bucket-in-host-name addressing at such an endpoint

Secrets never enter the Spark conf this module returns (Spark itself copies the two keys
from the environment into the Hadoop conf, where its UI and event log redact them). The
profile's `spark.conf` is applied after these settings, so any of them can be overridden
there. Delta's LogStore is left at its default for S3, S3SingleDriverLogStore: its commits
are safe against writers in the same Spark driver only (two drivers can both write commit
N, and the last upload wins), so runs on other machines must be kept apart by other means.
This module must not contain sync logic and does no I/O beyond reading the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from ticdc_sync.core.errors import UserError
from ticdc_sync.core.model import Output

# The Hadoop that pyspark 4.2.0 ships (its jars/hadoop-client-api-3.5.0.jar); a unit test
# checks this against the installed pyspark. hadoop-aws must match it exactly: S3A calls
# Hadoop internals that change between releases.
SPARK_HADOOP_VERSION = "3.5.0"
HADOOP_AWS_PACKAGE = f"org.apache.hadoop:hadoop-aws:{SPARK_HADOOP_VERSION}"
S3_SCHEMES = ("s3a", "s3")
S3A_FS = "org.apache.hadoop.fs.s3a.S3AFileSystem"
# Hadoop's default S3A credential chain without its last link, the EC2/ECS instance
# metadata lookup: keys from the Hadoop conf (where Spark copies the environment's keys, and
# from which executors on other machines get them) and from the environment. Used only when
# the environment has keys, so nothing reaches for an instance role or a credentials file.
ENV_CREDENTIALS_CHAIN = ",".join(
    [
        "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider",
        "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider",
    ]
)
# A custom endpoint ignores the region, but requests must still be signed for one; without
# it the AWS SDK would go looking for one (profile files, instance metadata).
FALLBACK_REGION = "us-east-1"


def s3_scheme(location: str) -> str | None:
    """`s3a` or `s3` when `location` is on S3, else None (local paths, file:, hdfs:, abfss:)."""
    if "://" not in location:
        return None
    scheme = urlsplit(location).scheme.lower()
    return scheme if scheme in S3_SCHEMES else None


def packages(output: Output | None) -> list[str]:
    """Maven coordinates the warehouse's storage needs (Spark resolves their dependencies)."""
    return [HADOOP_AWS_PACKAGE] if output is not None and s3_scheme(output.warehouse) else []


def check_jar_folder(output: Output | None, jars: Sequence[str]) -> None:
    """A jar folder (air-gapped runs) must hold the S3A connector for an S3 warehouse."""
    if output is None or not s3_scheme(output.warehouse):
        return
    names = [Path(j).name for j in jars]
    want = f"hadoop-aws-{SPARK_HADOOP_VERSION}.jar"
    missing = [want] if not any(n.endswith(want) for n in names) else []
    if not any("bundle-2." in n for n in names):
        missing.append("the AWS SDK v2 bundle-2.*.jar")
    if missing:
        folder = Path(jars[0]).parent if jars else "the jar folder"
        raise UserError(
            f"warehouse {output.warehouse} is on S3 but {folder} lacks {' and '.join(missing)} "
            f"(hint: fill it with `python -m ticdc_sync.spark --fetch {folder} --s3` "
            "on a connected machine)"
        )


def _flag(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() in ("1", "true", "yes")


def s3a_conf(warehouse: str, env: Mapping[str, str]) -> dict[str, str]:
    """The `spark.hadoop.fs.s3a.*` settings for an S3 `warehouse`, from `env`."""
    scheme = s3_scheme(warehouse)
    if scheme is None:
        return {}
    h = "spark.hadoop."
    conf: dict[str, str] = {}
    if scheme == "s3":
        # Hadoop has no `s3://` file system of its own (EMR's EMRFS is not here): serve it by
        # S3A, for FileSystem and FileContext users alike. Delta picks its S3 LogStore for
        # both schemes.
        conf[h + "fs.s3.impl"] = S3A_FS
        conf[h + "fs.AbstractFileSystem.s3.impl"] = "org.apache.hadoop.fs.s3a.S3A"
    endpoint = (env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or "").strip()
    region = (env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "").strip()
    if endpoint:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UserError(
                f"AWS_ENDPOINT_URL {endpoint!r} is not an http(s) URL "
                "(hint: write it as https://host[:port])"
            )
        if parts.scheme == "http" and not _flag(env, "AWS_ALLOW_HTTP"):
            raise UserError(
                f"the S3 endpoint {endpoint} is plain http, which sends data unencrypted "
                "(hint: use https, or set AWS_ALLOW_HTTP=true for a local or test server)"
            )
        conf[h + "fs.s3a.endpoint"] = endpoint
        conf[h + "fs.s3a.connection.ssl.enabled"] = str(parts.scheme == "https").lower()
        # S3-compatible servers address buckets by path unless told otherwise, as delta-rs
        # and the AWS CLI do with a custom endpoint.
        virtual = _flag(env, "AWS_VIRTUAL_HOSTED_STYLE_REQUEST")
        conf[h + "fs.s3a.path.style.access"] = str(not virtual).lower()
        region = region or FALLBACK_REGION
    if region:
        conf[h + "fs.s3a.endpoint.region"] = region
    key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    if bool(key) != bool(secret):
        missing = "AWS_SECRET_ACCESS_KEY" if key else "AWS_ACCESS_KEY_ID"
        raise UserError(
            f"the environment has only half of the S3 credentials: {missing} is not set "
            "(hint: set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither to use "
            "the machine's instance role)"
        )
    if key:
        conf[h + "fs.s3a.aws.credentials.provider"] = ENV_CREDENTIALS_CHAIN
    return conf


def spark_conf(output: Output | None, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The storage settings for `output`'s warehouse (empty unless it is on S3)."""
    if output is None:
        return {}
    env = os.environ if env is None else env
    conf = s3a_conf(output.warehouse, env)
    endpoint = conf.get("spark.hadoop.fs.s3a.endpoint")
    own_provider = "spark.hadoop.fs.s3a.aws.credentials.provider" in output.spark_conf
    if endpoint and not env.get("AWS_ACCESS_KEY_ID") and not own_provider:
        # Hadoop's default chain would end at the cloud's instance metadata service, which
        # no S3-compatible server's keys come from: say what is missing instead.
        raise UserError(
            f"the S3 endpoint {endpoint} needs credentials: AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY are not set (hint: export them, or name a credentials "
            "provider in the profile's spark.conf as spark.hadoop.fs.s3a.aws.credentials.provider)"
        )
    return conf


def describe(warehouse: str, env: Mapping[str, str] | None = None) -> str | None:
    """One line saying where an S3 warehouse is reached and how, without secrets."""
    conf = s3a_conf(warehouse, os.environ if env is None else env)
    if not s3_scheme(warehouse):
        return None
    endpoint = conf.get("spark.hadoop.fs.s3a.endpoint", "AWS S3")
    style = {"true": ", path-style", "false": ", virtual-hosted"}.get(
        conf.get("spark.hadoop.fs.s3a.path.style.access", ""), ""
    )
    creds = (
        "keys from the environment"
        if "spark.hadoop.fs.s3a.aws.credentials.provider" in conf
        else "Hadoop's default credential chain"
    )
    region = conf.get("spark.hadoop.fs.s3a.endpoint.region", "default region")
    return f"{warehouse} via {endpoint} ({region}{style}; {creds})"
