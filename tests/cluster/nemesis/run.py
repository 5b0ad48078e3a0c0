"""One seeded nemesis run: start the cluster, create the topics, start the clients, inject faults on the
seeded schedule for `seconds`, heal everything, check, and report (`Report.text()` prints the seed, the
fault timeline, the longest unavailability per fault kind and the first violation).

Rules:
- the schedule is a function of the seed alone: fault kinds are drawn in seeded shuffles of the enabled
  kinds (every kind once before any twice), and each fault's durations and roles from the same generator;
  which broker a role names (a partition's leader, the controller) is read from ZooKeeper when the fault
  starts, so timings and victims may differ between two runs of one seed, the schedule does not;
- the first round runs every enabled kind once whatever `seconds` says (a short run covers them all);
- one fault at a time: after each one the nemesis waits (bounded) until every broker is registered and
  every partition led with its ISR full before the next, so RF 3 / min.insync 2 promises no loss;
- every wait is bounded; the run ends with every fault healed, whatever happened, before the checker runs.
"""

from __future__ import annotations

import json
import random
import re
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from . import checker
from .harness import BROKERS, Cluster
from .workload import (
    DATA_TOPICS,
    GROUP,
    PARTITIONS,
    TXN_TOPIC,
    Clients,
    History,
    committed_offsets,
    read_offsets_behind,
)


def _java_partition(key: str, partitions: int = PARTITIONS) -> int:
    h = 0
    for ch in key:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % partitions

NET_KINDS = ("isolate-leader", "isolate-controller", "coordinator-bounce")
KINDS = ("kill-leader", "kill-any", "sigstop-leader", *NET_KINDS, "zk-cut-leader", "zk-kill", "delay",
         "kill-leader-on-rejoin")
# where the workload's coordinators live: Kafka's abs(String.hashCode) % partitions of the internal topics
COORDINATOR_PARTITIONS = (("__consumer_offsets", _java_partition(GROUP)), ("__transaction_state", _java_partition("nm-tx")))
RECOVERY_S = 45.0


