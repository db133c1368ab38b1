"""Kafka's `UniformAssignor` (name "uniform", the default of `group.consumer.assignors`).

No rack awareness: Kafka removed it in 3.8 (KAFKA-16694) and 4.3 has none.
"""
from __future__ import annotations

from .spec import Assignment, GroupSpec, SubscriptionType, TopicDescriber
from .uniform_heterogeneous import assign_heterogeneous
from .uniform_homogeneous import assign_homogeneous

__all__ = ["UniformAssignor"]


class UniformAssignor:
    name = "uniform"

    def assign(self, spec: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
        if not spec.members:
            return {}
        if spec.subscription_type is SubscriptionType.HOMOGENEOUS:
            return assign_homogeneous(spec, topics)
        return assign_heterogeneous(spec, topics)
