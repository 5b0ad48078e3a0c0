"""Issue 30's acceptance: every record accepted exactly once across a share group whose members are killed
(SIGKILL, by pid) mid-batch and replaced. Members are share_member_proc.py processes (explicit mode, a
commit_sync per batch); a record counts as accepted by a member once its commit succeeded (`A` lines).

Checked: no record is accepted twice by the members; every record is accepted by one, except records a
killed member was committing when it died (between its `P` and `A` lines) or whose commit_sync raised,
which may have been applied and then never come again; and the broker's own account: every share partition finished (start offset at the
log end), exactly as many ACCEPTs applied as records produced, none archived or rejected.

Each member works DELAY_MS on a record, so the group's work (RECORDS x DELAY_MS / MEMBERS: 6 s, 60 s in
the soak tier) lasts about twice as long as the kills (KILLS x about 0.7 s: a pause of 0.3-0.9 s, then the
victim's next batch):
every kill finds the group with records left, its victim most likely mid-batch (checked: the group has not
finished at any kill; how many kills landed mid-batch is printed).

Seeded (the kill times and victims); the default run is short (about 15 s); KAFLITE_SOAK=1 runs the long
one (more records, partitions, members and kills, about 100 s)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from groups.test_share_wire import _alter_group
from helpers import stop_process
from kaflite.server.coordinators.share_state import SHARE_COORDINATOR
from kaflite.server.embedded import EmbeddedBroker

SOAK = os.environ.get("KAFLITE_SOAK") == "1"
RECORDS, PARTITIONS, MEMBERS, KILLS, DELAY_MS = (20_000, 6, 5, 40, 15) if SOAK else (3_000, 3, 3, 4, 6)
SEED = 30
MEMBER = Path(__file__).with_name("share_member_proc.py")
TP = tuple[int, int]


@dataclass
class Run:
    """One member process and what its output said."""

    proc: subprocess.Popen[bytes]
    out: Path
    accepted: list[TP] = field(default_factory=list)
    uncertain: set[TP] = field(default_factory=set)
    mid_batch: bool = False  # killed while working on a batch (after its `D` line, before its `P` line)

    def read(self, killed: bool) -> None:
        pending: set[TP] = set()
        kind = ""
        for line in self.out.read_text().split("\n")[:-1]:  # a partial last line (killed mid-write): none
            kind, _, rest = line.partition(" ")
            tps = {(int(p), int(o)) for p, o in (x.split(":") for x in rest.split())} if kind in "PA" else set()
            if kind == "P":
                pending = tps
            elif kind == "A":
                self.accepted += sorted(tps)
                pending -= tps
            elif kind == "F":
                pending = {tp for tp in pending if tp[0] != int(rest.split()[0])}
            elif kind == "X":  # commit_sync raised: applied or not, nobody knows
                self.uncertain |= pending
                pending = set()
        if killed:
            self.uncertain |= pending  # its commit may have been applied before the kill
            self.mid_batch = kind == "D"


def _spawn(b: EmbeddedBroker, topic: str, group: str, stop: Path, out: Path) -> Run:
    handle = out.open("wb")
    proc = subprocess.Popen([sys.executable, str(MEMBER), b.bootstrap, group, topic, str(stop), str(DELAY_MS)],
                            stdout=handle, stderr=subprocess.DEVNULL)
    handle.close()
    return Run(proc, out)


def _working(run: Run, timeout: float) -> None:
    """Wait (at most `timeout` s) until `run` is working on a batch (its last line is `D`), so that the kill
    that follows lands mid-batch: records delivered, some acknowledged, none committed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = run.out.read_text().split("\n")[:-1]
        if lines and lines[-1].startswith("D "):
            return
        time.sleep(0.005)


def _finished(b: EmbeddedBroker, group: str, topic: str) -> bool:
    """Every share partition's start offset is at its log end: each record accepted or archived."""
    broker = b.server.broker
    coord = broker.services.get(SHARE_COORDINATOR)
    if coord is None:
        return False
    for p in range(PARTITIONS):
        sp = coord.partitions.get((group, topic, p))
        end = broker.replica_manager.get_partition(topic, p).log.log_end_offset
        if sp is None or sp.start_offset < end:
            return False
    return True


def test_every_record_accepted_exactly_once_with_members_killed_mid_batch(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    overrides = {"group.share.record.lock.duration.ms": "2000", "group.share.session.timeout.ms": "3000",
                 "group.share.heartbeat.interval.ms": "500", "group.share.delivery.count.limit": "10"}
    topic, group = "soak", "soak-g"
    stop = tmp_path / "stop"
    runs: list[Run] = []
    with EmbeddedBroker(overrides=overrides) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})  # kept: its futures die with it
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(10)
        _alter_group(b, group, share_auto_offset_reset="earliest")
        producer = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
        for i in range(RECORDS):  # record i goes to partition i % PARTITIONS, at offset i // PARTITIONS
            producer.produce(topic, b"r%d" % i, partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        del producer, admin  # no client left retrying once the broker stops
        live = [_spawn(b, topic, group, stop, tmp_path / f"m{i}.out") for i in range(MEMBERS)]
        try:
            deadline = time.monotonic() + (600 if SOAK else 60)
            kills = 0
            idle_kills = 0  # kills made once every record was done: the members outran the kills
            while time.monotonic() < deadline and (kills < KILLS or not b.call(_finished, b, group, topic)):
                time.sleep(rng.uniform(0.3, 0.9) if kills < KILLS else 0.2)
                if kills < KILLS:
                    idle_kills += b.call(_finished, b, group, topic)
                    victim = live.pop(rng.randrange(len(live)))
                    _working(victim, 2.0)
                    victim.proc.send_signal(signal.SIGKILL)
                    victim.proc.wait(10)
                    victim.read(killed=True)
                    runs.append(victim)
                    live.append(_spawn(b, topic, group, stop, tmp_path / f"m{MEMBERS + kills}.out"))
                    kills += 1
            assert b.call(_finished, b, group, topic), "the group did not finish every record in time"
            assert kills == KILLS
            assert idle_kills == 0, f"{idle_kills} of {KILLS} kills came after the last record: raise DELAY_MS"
        finally:
            stop.touch()
            for run in live:
                try:
                    run.proc.wait(30)
                except subprocess.TimeoutExpired:
                    pass
                stop_process(run.proc, signal.SIGKILL)
        for run in live:
            run.read(killed=False)
            runs.append(run)
        counts = b.call(lambda: b.server.broker.services.get(SHARE_COORDINATOR).counts[group])
    produced = {(i % PARTITIONS, i // PARTITIONS) for i in range(RECORDS)}
    accepted = [tp for run in runs for tp in run.accepted]
    twice = sorted(tp for tp, n in Counter(accepted).items() if n > 1)
    assert not twice, f"accepted more than once: {twice[:20]}"
    uncertain = set().union(*(run.uncertain for run in runs))
    assert set(accepted) <= produced
    missing = produced - set(accepted)
    assert missing <= uncertain, f"never accepted: {sorted(missing - uncertain)[:20]}"
    assert (counts.accepted, counts.archived, counts.rejected) == (RECORDS, 0, 0)
    killed = [run for run in runs if run.proc.returncode == -signal.SIGKILL]
    print(f"{len(killed)} kills, {sum(r.mid_batch for r in killed)} mid-batch, "
          f"{sum(bool(r.uncertain) for r in runs)} mid-commit ({len(uncertain)} records uncertain, "
          f"{len(missing)} of them never committed by a member)")