@dataclass
class Report:
    seed: int
    seconds: float
    mode: str = ""
    faults: list[tuple[str, float, float, str]] = field(default_factory=list)  # kind, start, end, victim
    events: list[tuple[float, str]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    expected_losses: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unavailability: dict[str, float] = field(default_factory=dict)  # kind -> longest, s
    acked: int = 0
    sent: int = 0
    failed: int = 0
    txns: dict[str, int] = field(default_factory=dict)
    commits: int = 0
    txn_errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    def text(self) -> str:
        lines = [f"nemesis seed={self.seed} seconds={self.seconds:g} ({self.mode}), wall {self.wall_s:.0f} s",
                 f"records: {self.sent} sent, {self.acked} acknowledged, {self.failed} failed; transactions "
                 f"{self.txns}; {self.commits} group commits succeeded"]
        lines.append("timeline:")
        lines += [f"  {t:7.2f}s {text}" for t, text in self.events]
        lines.append("longest unavailability (longest gap between acknowledgements of one partition) per kind:")
        lines += [f"  {k}: {v:.1f} s" for k, v in sorted(self.unavailability.items())]
        lines += [f"note: {n}" for n in self.notes]
        if self.txn_errors:
            lines.append(f"transactional producer errors ({len(self.txn_errors)}, first 8):")
            lines += [f"  {e}" for e in self.txn_errors[:8]]
        lines += [f"expected loss (unclean election): {x}" for x in self.expected_losses]
        if self.violations:
            lines.append(f"FIRST VIOLATION: {self.violations[0]}")
            lines += [f"  also: {v}" for v in self.violations[1:10]]
        else:
            lines.append("no violation")
        return "\n".join(lines)

    def summary(self) -> dict[str, object]:
        """The run's figures as data (written as summary.json in the run's directory and printed as one
        `NEMESIS-SUMMARY {...}` line), so a table of runs is produced from the runs, not retyped."""
        faults: dict[str, int] = {}
        for kind, *_ in self.faults:
            faults[kind] = faults.get(kind, 0) + 1
        checks = {name: 0 for name in CHECKS}
        for v in self.violations:
            checks[classify(v)] += 1
        lost_expected = sum(int(m.group(1)) for x in self.expected_losses
                            if (m := re.search(r"(\d+) acknowledged records missing", x)))
        return {"seed": self.seed, "seconds": self.seconds, "mode": self.mode, "wall_s": round(self.wall_s, 1),
                "faults": faults, "faults_total": len(self.faults), "sent": self.sent, "acked": self.acked,
                "failed": self.failed, "txns": self.txns, "group_commits": self.commits,
                "unavailability_s": {k: round(v, 1) for k, v in sorted(self.unavailability.items())},
                "violations": checks, "violations_total": len(self.violations),
                "expected_loss_records": lost_expected, "expected_losses": self.expected_losses,
                "first_violation": self.violations[0] if self.violations else None, "notes": self.notes}


# the checker's verdicts, one count each in the summary; `classify` files a violation's text under one
CHECKS = ("lost", "duplicates", "order", "aborted_visible", "partial_transactions", "offsets_back", "unhealed",
          "divergence", "other")
_CLASSES = (
    ("lost", r"acknowledged records missing"),
    ("duplicates", r"present more than once|a record visible twice"),
    ("order", r"out of order|: records in partitions|: value .* under key"),
    ("aborted_visible", r"\(aborted\) visible to read_committed"),
    ("partial_transactions", r"\(committed, \d+ records\) shows|partly visible|transactions never begun"),
    ("offsets_back", r"committed offsets? (read back|could not be read)|behind a commit of"),
    ("unhealed", r"^after healing:|could not be read to its end|never whole"),
    ("divergence", r"replicas only on brokers|below the high watermark|differ(s)? between brokers"),
)


def classify(violation: str) -> str:
    """The check (one of CHECKS) a violation's text comes from; "other" for a producer's fatal error or a
    harness error."""
    for name, pattern in _CLASSES:
        if re.search(pattern, violation):
            return name
    return "other"


class Nemesis:
    def __init__(self, cluster: Cluster, rng: random.Random, report: Report, clients: Clients) -> None:
        self.clients = clients
        self.bounces = 0
        self.c = cluster
        self.rng = rng
        self.report = report

    def _leader(self, pick: float) -> int:
        leaders = self.c.leaders()
        if not leaders:
            return BROKERS[int(pick * len(BROKERS))]
        tps = sorted(leaders)
        return leaders[tps[int(pick * len(tps))]]

    def _sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def _wait_whole(self, what: str) -> None:
        if self.c.wait(what, lambda: not self.c.unhealthy(), RECOVERY_S):
            self.c.event("whole again: every broker registered, every partition led, every ISR full")
        else:
            self.report.notes.append(f"{what}: not whole within {RECOVERY_S:.0f} s: {self.c.unhealthy()[:4]}")
            self.c.event(f"not whole {RECOVERY_S:.0f} s after {what}: {self.c.unhealthy()[:4]}")

    def run_one(self, kind: str) -> str:
        """Inject one fault of `kind` and heal it; the victim's name."""
        c, rng = self.c, self.rng
        pick, hold = rng.random(), rng.uniform(1.0, 3.0)
        if kind in ("kill-leader", "kill-any"):
            b = self._leader(pick) if kind == "kill-leader" else BROKERS[int(pick * 3)]
            c.kill(b)
            self._sleep(hold)
            c.restart(b)
            return f"broker {b}"
        if kind == "sigstop-leader":
            b = self._leader(pick)
            c.pause(b)
            self._sleep(hold + 3.5)  # past the 3 s ZooKeeper session
            c.resume(b)
            return f"broker {b}"
        if kind.startswith("isolate-"):
            b = self._leader(pick) if kind == "isolate-leader" else (c.controller() or BROKERS[0])
            c.isolate(b)
            self._sleep(hold + 4.0)
            c.heal_isolation(b)
            return f"broker {b}"
        if kind == "coordinator-bounce":
            # the group's (or the transactional id's) coordinator moves away and comes back: its preferred
            # replica, isolated, loses the partition; the clients go on with the next leader; healed, it is
            # made leader again by a preferred election, and must serve what was written meanwhile
            # the group's first (its offsets are checked as it returns), the transactional id's next, in turn
            topic, part = COORDINATOR_PARTITIONS[self.bounces % len(COORDINATOR_PARTITIONS)]
            self.bounces += 1
            b = c.preferred_replica(topic, part) or BROKERS[0]
            s = c.states((topic,)).get((topic, part))
            if s is not None and s.leader != b:
                c.preferred_election(topic, part)
                c.wait("preferred leader", lambda: (x := c.states((topic,)).get((topic, part))) is not None
                       and x.leader == b, 20)
            c.event(f"broker {b} leads {topic}-{part}")
            c.isolate(b)
            self._sleep(hold + 4.0)
            c.heal_isolation(b)
            c.wait("back in the ISR", lambda: (x := c.states((topic,)).get((topic, part))) is not None
                   and b in x.isr, 30)
            self._sleep(2.0)  # a commit or two at the other coordinator
            # no commit while the coordinator returns: what it answers first must already hold them all
            self.clients.pause_commits.set()
            try:
                self._sleep(1.5)  # a commit in flight returns
                best = dict(self.clients.best)
                txn_errors = len(self.clients.history.txn_errors)
                c.preferred_election(topic, part)
                if c.wait("preferred leader", lambda: (x := c.states((topic,)).get((topic, part))) is not None
                          and x.leader == b, 20):
                    c.event(f"broker {b} leads {topic}-{part} again")
                self._sleep(2.0)
                if topic == "__consumer_offsets" and best:
                    behind = read_offsets_behind(c.bootstrap(), best, c.now)
                    self.report.violations += behind
                    c.event(f"group offsets read back at the returning coordinator: "
                            f"{'; '.join(behind) if behind else 'none behind a successful commit'}")
            finally:
                self.clients.pause_commits.clear()
            if topic == "__transaction_state":
                self._sleep(3.0)
                c.event(f"transactional producer errors since the return: "
                        f"{len(self.clients.history.txn_errors) - txn_errors}")
            return f"broker {b}, coordinator of {topic}-{part}"
        if kind == "zk-cut-leader":
            b = self._leader(pick)
            c.cut_zk(b, True)
            self._sleep(hold + 4.0)
            c.cut_zk(b, False)
            return f"broker {b}"
        if kind == "zk-kill":
            c.kill_zookeeper()
            self._sleep(hold + 1.0)
            c.restart_zookeeper()
            return "zookeeper"
        if kind == "delay":
            b = BROKERS[int(pick * 3)]
            c.delay(b, rng.uniform(0.05, 0.2))
            self._sleep(hold + 4.0)
            c.delay(b, 0.0)
            return f"broker {b}"
        if kind == "kill-leader-on-rejoin":
            leaders = c.leaders()
            tps = sorted(leaders)
            tp = tps[int(pick * len(tps))] if tps else ("nm-isr2", 0)
            leader = leaders.get(tp, BROKERS[0])
            follower = [b for b in BROKERS if b != leader][int(rng.random() * 2)]
            c.kill(follower)
            self._sleep(hold)
            c.restart(follower)

            def rejoined() -> bool:
                s = c.states((tp[0],)).get(tp)
                return s is not None and follower in s.isr

            if c.wait("rejoin", rejoined, 30):
                c.event(f"broker {follower} back in the ISR of {tp[0]}-{tp[1]}")
            c.kill(leader)  # the moment it rejoined
            self._sleep(rng.uniform(0.5, 2.0))
            c.restart(leader)
            return f"follower {follower}, then leader {leader} of {tp[0]}-{tp[1]}"
        if kind == "unclean-election":
            # an nm-isr1 partition (min.insync 1, unclean election on): its followers die, its leader goes on
            # acknowledging alone, then dies too, and a follower comes back first: it must lead, uncleanly
            leaders = {tp: b for tp, b in c.leaders().items() if tp[0] == "nm-isr1"}
            tp = sorted(leaders)[int(pick * len(leaders))] if leaders else ("nm-isr1", 0)
            leader = leaders.get(tp, BROKERS[0])
            first, second = [b for b in BROKERS if b != leader]
            c.kill(first)
            c.kill(second)
            self._sleep(hold + 5.0)  # past replica.lag.time.max.ms: the ISR shrinks to the leader alone
            c.kill(leader)
            c.restart(first)

            def led_by_first() -> bool:
                s = c.states((tp[0],)).get(tp)
                return s is not None and s.leader == first

            if c.wait("unclean leader", led_by_first, 30):
                c.event(f"broker {first} leads {tp[0]}-{tp[1]} (unclean election)")
            else:
                self.report.notes.append(f"unclean election: broker {first} did not lead {tp[0]}-{tp[1]} in 30 s")
            c.restart(second)
            c.restart(leader)
            return f"leader {leader} of {tp[0]}-{tp[1]}, followers {first} (back first), {second}"
        raise ValueError(kind)


def _longest_gap(times: list[float], start: float, end: float) -> float:
    # an outage still on at the window's end is the next fault's to count, not this one's
    points = [start, *(t for t in times if start <= t <= end), end]
    return max(b - a for a, b in zip(points, points[1:], strict=False))


def run(directory: Path, seed: int, seconds: float, unclean: bool = False, use_namespaces: bool = True,
        log: Callable[[str], None] = print) -> Report:
    report = Report(seed=seed, seconds=seconds)
    started = time.monotonic()
    rng = random.Random(seed)
    cluster = Cluster(directory, unclean=unclean, use_namespaces=use_namespaces)
    history = History()
    clients: Clients | None = None
    try:
        cluster.start()
        report.mode = f"namespaces {cluster.net.tag}" if cluster.net else f"loopback: {cluster.loopback_reason}"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap(), "log_level": 4})
        # unclean election, when enabled, only on the min.insync 1 topic (a topic override, as in Kafka)
        new = [NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": str(isr), **(
            {"unclean.leader.election.enable": "true"} if unclean and isr == 1 else {})})
            for t, isr in DATA_TOPICS.items()]
        new.append(NewTopic(TXN_TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"}))
        for _t, fut in admin.create_topics(new).items():
            fut.result(30)
        if not cluster.wait("topics whole", lambda: not cluster.unhealthy(), 60):
            report.violations.append(f"cluster never whole after creating topics: {cluster.unhealthy()[:5]}")
            return report
        clients = Clients(cluster.bootstrap(), history, seed, clock=cluster.now)
        clients.start()
        time.sleep(3.0)
        nemesis = Nemesis(cluster, rng, report, clients)
        kinds = [k for k in KINDS if cluster.net or k not in NET_KINDS] + (["unclean-election"] if unclean else [])
        if cluster.net is None:
            report.notes.append(f"isolation faults not run (loopback: {cluster.loopback_reason})")
        bag: list[str] = []
        fault_start = time.monotonic()
        for i in range(200):  # bounded in count as well as time; the first round runs every kind once
            if time.monotonic() - fault_start >= seconds and i >= len(kinds):
                break
            if not bag:
                bag = list(kinds)
                rng.shuffle(bag)
            kind = bag.pop(0)
            t0 = cluster.now()
            cluster.event(f"-- fault {kind}")
            victim = nemesis.run_one(kind)
            nemesis._wait_whole(f"{kind} ({victim})")
            report.faults.append((kind, t0, cluster.now(), victim))
            time.sleep(rng.uniform(0.5, 1.5))
        cluster.event("-- faults over, every fault healed")
        time.sleep(2.0)
        stuck = clients.finish()
        if stuck:
            report.notes.append(f"client threads still running after 100 s: {stuck}")
        if clients.unflushed:
            report.notes.append(f"{clients.unflushed} records unacknowledged when the producers closed")
        cluster.event(f"clients stopped; checking ({history.sent} sent, {sum(map(len, history.acked.values()))} acked)")
        # every partition led, ISR full
        if not cluster.wait("whole at the end", lambda: not cluster.unhealthy(), 60):
            report.violations += [f"after healing: {x}" for x in cluster.unhealthy()]
        bootstrap = cluster.bootstrap()
        data, unread = checker.read_all(bootstrap, sorted(DATA_TOPICS), "read_uncommitted")
        txn, unread_txn = checker.read_all(bootstrap, [TXN_TOPIC], "read_committed")
        report.violations += [f"partition {x} could not be read to its end" for x in unread + unread_txn]
        v, report.expected_losses = checker.check_data(history, data, unclean)
        report.violations += v
        # after an unclean election the new leader lacks the producer's sequence state: Kafka's producers
        # fail there too (OUT_OF_ORDER_SEQUENCE_NUMBER), so only a run without it counts them as violations
        fatal = [f"producer fatal error: {x}" for x in history.fatal]
        if unclean:
            report.notes += fatal
        else:
            report.violations += fatal
        report.violations += checker.check_transactions(history, txn)
        report.violations += history.offset_regressions
        report.violations += checker.check_offsets(history, committed_offsets(bootstrap))
        hws = checker.high_watermarks(bootstrap, [*sorted(DATA_TOPICS), TXN_TOPIC])
        empty = [f"{t}-{p}" for (t, p), hw in hws.items() if hw == 0]
        if empty:
            report.notes.append(f"partitions without records: {empty}")
        left = cluster.close()
        cluster.event("brokers stopped; comparing the replicas' segment files")
        report.notes += [f"not removed: {x}" for x in left]
        report.violations += checker.check_replicas(directory, BROKERS, hws)
    except Exception:
        report.violations.append(f"harness error: {traceback.format_exc()}")
        if clients is not None:
            clients.finish(30)
    finally:
        left = cluster.close()  # idempotent: a second close finds nothing
        report.notes += [f"not removed: {x}" for x in left]
        report.events = cluster.events
        report.wall_s = time.monotonic() - started
        report.sent, report.failed = history.sent, history.failed
        report.acked = sum(map(len, history.acked.values()))
        report.commits = len(history.commits)
        report.txn_errors = history.txn_errors
        for outcome, _size in history.txns.values():
            report.txns[outcome] = report.txns.get(outcome, 0) + 1
        ends = [start for _k, start, _e, _v in report.faults[1:]] + [f[2] for f in report.faults[-1:]]
        for (kind, start, end, _v), nxt in zip(report.faults, ends, strict=True):
            gap = max((_longest_gap(sorted(ts), cluster.t0 + start, cluster.t0 + max(end, nxt))
                       for ts in history.ack_times.values()), default=0.0)
            report.unavailability[kind] = max(report.unavailability.get(kind, 0.0), gap)
        log(report.text())
        summary = json.dumps(report.summary(), sort_keys=True)
        (directory / "summary.json").write_text(summary + "\n")
        log(f"NEMESIS-SUMMARY {summary}")
    return report
