from laglab.counters import acct_rules, parse_acct, read_net_dev

NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     100       2    0    0    0     0          0         0      100       2    0    0    0     0       0          0
  eth0: 1234567    890    0    0    0     0          0         0   7654321     321    0    0    0     0       0          0
"""

ACCT = """Chain LAGLAB_ACCT (1 references)
    pkts      bytes target     prot opt in     out     source               destination
     120   180000            all  --  *      *       0.0.0.0/0            172.20.0.3
       0        0            all  --  *      *       0.0.0.0/0            172.20.0.5
"""


def test_net_dev_eth0():
    assert read_net_dev(NET_DEV) == {"rx_bytes": 1234567, "rx_packets": 890, "tx_bytes": 7654321, "tx_packets": 321}
    assert read_net_dev(NET_DEV, "eth1") is None


def test_accounting_chain_counts_per_destination():
    assert parse_acct(ACCT) == {"172.20.0.3": (120, 180000), "172.20.0.5": (0, 0)}


def test_accounting_rules_are_counting_only():
    assert acct_rules(["172.20.0.5", "172.20.0.3"]) == (
        "*filter\n:LAGLAB_ACCT - [0:0]\n-A LAGLAB_ACCT -d 172.20.0.3/32\n-A LAGLAB_ACCT -d 172.20.0.5/32\nCOMMIT\n"
    )
