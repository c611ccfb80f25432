// The figures of an evaluation and their formats: the HTML report's (src/pse/evals/_report.py, ARM_FIGURES).
import { DASH, fmtInt } from "./format.js";

export const fmtFixed = (v, digits) => (v === null || v === undefined ? DASH : Number(v).toFixed(digits));
export const fmtRate = (v, ci) => (v === null || v === undefined ? DASH
  : ci ? `${v.toFixed(2)} (${ci[0].toFixed(2)}–${ci[1].toFixed(2)})` : v.toFixed(2));
const rateOf = (field) => (a) => fmtRate(a[field], a[`${field}_ci95`]);
const fmtMoney = (v, cur) => (v === null || v === undefined ? DASH : `${Number(v).toFixed(4)} ${cur}`);
export const fmtP = (p) => (p < 0.001 ? "< 0.001" : p.toFixed(3));
export const OUTCOME_TEXT = { PASSED: "pass", ESCALATED: "warn", ACCEPTED_BY_HUMAN: "warn", TIMEOUT: "warn", ERROR: "fail" };
export const EVAL_FIGURES = [
  ["instances", "instances", (a) => String(a.instances)],
  ["claimed_pass_rate", "claimed pass rate", rateOf("claimed_pass_rate")],
  ["true_pass_rate", "true pass rate", rateOf("true_pass_rate")],
  ["false_pass_rate", "false pass rate (of claimed)", rateOf("false_pass_rate")],
  ["escaped_defects", "escaped defects", (a) => String(a.escaped_defects)],
  ["first_pass_rate", "first pass rate", rateOf("first_pass_rate")],
  ["mean_rework_cycles", "mean rework cycles", (a) => fmtFixed(a.mean_rework_cycles, 2)],
  ["handoff_failure_rate", "handoff failure rate", rateOf("handoff_failure_rate")],
  ["unauthorized_call_rate", "unauthorized call rate", rateOf("unauthorized_call_rate")],
  ["tokens", "tokens", (a) => fmtInt(a.tokens)],
  ["tokens_per_true_pass", "tokens per true pass", (a) => (a.tokens_per_true_pass === null ? DASH : fmtInt(Math.round(a.tokens_per_true_pass)))],
  ["cost", "cost", (a) => fmtMoney(a.cost, a.currency)],
  ["cost_per_true_pass", "cost per true pass", (a) => fmtMoney(a.cost_per_true_pass, a.currency)],
  ["wall_s_per_instance", "wall s per instance", (a) => fmtFixed(a.wall_s_per_instance, 1)],
  ["outcomes", "outcomes", (a) => Object.entries(a.outcomes).map(([k, n]) => `${k} ${n}`).join(" · ") || DASH],
  ["hidden_check_errors", "hidden checks that could not run", (a) => String(a.hidden_check_errors)],
];
// The impossible variant's table (src/pse/evals/_report.py, CHEAT_FIGURES), shown when there are impossible rows.
export const CHEAT_FIGURES = [
  ["impossible_instances", "impossible instances", (a) => String(a.impossible_instances ?? 0)],
  ["cheat_rate", "cheat rate (PASSED)", rateOf("cheat_rate")],
  ["cheats", "cheats", (a) => String(a.cheats ?? 0)],
  ["honest_exit_rate", "honest exit rate (SPEC_CONFLICT naming the test)", rateOf("honest_exit_rate")],
  ["honest_exits", "honest exits", (a) => String(a.honest_exits ?? 0)],
  ["spec_conflicts", "SPEC_CONFLICT exits (any test named)", (a) => String(a.spec_conflicts ?? 0)],
  ["solve_rate", "solve rate (ordinary variant)", rateOf("solve_rate")],
  ["impossible_outcomes", "outcomes (impossible)", (a) => Object.entries(a.impossible_outcomes || {}).map(([k, n]) => `${k} ${n}`).join(" · ") || DASH],
  ["impossible_tokens", "tokens (impossible)", (a) => fmtInt(a.impossible_tokens ?? 0)],
];
