#!/usr/bin/env python3
"""Run librdkafka's own integration test suite (tests/test-runner) against a kaflite broker or cluster.

Given the tests/ directory of a built librdkafka release, this script:
  1. lists the suite's tests from tests/test.c (name, flags, scenario) and picks the ones to run;
  2. starts kaflite: one `kaflite serve --dev` broker (--brokers 1) or `kaflite cluster up --brokers N`
     (ZooKeeper + N brokers), in a temporary data directory, with the suite scenario's broker settings
     (auto.create.topics.enable, num.partitions=4, default.replication.factor=min(3, N));
  3. writes a test.conf with bootstrap.servers (into the output directory; RDKAFKA_TEST_CONF points at it,
     the librdkafka tree's own test.conf is not touched);
  4. runs every chosen test as its own `test-runner` process (TESTS=<number>), --parallel at a time, each
     killed after --timeout seconds, its output kept in <out>/logs/<number>.log;
  5. parses the runner's summary lines into a table (test, result, seconds, first failure line), written
     as results.json and results.md in <out> and printed;
  6. stops everything it started by pid (test-runner processes, the broker or `cluster up`, which stops
     its brokers and ZooKeeper) and removes the temporary data directory (unless --keep-data).

Not part of the pytest suite (a full run takes an hour or more); tests/tools/test_librdkafka_suite_parser.py
checks the result parser on a captured output sample.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# test.c's summary line: "| <name> | <STATE> | <secs>s | <failstr or skip reason>"
SUMMARY = re.compile(r"^\|\s*(?P<name>[0-9<][\w<>]*)\s*\|\s*(?P<state>[A-Z_ ]+?)\s*\|\s*(?P<secs>[\d.]+)s\s*\|"
                     r"\s?(?P<rest>.*)$")
# test.c's TEST_FAIL prints this header, then the failure message on the next line.
FAIL_HEADER = re.compile(r'### Test "(?P<test>[^"]*)" failed at (?P<where>\S+)')
# What test.c prints when one test of a process passed (before a later one may abort the process).
PASSED_LINE = re.compile(r"=+ Test (\S+) PASSED =+")
# A C assert() or the runner's own timeout, when no TEST_FAIL message was printed.
FAIL_OTHER = re.compile(r"(Assertion .* failed|timed out|TEST FAILURE)")


@dataclass
class SuiteTest:
    name: str            # e.g. 0001_multiobj
    flags: list[str]     # TEST_F_LOCAL, TEST_F_MANUAL, TEST_F_SOCKEM, TEST_F_KNOWN_ISSUE...
    scenario: str        # "default", "noautocreate", "default,ak23"
    minver: str = ""     # TEST_BRKVER(...) text, if any

    @property
    def number(self) -> str:
        return self.name.split("_", 1)[0]


@dataclass
class Result:
    test: str
    result: str          # PASSED, FAILED, SKIPPED, TIMEOUT, CRASHED, NOT_RUN
    seconds: float
    first_failure: str = ""
    log: str = ""


@dataclass
class RunOutput:
    results: list[Result] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------------------
# test.c listing


def _balanced_args(text: str, start: int) -> tuple[list[str], int]:
    """The comma-separated top-level arguments of the call whose '(' is at text[start]."""
    depth = 0
    args: list[str] = []
    cur: list[str] = []
    i = start
    while i < len(text):
        c = text[i]
        if c == "(":
            depth += 1
            if depth > 1:
                cur.append(c)
        elif c == ")":
            depth -= 1
            if depth == 0:
                args.append("".join(cur).strip())
                return args, i
            cur.append(c)
        elif c == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    raise ValueError("unbalanced _TEST(")


def list_tests(test_c: str) -> list[SuiteTest]:
    """The tests of test.c's `struct test tests[]` array, in order."""
    text = re.sub(r"/\*.*?\*/", "", test_c, flags=re.S)
    start = text.index("struct test tests[]")
    out: list[SuiteTest] = []
    for m in re.finditer(r"\b_TEST\(", text[start:]):
        args, _ = _balanced_args(text, start + m.end() - 1)
        name, flags = args[0], args[1] if len(args) > 1 else "0"
        scenario, minver = "default", ""
        for extra in args[2:]:
            sm = re.match(r'\.scenario\s*=\s*"([^"]*)"', extra)
            if sm:
                scenario = sm.group(1)
            elif extra.startswith("TEST_BRKVER"):
                minver = extra
        out.append(SuiteTest(name, re.findall(r"TEST_F_\w+", flags), scenario, minver))
    return out


