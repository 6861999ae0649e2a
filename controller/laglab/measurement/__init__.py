"""What the lab measures: replication lag (lag.py, cluster_lag.py), link counters (counters.py, pod_counters.py), packet captures, the host's load, and the results folders the series go into."""
