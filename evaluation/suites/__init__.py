"""EVAL.md suites (spec 003): markdown cases run against an agent, a severity-weighted judge,
a scope-fingerprint cache and a pytest plugin. Plain functions first:

    suite = load_file("skills/greeter/EVAL.md")
    result = run_case(suite, suite.cases[0])
    result.passed
"""

from evaluation.suites.parser import EvalCase, EvalSuite, SuiteError, load_file, parse_suite
from evaluation.suites.runner import CaseResult, RunOptions, run_case, run_suite

__all__ = [
    "CaseResult",
    "EvalCase",
    "EvalSuite",
    "RunOptions",
    "SuiteError",
    "load_file",
    "parse_suite",
    "run_case",
    "run_suite",
]
