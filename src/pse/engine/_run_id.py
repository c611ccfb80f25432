"""The run-id rule lives in `pse._run_id`, a leaf module the CLI and the run history read without
importing the engine; the engine keeps its names."""

from pse._run_id import RUN_ID_PATTERN, check_run_id, is_run_id, new_run_id

__all__ = ["RUN_ID_PATTERN", "check_run_id", "is_run_id", "new_run_id"]
