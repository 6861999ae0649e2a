"""Load: sysbench and mysqlslap in loadgen (generator.py), a write profile read from a customer's binlog (binlog_profile.py) and its replay (replay.py, replay.lua)."""