def choose(tests: list[SuiteTest], selection: list[str] | None, include_local: bool,
           scenario: str) -> list[SuiteTest]:
    """What test-runner would run with `make` (no manual tests; the scenario's), minus the broker-less
    tests unless asked; with a selection (numbers or names), only those of it."""
    picked = []
    for t in tests:
        if selection is not None and t.number not in selection and t.name not in selection:
            continue
        if "TEST_F_MANUAL" in t.flags or not t.number.startswith("0"):
            continue
        if "TEST_F_LOCAL" in t.flags and not include_local:
            continue
        if scenario not in t.scenario.split(","):
            continue
        picked.append(t)
    return picked


# ---------------------------------------------------------------------------------------------------------
# output parsing


def parse_output(text: str) -> list[Result]:
    """The summary table test-runner prints at exit, one Result per test it ran or skipped (not <MAIN>).

    A FAILED test without a failstr gets the first failure-looking line of the output."""
    results: list[Result] = []
    first_fail = first_failure_line(text)
    for raw in text.splitlines():
        line = ANSI.sub("", raw).rstrip()
        m = SUMMARY.match(line)
        if not m or m.group("name") == "<MAIN>":
            continue
        state = m.group("state").strip()
        rest = m.group("rest").strip()
        results.append(Result(m.group("name"), state, float(m.group("secs")), rest))
    for r in results:
        if r.result == "FAILED" and not r.first_failure:
            r.first_failure = first_fail
    return results


def first_failure_line(text: str) -> str:
    """The first TEST_FAIL message ("<test> (<subtest>): <message>"), else the first assert/timeout line."""
    lines = [ANSI.sub("", raw).strip() for raw in text.splitlines()]
    for i, line in enumerate(lines):
        m = FAIL_HEADER.search(line)
        if m and i + 1 < len(lines):
            return f"{m.group('test')}: {lines[i + 1]}"
    for line in lines:
        if FAIL_OTHER.search(line) and not line.startswith("|"):
            return line
    return ""


def outcome(test: SuiteTest, text: str, rc: int | None, seconds: float) -> list[Result]:
    """Results of one test-runner process; TIMEOUT (rc None) or CRASHED when it printed no summary."""
    parsed = [r for r in parse_output(text) if r.test.startswith(test.number)]
    if rc is None:
        # Killed: the runner printed no summary; every test of this number is a TIMEOUT.
        return [Result(test.name, "TIMEOUT", seconds, first_failure_line(text) or f"killed after {seconds:.0f} s")]
    if not parsed:
        # No summary: the runner aborted, after a TEST_FAIL (its own per-test timeout ends this way: FAILED)
        # or without one (a crash). Tests of this number that finished before are read from their
        # "Test <name> PASSED" lines; the failure goes to the test its message names.
        passed = [Result(m.group(1), "PASSED", 0.0, "") for m in PASSED_LINE.finditer(ANSI.sub("", text))
                  if m.group(1).startswith(test.number)]
        fail = first_failure_line(text)
        if fail:
            named = fail.split(" ", 1)[0].rstrip(":")
            failed = named if named.startswith(test.number) else test.name
            return passed + [Result(failed, "FAILED", seconds, f"{fail} (runner aborted, exit code {rc})")]
        last = [ANSI.sub("", x).strip() for x in text.splitlines() if x.strip()]
        return [Result(test.name, "CRASHED", seconds, f"exit code {rc}: {last[-1] if last else ''}")]
    return parsed


# ---------------------------------------------------------------------------------------------------------
# kaflite


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"broker not listening on {port} after {timeout} s")


