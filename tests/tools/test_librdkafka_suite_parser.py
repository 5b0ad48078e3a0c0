"""tools/librdkafka-suite/run.py's parser, on test-runner output captured from a real run (librdkafka v2.15.0
against kaflite, tests/data/librdkafka-suite/). The harness itself runs outside pytest."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "librdkafka-suite"


def _load():
    spec = importlib.util.spec_from_file_location("rdk_suite_run", ROOT / "tools" / "librdkafka-suite" / "run.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["rdk_suite_run"] = mod  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


run = _load()


def _read(name: str) -> str:
    return (DATA / name).read_text(errors="replace")


def test_a_passed_test_is_read_from_the_summary_line():
    results = run.parse_output(_read("0001-passed.log"))
    assert [(r.test, r.result, r.first_failure) for r in results] == [("0001_multiobj", "PASSED", "")]
    assert results[0].seconds > 0


def test_a_skipped_test_keeps_the_runners_reason():
    results = run.parse_output(_read("0028-known-issue.log"))
    assert [(r.test, r.result, r.first_failure) for r in results] == [
        ("0028_long_topicnames", "SKIPPED", "Filtered due to negative test flags")]


def test_a_runner_timeout_has_no_summary_and_is_a_failure_with_the_runners_message():
    text = _read("0041-runner-timeout.log")
    assert run.parse_output(text) == []
    t = run.SuiteTest("0041_fetch_max_bytes", [], "default")
    [r] = run.outcome(t, text, rc=134, seconds=61.0)
    assert r.result == "FAILED"
    assert r.first_failure.startswith(
        "0041_fetch_max_bytes: Test 0041_fetch_max_bytes timed out (timeout set to 60 seconds)")


def test_a_process_killed_by_the_harness_is_a_timeout():
    t = run.SuiteTest("0041_fetch_max_bytes", [], "default")
    text = "\n".join(_read("0041-runner-timeout.log").splitlines()[:40])  # cut before the runner's own verdict
    [r] = run.outcome(t, text, rc=None, seconds=480.0)
    assert (r.test, r.result, r.first_failure) == ("0041_fetch_max_bytes", "TIMEOUT", "killed after 480 s")


def test_a_crash_without_output_names_the_exit_code():
    t = run.SuiteTest("0001_multiobj", [], "default")
    [r] = run.outcome(t, "./test-runner: error while loading shared libraries\n", rc=127, seconds=0.0)
    assert r.result == "CRASHED" and r.first_failure.startswith("exit code 127: ./test-runner: error")


def test_every_test_of_a_number_is_read_from_one_summary():
    results = run.parse_output(_read("0045-summary.log"))
    by_name = {r.test: r.result for r in results}
    assert by_name["0045_subscribe_update"] == "PASSED"
    assert by_name["0045_subscribe_many_updates"] == "PASSED"
    assert by_name["0045_subscribe_update_mock"] == "SKIPPED"  # -L: broker-less
    assert "<MAIN>" not in by_name


def test_the_test_list_is_read_from_test_c_with_flags_and_scenario():
    src = """
    _TEST_DECL(0001_multiobj);
    struct test tests[] = {
        {.name = "<MAIN>", .flags = TEST_F_LOCAL},
        _TEST(0000_unittests, TEST_F_LOCAL, _THRES(.ucpu = 100.0, .scpu = 20.0)),
        _TEST(0001_multiobj, 0),
        /* a comment with _TEST(9999_x, 0) */
        _TEST(0028_long_topicnames, TEST_F_KNOWN_ISSUE, TEST_BRKVER(0, 9, 0, 0), .extra = "x"),
        _TEST(0107_topic_recreate, 0, TEST_BRKVER_TOPIC_ADMINAPI, .scenario = "noautocreate"),
        _TEST(0103_transactions, 0, TEST_BRKVER(0, 11, 0, 0), .scenario = "default,ak23"),
        _TEST(8000_idle, TEST_F_MANUAL),
        {NULL}};
    """
    tests = run.list_tests(src)
    assert [t.name for t in tests] == ["0000_unittests", "0001_multiobj", "0028_long_topicnames",
                                       "0107_topic_recreate", "0103_transactions", "8000_idle"]
    assert tests[2].flags == ["TEST_F_KNOWN_ISSUE"] and tests[2].minver == "TEST_BRKVER(0, 9, 0, 0)"
    assert [t.name for t in run.choose(tests, None, False, "default")] == [
        "0001_multiobj", "0028_long_topicnames", "0103_transactions"]
    assert [t.name for t in run.choose(tests, None, False, "noautocreate")] == ["0107_topic_recreate"]
    assert [t.name for t in run.choose(tests, ["0000", "0001"], True, "default")] == [
        "0000_unittests", "0001_multiobj"]


def test_the_markdown_table_escapes_pipes_and_omits_the_reason_of_a_pass():
    rs = [run.Result("0001_multiobj", "PASSED", 1.25, ""), run.Result("0081_admin", "FAILED", 3.0, "a|b")]
    assert run.markdown(rs).splitlines()[2:] == ["| 0001_multiobj | PASSED | 1.2 |  |",
                                                 "| 0081_admin | FAILED | 3.0 | a\\|b |"]


def test_an_aborted_process_keeps_the_tests_that_passed_and_blames_the_one_that_failed():
    # excerpt of 0045's log on three brokers: two tests passed, the third aborted the runner
    t = run.SuiteTest("0045_subscribe_update", [], "default")
    results = run.outcome(t, _read("0045-aborted-excerpt.log"), rc=-6, seconds=83.0)
    assert [(r.test, r.result) for r in results] == [
        ("0045_subscribe_update", "PASSED"), ("0045_resubscribe_with_regex", "PASSED"),
        ("0045_subscribe_many_updates", "FAILED")]
    assert "Failed to create 100 topic(s)" in results[2].first_failure


def test_a_java_client_build_is_laid_out_as_kafka_path_for_the_suites_java_half(tmp_path):
    # tests/java/Makefile compiles against $KAFKA_PATH/libs/kafka-clients-*.jar; run-class.sh execs
    # $KAFKA_PATH/bin/kafka-run-class.sh with CLASSPATH=tests/java.
    build = tmp_path / "kafka-build"
    (build / "libs").mkdir(parents=True)
    (build / "libs" / "kafka-clients-3.8.0.jar").write_bytes(b"")
    kafka_path = tmp_path / "kafka"
    run.write_kafka_scripts(kafka_path, "/usr/bin/python3", build)
    assert [p.name for p in (kafka_path / "libs").glob("kafka-clients-*.jar")] == ["kafka-clients-3.8.0.jar"]
    script = (kafka_path / "bin" / "kafka-run-class.sh").read_text()
    assert f'-cp "$CLASSPATH:{kafka_path / "libs"}/*"' in script and '"$@"' in script
    # Without a build there is no kafka-run-class.sh: 0098's Java half reports it cannot run.
    bare = tmp_path / "bare"
    run.write_kafka_scripts(bare, "/usr/bin/python3")
    assert not (bare / "bin" / "kafka-run-class.sh").exists() and not (bare / "libs").exists()
