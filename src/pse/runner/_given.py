"""What a caller gives a run for its roles (its own AutoGen agents, its model clients), checked by role."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from pse.exceptions import UserError

__all__ = ["given_for_roles"]

_T = TypeVar("_T")


def given_for_roles(given: Mapping[str, _T], speakers: tuple[str, ...], what: str) -> dict[str, _T]:
    """The caller's own agents or model clients, each for a role of this run; an agent is named as its
    role (the ToolAgent judges a request by the seat it came from, which is the role's name).

    Raises:
        UserError: a key that is no role of this run, or an agent named otherwise than its role.
    """
    for role, value in given.items():
        if role not in speakers:
            raise UserError(f"{what}: {role!r} is no role of this run; give one of {', '.join(speakers)}")
        if what == "agents" and getattr(value, "name", None) != role:
            raise UserError(
                f"agents: the agent for {role} is named {getattr(value, 'name', None)!r}; name it {role!r} "
                "(its messages speak as its role, and the role's policy judges them)"
            )
    return dict(given)
