"""A check: one policy applied to one identity, in one shard, for one request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ratelimits.engine.policy.wire import encoded_cost

if TYPE_CHECKING:
    from ratelimits.engine.policy.compiled import CompiledPolicy


@dataclass(slots=True)
class Check:
    """One policy to apply to one identity (in one shard of a sharded policy). Read-only
    by contract, not frozen: one is built per policy on every request, and a frozen
    dataclass pays a call per field to be built."""

    policy: CompiledPolicy
    identity: str
    shard: int = 0
    #: The units this request spends, when its view sets them (``ratelimit_cost``);
    #: ``None``: the policy's own cost.
    cost: int | None = None

    @property
    def units(self) -> int:
        """The units this request spends under its policy."""
        return self.policy.cost if self.cost is None else self.cost

    @property
    def wire_args(self) -> bytes:
        """This check's ARGV slots as bytes: the policy's, pre-encoded, for its own cost."""
        cost, policy = self.cost, self.policy
        if policy.calendar:  # this period's boundaries
            _, _, wire_args, wire_head = policy.current_period()
        else:
            wire_args, wire_head = policy.wire_args, policy.wire_head
        if cost is None or cost == policy.cost:
            return wire_args[self.shard]
        return wire_head[self.shard] + encoded_cost(cost)

    @property
    def key(self) -> str:
        return self.policy.key_for(self.identity, self.shard)
