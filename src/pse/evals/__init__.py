"""Evaluations: a suite's instances run by several arms (PSE, a single self-reviewing agent, ablations),
each finished run judged by a hidden check no role ever sees, and the arms compared on the same
instances (`pse eval`); the impossible variant measures how often an arm cheats (`pse eval --variant
impossible`)."""

from pse.evals._eval_folder import read_eval
from pse.evals._impossible import Mutation
from pse.evals._report import render_report, write_report
from pse.evals._results import (
    ArmSummary,
    EvalSummary,
    HiddenResult,
    PairedTable,
    ResultRow,
    summarize_rows,
)
from pse.evals._stats import mcnemar_exact, wilson

__all__ = [
    "ArmSummary",
    "EvalSummary",
    "HiddenResult",
    "Mutation",
    "PairedTable",
    "ResultRow",
    "mcnemar_exact",
    "read_eval",
    "render_report",
    "summarize_rows",
    "wilson",
    "write_report",
]