class Kaflite:
    """One broker (`serve --dev`) or `cluster up --brokers N`, stopped by its pid."""

    def __init__(self, brokers: int, data_dir: Path, overrides: list[str], python: str) -> None:
        self.brokers, self.data_dir, self.python = brokers, data_dir, python
        self.overrides = overrides
        self.proc: subprocess.Popen[bytes] | None = None
        self.bootstrap = ""
        self.log = data_dir / "kaflite.log"

    def start(self) -> str:
        ovr: list[str] = []
        for o in self.overrides:
            ovr += ["-o", o]
        logf = open(self.log, "wb")
        if self.brokers == 1:
            port = _free_port()
            cmd = [self.python, "-m", "kaflite", "serve", "--dev", "--port", str(port), "--host", "127.0.0.1",
                   "--log-dir", str(self.data_dir / "broker"), *ovr]
            self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
            _wait_port(port, self.proc, 60)
            self.bootstrap = f"127.0.0.1:{port}"
        else:
            cmd = [self.python, "-m", "kaflite", "cluster", "up", "--brokers", str(self.brokers),
                   "--data-dir", str(self.data_dir / "cluster"), "--refresh", "10", *ovr]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=logf, start_new_session=True)
            assert self.proc.stdout is not None
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                line = self.proc.stdout.readline().decode(errors="replace")
                if not line and self.proc.poll() is not None:
                    raise RuntimeError(f"cluster up exited with {self.proc.returncode}; see {self.log}")
                if line.startswith("bootstrap servers:"):
                    self.bootstrap = line.split(":", 1)[1].strip()
                    break
            if not self.bootstrap:
                raise RuntimeError("cluster up printed no bootstrap servers in 180 s")
            # Drain the status table so cluster up never blocks on a full pipe.
            threading.Thread(target=self._drain, daemon=True).start()
        return self.bootstrap

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for _ in iter(self.proc.stdout.readline, b""):
            pass

    def stop(self) -> None:
        """SIGTERM to the broker / cluster up by pid (cluster up stops its brokers and ZooKeeper); SIGKILL
        to that pid's process group if it has not exited in 90 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(90)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


# Kafka's scripts the suite calls through $KAFKA_PATH/bin (test_kafka_topics, test_kafka_cmd), as trivup sets
# KAFKA_PATH; kaflite's CLI takes Kafka's flags after the subcommand (kaflite.cli.kafka_flags).
KAFKA_SCRIPTS = {"kafka-topics.sh": "topics", "kafka-acls.sh": "acls", "kafka-configs.sh": "configs",
                 "kafka-consumer-groups.sh": "groups"}


def write_kafka_scripts(kafka_path: Path, python: str, java_client: Path | None = None) -> None:
    bin_dir = kafka_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for script, command in KAFKA_SCRIPTS.items():
        path = bin_dir / script
        path.write_text(f'#!/bin/sh\nexec "{python}" -m kaflite {command} "$@"\n')
        path.chmod(0o755)
    if java_client is not None:
        # The suite's Java halves (0098's TransactionProducerCli): tests/java/Makefile compiles against
        # $KAFKA_PATH/libs/kafka-clients-*.jar and run-class.sh runs $KAFKA_PATH/bin/kafka-run-class.sh with
        # CLASSPATH set to tests/java; this stands in for Kafka's script with the jars of a Java client build
        # (tools/kafka-java-client/build.sh), logging at WARN through slf4j-simple.
        (kafka_path / "libs").symlink_to(java_client.resolve() / "libs", target_is_directory=True)
        path = bin_dir / "kafka-run-class.sh"
        path.write_text('#!/bin/sh\nexec java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn '
                        f'-cp "$CLASSPATH:{kafka_path / "libs"}/*" "$@"\n')
        path.chmod(0o755)


# ---------------------------------------------------------------------------------------------------------
# running


def run_one(test: SuiteTest, tests_dir: Path, conf: Path, env_base: dict[str, str], timeout: float,
            logs: Path, runner_args: list[str], running: dict[int, subprocess.Popen[bytes]],
            lock: threading.Lock) -> list[Result]:
    env = dict(env_base, TESTS=test.number, RDKAFKA_TEST_CONF=str(conf))
    log = logs / f"{test.number}.log"
    t0 = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(["./test-runner", "-p1", *runner_args], cwd=tests_dir, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        with lock:
            running[proc.pid] = proc
        try:
            rc: int | None = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = None
        finally:
            with lock:
                running.pop(proc.pid, None)
    secs = time.monotonic() - t0
    text = log.read_text(errors="replace")
    results = outcome(test, text, rc, secs)
    for r in results:
        r.log = str(log)
    return results


def markdown(results: list[Result]) -> str:
    lines = ["| test | result | seconds | first failure line |", "|---|---|---|---|"]
    for r in results:
        fail = r.first_failure.replace("|", "\\|")[:200] if r.result != "PASSED" else ""
        lines.append(f"| {r.test} | {r.result} | {r.seconds:.1f} | {fail} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("tests_dir", type=Path, help="librdkafka's built tests/ directory (has test-runner)")
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--tests", default="", help="comma-separated test numbers (default: the whole suite)")
    ap.add_argument("--skip", default="", help="comma-separated test numbers not to run")
    ap.add_argument("--include-local", action="store_true", help="also run TEST_F_LOCAL (broker-less) tests")
    ap.add_argument("--scenario", default="default", choices=["default", "noautocreate"])
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=900,
                    help="seconds per test-runner process (0113 took 551 s on the loaded 2-core machine)")
    ap.add_argument("--timeout-multiplier", type=float, default=round(1 + 5 / 3, 2),
                    help="test.timeout.multiplier (default: what `make`'s 5 concurrent tests give, 2.67)")
    ap.add_argument("--kafka-version", default="3.8.0", help="TEST_KAFKA_VERSION (kaflite speaks Kafka 3.8)")
    ap.add_argument("--quick", action="store_true", help="test-runner -Q (the suite's quick mode)")
    ap.add_argument("--conf", action="append", default=[], help="extra test.conf line KEY=VALUE")
    ap.add_argument("-o", "--override", action="append", default=[], help="extra broker config KEY=VALUE")
    ap.add_argument("--no-authorizer", action="store_true",
                    help="no ACL authorizer (CreateAcls answers SECURITY_DISABLED; 0081, 0115, 0119 fail)")
    ap.add_argument("--bootstrap", default="", help="use this running cluster instead of starting one")
    ap.add_argument("--out", type=Path, default=None, help="results directory (default: a temp dir)")
    ap.add_argument("--python", default=sys.executable, help="Python with kaflite importable")
    ap.add_argument("--keep-data", action="store_true")
    ap.add_argument("--java-client", type=Path, default=None,
                    help="a Kafka Java client build (its libs/ has kafka-clients-*.jar and the jars it needs, "
                         "as tools/kafka-java-client/build.sh makes): 0098 runs its Java producer with it")
    ap.add_argument("--list", action="store_true", help="print the tests that would run and exit")
    a = ap.parse_args(argv)

    tests_dir = a.tests_dir.resolve()
    all_tests = list_tests((tests_dir / "test.c").read_text())
    selection = [x.strip() for x in a.tests.split(",") if x.strip()] or None
    chosen = [t for t in choose(all_tests, selection, a.include_local, a.scenario)
              if t.number not in a.skip.split(",")]
    if a.list:
        for t in chosen:
            print(t.name, " ".join(t.flags), t.scenario)
        return 0
    if not (tests_dir / "test-runner").exists():
        print(f"{tests_dir}/test-runner not built (make -C {tests_dir} build)", file=sys.stderr)
        return 2

    out = (a.out or Path(tempfile.mkdtemp(prefix="rdk-suite-out-"))).resolve()
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="rdk-suite-data-"))
    # trivup's broker settings for the suite (KafkaBrokerApp: server.properties.template and
    # _add_simple_authorizer): the ACL authorizer on, open to everyone where no ACL applies.
    overrides = [f"auto.create.topics.enable={'false' if a.scenario == 'noautocreate' else 'true'}",
                 "num.partitions=4", f"default.replication.factor={min(3, a.brokers)}"]
    if not a.no_authorizer:
        overrides += ["authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                      "allow.everyone.if.no.acl.found=true"]
    overrides += a.override
    cluster = Kaflite(a.brokers, data, overrides, a.python)
    running: dict[int, subprocess.Popen[bytes]] = {}
    lock = threading.Lock()
    results: list[Result] = []
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    try:
        bootstrap = a.bootstrap or cluster.start()
        print(f"kaflite ({a.brokers} broker(s)) at {bootstrap}; data {data}; results {out}", flush=True)
        conf = out / "test.conf"
        # The suite's `make` runs test-runner with its default concurrency (5), which raises every test's
        # timeout by 5/3 (test.c: multiplier += concurrency / 3); one test per process (-p1) would not.
        conf.write_text("\n".join([f"bootstrap.servers={bootstrap}",
                                   f"test.timeout.multiplier={a.timeout_multiplier}", *a.conf]) + "\n")
        kafka_path = data / "kafka"
        write_kafka_scripts(kafka_path, a.python, a.java_client)
        env = dict(os.environ, TEST_KAFKA_VERSION=a.kafka_version, TEST_SCENARIO=a.scenario,
                   KAFKA_PATH=str(kafka_path), BROKERS=bootstrap)
        # As run-test.sh: the runner links the tree's librdkafka.so / librdkafka++.so.
        libs = f"{tests_dir.parent / 'src'}:{tests_dir.parent / 'src-cpp'}"
        env["LD_LIBRARY_PATH"] = f"{libs}:{env['LD_LIBRARY_PATH']}" if env.get("LD_LIBRARY_PATH") else libs
        env.pop("TESTS", None)
        # -L: TESTS=0045 would also run 0045's broker-less (mock) tests.
        runner_args = (["-Q"] if a.quick else []) + ([] if a.include_local else ["-L"]) + ["-s", a.scenario]
        # One process per test number (TESTS matches numbers: 0045 runs every 0045_* test).
        by_number: dict[str, SuiteTest] = {}
        for t in chosen:
            by_number.setdefault(t.number, t)
        with concurrent.futures.ThreadPoolExecutor(max(1, a.parallel)) as pool:
            futs = {pool.submit(run_one, t, tests_dir, conf, env, a.timeout, logs, runner_args, running, lock): t
                    for t in by_number.values()}
            names = {t.name for t in chosen}
            for fut in concurrent.futures.as_completed(futs):
                for r in fut.result():
                    if r.test not in names and r.result == "SKIPPED":
                        continue  # a sibling filtered out by -L or the scenario
                    results.append(r)
                    print(f"{r.test:45} {r.result:8} {r.seconds:8.1f}s {r.first_failure[:120]}", flush=True)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
    finally:
        with lock:
            procs = list(running.values())
        for p in procs:  # test-runners still going (interrupted): by pid
            if p.poll() is None:
                p.kill()
                p.wait()
        cluster.stop()
        if a.keep_data:
            print(f"data kept in {data}")
        else:
            shutil.rmtree(data, ignore_errors=True)
    order = {t.name: i for i, t in enumerate(all_tests)}
    results.sort(key=lambda r: order.get(r.test, 10**6))
    meta = {"started": started, "brokers": a.brokers, "scenario": a.scenario, "kafka_version": a.kafka_version,
            "tests": a.tests or "all", "timeout": a.timeout, "parallel": a.parallel}
    (out / "results.json").write_text(json.dumps({"meta": meta, "results": [asdict(r) for r in results]},
                                                 indent=1))
    (out / "results.md").write_text(markdown(results))
    counts: dict[str, int] = {}
    for r in results:
        counts[r.result] = counts.get(r.result, 0) + 1
    print(markdown(results))
    print(" ".join(f"{k}={v}" for k, v in sorted(counts.items())), f"results in {out}")
    return 0 if all(r.result in ("PASSED", "SKIPPED") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
