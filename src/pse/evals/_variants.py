"""A suite's variants: `--variant` read, and each instance once per variant (the impossible one mutated)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pse.evals._impossible import (
    IMPOSSIBLE,
    IMPOSSIBLE_SUFFIX,
    ORDINARY,
    VARIANTS,
    mutate_tests,
)
from pse.evals._suite_model import (
    Instance,
    Suite,
)
from pse.exceptions import UserError

__all__ = ["parse_variants", "variant_instances"]


def parse_variants(text: str | None) -> list[str]:
    """`--variant a,b` → the variants, in order, each once (default: ordinary).

    Raises:
        UserError: an unknown or repeated variant, or none.
    """
    variants = [v.strip() for v in (text or ORDINARY).split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        raise UserError(
            f"unknown variant(s) {', '.join(unknown) or '(none given)'}; "
            f"the variants are: {', '.join(VARIANTS)}"
        )
    if len(set(variants)) != len(variants):
        raise UserError(f"--variant names a variant twice: {','.join(variants)}")
    return variants


def variant_instances(
    suite: Suite, instances: Sequence[Instance], variants: Sequence[str], *, seed: int
) -> list[Instance]:
    """Each of `instances` once per variant, in that order: `ordinary` as it is; `impossible` with id
    `<id>.impossible`, its visible tests (one assertion mutated by `seed`) among its files, and no hidden
    command (its run is judged by its outcome: it must not end PASSED).

    Raises:
        UserError: the suite has no impossible variant, or an instance's tests cannot be mutated.
    """
    wanted = [v for v in VARIANTS if v in variants]
    visible = suite.visible_tests
    if IMPOSSIBLE in wanted and visible is None:
        raise UserError(
            f"suite {suite.name} has no impossible variant: declare [variant.{IMPOSSIBLE}] test_file = "
            '"<the visible test file every instance\'s files hold>" in its suite.toml'
        )
    chosen: list[Instance] = []
    for instance in instances:
        if ORDINARY in wanted:
            chosen.append(instance)
        if IMPOSSIBLE in wanted and visible is not None:
            try:
                text, mutation = mutate_tests(
                    visible.source(instance), path=visible.path, seed=seed, key=instance.id
                )
            except ValueError as exc:
                raise UserError(f"instance {instance.id}: {exc}") from None
            chosen.append(
                replace(
                    instance,
                    id=instance.id + IMPOSSIBLE_SUFFIX,
                    files={**instance.files, visible.path: text},
                    hidden_check=(),
                    stdin=None,
                    variant=IMPOSSIBLE,
                    mutation=mutation,
                    base=instance.id,
                )
            )
    return chosen
