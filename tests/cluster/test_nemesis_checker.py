"""The nemesis's checker and relays without a cluster: each check on a history and a final log that
break it (so the nemesis test can fail), and the relay's delay, black-hole cut and heal on loopback."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from cluster.nemesis import checker
from cluster.nemesis.relay import RelayHub
from cluster.nemesis.workload import History
from kaflite.protocol.record_batch import build_record_batch


def _history(acked: dict[tuple[str, str], list[int]]) -> History:
    h = History()
    for tk, seqs in acked.items():
        h.acked[tk] = list(seqs)
    return h


def _log(topic: str, key: str, seqs: list[int], p: int = 0) -> dict[tuple[str, int], list[tuple[int, bytes, bytes]]]:
    return {(topic, p): [(o, key.encode(), f"{key}:{s}".encode()) for o, s in enumerate(seqs)]}


def test_data_check_accepts_a_clean_log_and_unacknowledged_extras() -> None:
    h = _history({("nm-isr2", "p0-k0"): [0, 1, 2]})
    assert checker.check_data(h, _log("nm-isr2", "p0-k0", [0, 1, 2, 3]), unclean=False) == ([], [])


def test_data_check_finds_loss_duplicates_and_disorder() -> None:
    h = _history({("nm-isr2", "p0-k0"): [0, 1, 2]})
    lost, _ = checker.check_data(h, _log("nm-isr2", "p0-k0", [0, 2]), unclean=False)
    assert lost and "1 acknowledged records missing" in lost[0]
    dup, _ = checker.check_data(h, _log("nm-isr2", "p0-k0", [0, 1, 1, 2]), unclean=False)
    assert dup and "more than once" in dup[0]
    disorder, _ = checker.check_data(h, _log("nm-isr2", "p0-k0", [0, 2, 1]), unclean=False)
    assert disorder and "out of order: 2 before 1" in disorder[0]


def test_unclean_losses_are_expected_only_on_the_min_insync_1_topic() -> None:
    h = _history({("nm-isr1", "p0-k0"): [0, 1], ("nm-isr2", "p0-k1"): [0, 1]})
    final = {**_log("nm-isr1", "p0-k0", [0]), **_log("nm-isr2", "p0-k1", [0], p=1)}
    violations, expected = checker.check_data(h, final, unclean=True)
    assert len(expected) == 1 and "nm-isr1" in expected[0]
    assert len(violations) == 1 and "nm-isr2" in violations[0]


def _txn_log(records: list[tuple[int, int, int]]) -> dict[tuple[str, int], list[tuple[int, bytes, bytes]]]:
    return {("nm-txn", 0): [(o, b"", f"t{n}:{i}/{size}".encode()) for o, (n, i, size) in enumerate(records)]}


def test_transaction_check() -> None:
    h = History()
    h.txns = {1: ("committed", 2), 2: ("aborted", 2), 3: ("unknown", 3)}
    assert checker.check_transactions(h, _txn_log([(1, 0, 2), (1, 1, 2), (3, 0, 3), (3, 1, 3), (3, 2, 3)])) == []
    assert checker.check_transactions(h, _txn_log([(1, 0, 2), (1, 1, 2)])) == []
    aborted = checker.check_transactions(h, _txn_log([(1, 0, 2), (1, 1, 2), (2, 0, 2)]))
    assert aborted and "(aborted) visible" in aborted[0]
    partial = checker.check_transactions(h, _txn_log([(1, 0, 2)]))
    assert partial and "(committed, 2 records)" in partial[0]
    torn = checker.check_transactions(h, _txn_log([(1, 0, 2), (1, 1, 2), (3, 1, 3)]))
    assert torn and "partly visible" in torn[0]


def test_offset_check() -> None:
    h = History()
    h.commits = [(1.0, "nm-isr2", 0, 10), (2.0, "nm-isr2", 0, 25), (2.0, "nm-txn", 1, 4)]
    assert checker.check_offsets(h, {("nm-isr2", 0): 25, ("nm-txn", 1): 9}) == []
    behind = checker.check_offsets(h, {("nm-isr2", 0): 10, ("nm-txn", 1): 4})
    assert behind == ["group offset of nm-isr2-0 is 10, behind a commit of 25 that succeeded"]


def _segment(d: Path, values: list[bytes], epochs: list[int]) -> None:
    d.mkdir(parents=True)
    data = b"".join(
        bytes(build_record_batch([(None, v, [])], base_offset=i, timestamp_ms=1000, partition_leader_epoch=e))
        for i, (v, e) in enumerate(zip(values, epochs, strict=True))
    )
    (d / f"{0:020d}.log").write_bytes(data)


def test_replica_check(tmp_path: Path) -> None:
    for b in (1, 2, 3):
        _segment(tmp_path / f"broker-{b}" / "nm-isr2-0", [b"a", b"b", b"c"], [0, 0, 1])
    assert checker.check_replicas(tmp_path, (1, 2, 3), {("nm-isr2", 0): 3}) == []
    # a replica whose offset 1 holds another record (what a lost truncation leaves)
    _segment(tmp_path / "broker-4" / "nm-isr2-0", [b"a", b"x", b"c"], [0, 0, 1])
    diff = checker.check_replicas(tmp_path, (1, 4), {("nm-isr2", 0): 3})
    assert diff == ["nm-isr2-0: batch at offset 1 differs between brokers 1 and 4"]
    # beyond the HW the replicas may differ; a replica short of it may not
    assert checker.check_replicas(tmp_path, (1, 4), {("nm-isr2", 0): 1}) == []
    _segment(tmp_path / "broker-5" / "nm-isr2-0", [b"a"], [0])
    short = checker.check_replicas(tmp_path, (1, 5), {("nm-isr2", 0): 3})
    assert any("broker 5's log ends at 1, below the high watermark 3" in x for x in short)


def _echo_server() -> tuple[socket.socket, int]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=lambda c=conn: _echo(c), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return srv, int(srv.getsockname()[1])


def _echo(conn: socket.socket) -> None:
    with conn:
        while data := conn.recv(4096):
            conn.sendall(data)


def _round_trip(port: int, payload: bytes = b"ping", timeout: float = 2.0) -> float | None:
    with socket.create_connection(("127.0.0.1", port), 2) as s:
        s.settimeout(timeout)
        t0 = time.monotonic()
        s.sendall(payload)
        try:
            got = s.recv(4096)
        except TimeoutError:
            return None
        return time.monotonic() - t0 if got == payload else None


def test_relay_delays_cuts_and_heals() -> None:
    srv, port = _echo_server()
    hub = RelayHub()
    try:
        relay = hub.add("echo", "127.0.0.1", ("127.0.0.1", port))
        fast = _round_trip(relay.port)
        assert fast is not None and fast < 0.1
        hub.set_delay(relay, None, 0.1)  # both directions: a round trip gains 200 ms
        slow = _round_trip(relay.port)
        assert slow is not None and 0.19 <= slow < 0.6
        hub.set_delay(relay, None, 0.0)
        with socket.create_connection(("127.0.0.1", relay.port), 2) as lived:
            lived.settimeout(2)
            hub.set_cut(relay, True)
            assert _round_trip(relay.port, timeout=0.5) is None  # accepted, starved
            lived.sendall(b"lost")
            time.sleep(0.2)
            hub.set_cut(relay, False)
            # the connection that lived through the cut is aborted, a new one relays again
            try:
                assert lived.recv(4096) == b""
            except ConnectionResetError:
                pass
        assert _round_trip(relay.port) is not None
    finally:
        hub.close()
        srv.close()


def test_coordinator_partitions_are_the_brokers() -> None:
    """coordinator-bounce targets the partitions the brokers map the workload's group and transactional id
    to (Kafka's abs(String.hashCode) % partitions), whatever the ids."""
    from cluster.nemesis.run import COORDINATOR_PARTITIONS, _java_partition
    from cluster.nemesis.workload import GROUP
    from kaflite.coordinator.offsets_topic import partition_for as group_partition
    from kaflite.coordinator.transaction.txn_log import partition_for as txn_partition

    assert COORDINATOR_PARTITIONS == (("__consumer_offsets", group_partition(GROUP, 3)),
                                      ("__transaction_state", txn_partition("nm-tx", 3)))
    for key in ("", "a", "nm-group", "ß-ü", "x" * 40):
        for n in (1, 3, 50):
            assert _java_partition(key, n) == group_partition(key, n) == txn_partition(key, n)


def test_longest_gap_counts_only_the_window() -> None:
    from cluster.nemesis.run import _longest_gap

    acks = [0.0, 1.0, 1.1, 5.0, 5.1, 20.0]
    assert _longest_gap(acks, 1.0, 6.0) == 5.0 - 1.1  # the outage inside the window
    assert _longest_gap(acks, 5.5, 10.0) == 10.0 - 5.5  # still on at the window's end: cut there
    assert _longest_gap([], 2.0, 3.0) == 1.0


def test_each_violation_is_counted_under_its_check_in_the_run_summary() -> None:
    """summary.json (the table of runs is produced from it): every violation text the checker and the
    nemesis write is filed under its check, and an expected loss under unclean election is not one."""
    from cluster.nemesis.run import CHECKS, Report, classify
    from cluster.nemesis.table import row

    texts = {
        "lost": "('nm-isr2', 'p0-k1'): 3 acknowledged records missing, e.g. sequence numbers [4, 5, 6]",
        "duplicates": "('nm-isr2', 'p0-k1'): sequence numbers present more than once: [4]",
        "order": "('nm-isr2', 'p0-k1'): out of order: 5 before 4",
        "aborted_visible": "transaction 7 (aborted) visible to read_committed: records [0]",
        "partial_transactions": "transaction 7 (committed, 3 records) shows [0, 1] to read_committed",
        "offsets_back": "50.69s nm-isr2-0: committed offset read back as 992 after a commit of 1049 succeeded",
        "unhealed": "after healing: nm-isr1-2: ISR (1, 2) of (1, 2, 3)",
        "divergence": "nm-isr1-0: batch at offset 40 differs between brokers 1 and 2",
        "other": "producer fatal error: OUT_OF_ORDER_SEQUENCE_NUMBER",
    }
    assert set(texts) == set(CHECKS)
    for check, text in texts.items():
        assert classify(text) == check, text
    assert classify("group offset of nm-txn-0 is 203, behind a commit of 229 that succeeded") == "offsets_back"
    assert classify("transaction 9 (outcome unknown, 4 records) partly visible: [1]") == "partial_transactions"
    assert classify("transaction 9: a record visible twice ([0, 0])") == "duplicates"
    assert classify("partition nm-txn-1 could not be read to its end") == "unhealed"
    assert classify("nm-isr2-1: broker 3's log ends at 10, below the high watermark 12") == "divergence"

    r = Report(seed=5, seconds=30, mode="namespaces ab12")
    r.faults = [("kill-leader", 1.0, 5.0, "broker 1"), ("kill-leader", 6.0, 9.0, "broker 2"),
                ("unclean-election", 10.0, 30.0, "leader 3")]
    r.violations = [texts["order"], texts["divergence"]]
    r.expected_losses = ["('nm-isr1', 'p1-k0'): 20 acknowledged records missing, e.g. sequence numbers [1]",
                         "('nm-isr1', 'p1-k2'): 4 acknowledged records missing, e.g. sequence numbers [9]"]
    s = r.summary()
    assert s["faults"] == {"kill-leader": 2, "unclean-election": 1}
    assert s["violations"] == {**{c: 0 for c in CHECKS}, "order": 1, "divergence": 1}
    assert s["expected_loss_records"] == 24 and s["first_violation"] == texts["order"]
    line = row(s)
    assert "**order 1, divergence 1**" in line and "24 acknowledged nm-isr1 records lost" in line
    r.violations = []
    assert "| 0 violations;" in row(r.summary())
