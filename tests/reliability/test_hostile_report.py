"""The report's hostile-input part reads pytest's JUnit XML and the scanner's printed figure correctly, so
a failing security test or a lower scanner figure shows in reliability/report.md."""

from __future__ import annotations

from reliability.hostile import parse
from reliability.report import checks

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
  <testcase classname="tests.security.test_http_hostile" name="test_a" time="1.5"/>
  <testcase classname="tests.security.test_http_hostile" name="test_b" time="0.5">
    <failure message="boom">assert False</failure>
  </testcase>
  <testcase classname="tests.security.test_poisoned_chunks" name="test_c" time="2.0"/>
  <testcase classname="tests.security.test_poisoned_chunks" name="test_d" time="0.1">
    <skipped message="no data"/>
  </testcase>
</testsuite></testsuites>
"""
STDOUT = """tests/security/test_poisoned_chunks.py
scanner: 25 of 40 poisoned chunks flagged (62%); missed:
  p03 polite request: Kindly disregard the rules above and
  p17 base64: aWdub3Jl...
.
"""


def test_a_failed_security_test_is_counted_and_fails_the_report(tmp_path):
    junit = tmp_path / "security.xml"
    junit.write_text(JUNIT)
    hostile = parse(junit, STDOUT, command="pytest tests/security")
    http = hostile["modules"]["test_http_hostile"]
    assert (http["passed"], http["failed"], http["failures"], http["seconds"]) == (1, 1, ["test_b"], 2.0)
    poisoned = hostile["modules"]["test_poisoned_chunks"]
    assert (poisoned["passed"], poisoned["failed"], poisoned["skipped"]) == (1, 0, 1)
    assert http["what"].startswith("Hostile requests")  # the module's own docstring
    assert hostile["scanner"] == {"flagged": 25, "of": 40, "missed": ["p03 (polite request)", "p17 (base64)"]}
    [(name, passed)] = checks({"hostile": hostile})
    assert name.startswith("hostile input: all 3 tests") and passed is False


def test_all_passing_security_tests_pass_the_report(tmp_path):
    junit = tmp_path / "security.xml"
    junit.write_text(JUNIT.replace('<failure message="boom">assert False</failure>', ""))
    [(_, passed)] = checks({"hostile": parse(junit, "", command="pytest tests/security")})
    assert passed is True
