"""Is a model fit for PSE? `diagnose` asks it live; `parse_share` scores a finished run's trace.

```python
from pse.doctor import diagnose, parse_share, pse_sends

report = await diagnose(settings)        # what `pse doctor` prints; report.exit_code is 0, 1 or 2
share = parse_share(load_trace(path))    # role turns that parsed on the first try, and after a repair
wire = await pse_sends(settings)         # does this PSE send a grammar / native tools for these settings?
```
"""

from pse.doctor._diagnose import (
    DOCTOR_MAX_TOKENS,
    DoctorReport,
    ExchangeResult,
    ModelCheck,
    SandboxCheck,
    check_sandbox,
    diagnose,
    largest_grammar,
)
from pse.doctor._exchange import Exchange, tool_call_exchange, verdict_exchange
from pse.doctor._server import (
    GRAMMAR_PROBE,
    Probe,
    ServerFacts,
    grammar_support,
    largest_grammar_support,
    native_tool_support,
    server_facts,
)
from pse.doctor._turns import (
    FORMAT_ERRORS,
    ParseShare,
    RunScore,
    TurnParse,
    parse_share,
    parse_turns,
    protocol_signatures,
    score_run,
)
from pse.doctor._wire import CONSTRAINT_FIELDS, WireFeatures, pse_sends

__all__ = [
    "CONSTRAINT_FIELDS",
    "DOCTOR_MAX_TOKENS",
    "FORMAT_ERRORS",
    "GRAMMAR_PROBE",
    "DoctorReport",
    "Exchange",
    "ExchangeResult",
    "ModelCheck",
    "ParseShare",
    "Probe",
    "RunScore",
    "SandboxCheck",
    "ServerFacts",
    "TurnParse",
    "WireFeatures",
    "check_sandbox",
    "diagnose",
    "grammar_support",
    "largest_grammar",
    "largest_grammar_support",
    "native_tool_support",
    "parse_share",
    "parse_turns",
    "protocol_signatures",
    "pse_sends",
    "score_run",
    "server_facts",
    "tool_call_exchange",
    "verdict_exchange",
]
