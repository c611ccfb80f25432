"""Print the trace JSON Schema: `python -m pse.engine.schema > src/pse/engine/trace.schema.json`."""

import json

from pse.trace import trace_schema

__all__: list[str] = []  # a script: `python -m pse.engine.schema`

if __name__ == "__main__":
    print(json.dumps(trace_schema(), indent=2))
