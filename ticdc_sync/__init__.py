"""ticdc-sync: mirror TiDB tables into Delta Lake from TiCDC Kafka topics."""

__version__ = "0.1.0"
