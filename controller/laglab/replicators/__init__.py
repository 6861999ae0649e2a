"""Replicators other than native replication: the configuration and job payloads they are driven by.
Pure functions (rendering only), unit-tested against the products' documented formats."""
