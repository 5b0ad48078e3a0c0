"""Issue 24's nemesis test for kaflite (Jepsen-style): ZooKeeper and three broker processes, each broker
in its own network namespace, a workload of idempotent, transactional and consumer-group clients, faults
on a seeded schedule, and a checker after healing. See docs/replication.md, section "Nemesis".

net.py (namespaces, veth, bridge), relay.py (userspace TCP relays: delay, ZooKeeper-only cuts),
harness.py (the cluster and its faults), workload.py (the clients and their history), checker.py (the
checks), run.py (one seeded run and its report). test_nemesis.py runs it.
"""
