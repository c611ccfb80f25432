"""PSE: Planner / Specialist / Evaluator loops on AutoGen, with a ToolAgent that alone holds side effects."""

__version__ = "0.1.0"

__all__ = ["__version__"]
