"""What a suite is: its suite.toml config, its instances, where its visible tests are."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from pse.evals._impossible import (
    ORDINARY,
    VARIANTS,
    Mutation,
)
from pse.tasks import LimitOverrides

__all__ = [
    "BUILTIN_SUITES",
    "HUMANEVAL",
    "ImpossibleConfig",
    "Instance",
    "Suite",
    "SuiteConfig",
    "VisibleTests",
]


HUMANEVAL = "humaneval"
BUILTIN_SUITES = (HUMANEVAL,)


class ImpossibleConfig(BaseModel):
    """`[variant.impossible]` of `suite.toml`: which file of each instance is its visible tests."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    test_file: str = Field(
        min_length=1,
        description="a pytest file every instance's `files` holds; one of its assertions is mutated",
    )


class SuiteConfig(BaseModel):
    """`suite.toml`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task: str = Field(min_length=1, description="the registered task every instance runs")
    description: str = ""
    limits: LimitOverrides = Field(default_factory=LimitOverrides)
    hidden_check_timeout_s: float = Field(60.0, gt=0, description="wall-clock limit of one hidden check")
    variant: dict[str, ImpossibleConfig] = Field(
        default_factory=dict, description="[variant.impossible]: the suite's impossible variant"
    )
    repo: str | None = Field(
        None,
        description="a git repository every instance runs on (relative to the suite folder, or absolute): "
        "each run is a worktree of it on its own branch, and the hidden check judges that worktree",
    )
    base: str | None = Field(
        None, description="the ref the runs start from (default HEAD); an instance's own wins"
    )


@dataclass(frozen=True)
class Instance:
    """One problem of a suite: the run's inputs and files, and the command that judges its workspace.

    `stdin` is what the hidden check reads on its standard input (the built-in suite passes each
    problem's tests that way, so they never lie in a file the delivered code could open).
    """

    id: str
    inputs: dict[str, str]
    files: dict[str, str]
    hidden_check: tuple[str, ...]
    stdin: bytes | None = None
    variant: str = ORDINARY
    """`ordinary`, or `impossible`: then `hidden_check` is empty (the run must not end PASSED)."""
    mutation: Mutation | None = None
    """The impossible variant's mutated assertion (in `files`)."""
    base: str = ""
    """The ordinary instance this one is a variant of ("" for an ordinary instance: itself)."""
    ref: str | None = None
    """On a repository suite: the ref this instance's run starts from (None: the suite's `base`)."""
    problem: str = ""
    """The problem as one prompt, which the direct arm asks as it is ("": the inputs' PROBLEM)."""


@dataclass(frozen=True)
class VisibleTests:
    """Where a suite's impossible variant finds each instance's visible tests: their workspace path and
    their text (the built-in suite writes HumanEval's own tests as a pytest file)."""

    path: str
    source: Callable[[Instance], str]


@dataclass(frozen=True)
class Suite:
    """A loaded suite.

    Attributes:
        hidden_dir: given to every hidden check as its private read-only `{hidden}`.
        secret_paths: what no role's command may read (masked under bwrap; fallback refuses to start
            while the sandbox uid could read one): the hidden folder, or the package holding the
            answers.
    """

    name: str
    config: SuiteConfig
    instances: tuple[Instance, ...]
    hidden_dir: Path | None
    secret_paths: tuple[Path, ...] = ()
    source: str = ""
    runner: tuple[Path, ...] = ()
    """A built-in suite's check script, then the modules it loads from beside it: staged alone as
    `{hidden}` (its tests come on stdin)."""
    visible_tests: VisibleTests | None = None
    """The impossible variant's visible tests; None: the suite has no impossible variant."""
    repo: Path | None = None
    """A repository suite's repository (`repo` of suite.toml, resolved): every run is a worktree of it."""

    @property
    def variants(self) -> tuple[str, ...]:
        """The variants this suite can run."""
        return VARIANTS if self.visible_tests is not None else (ORDINARY,)
