"""The base of every settings block: camelCase keys, unknown keys refused, immutable, and no
`true` read as 1 in a number field."""

from __future__ import annotations

from types import UnionType
from typing import Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError
from pydantic.alias_generators import to_camel


# Every field that holds a number (int or float), by name: `true` is refused in them
# (Section._no_true_for_a_number; tests/test_security.py holds the list to the models).
NUMBER_FIELDS = (
    "backoff_limit", "capacity_gib", "cpu", "deadline_hours", "desired_nodes", "every_seconds",
    "every_steps", "frequency_threshold", "keep", "max_hourly_usd", "max_ind_range",
    "max_nodes", "max_price", "max_wait_minutes", "memory_gib", "min_nodes", "nodes",
    "pool_size_tib", "processes_per_node", "termination_grace_seconds", "throughput_per_tib",
    "volume_size_gib", "workers")


class Section(BaseModel):
    """Base of every settings block: camelCase keys, unknown keys refused, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_enum_values=False,
    )

    @field_validator(*NUMBER_FIELDS, mode="before", check_fields=False)
    @classmethod
    def _no_true_for_a_number(cls, value: object, info: ValidationInfo) -> object:
        """`keep: true` is not 1: pydantic's lax mode reads true/false as 1/0, so a typo would
        keep one checkpoint (or a 1-node pool) without a word; a number takes numbers only."""
        if isinstance(value, bool) and info.field_name is not None:
            number = _number_kind(cls.model_fields[info.field_name].annotation)
            if number is not None:
                raise PydanticCustomError(
                    f"{number}_type",
                    f"Input should be a valid {'integer' if number == 'int' else 'number'}")
        return value


def _number_kind(annotation: object) -> str | None:
    """'int' or 'float' for a field holding a number (or an optional one), else None."""
    kinds = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    numbers = [k for k in kinds if k is not type(None)]
    if len(numbers) == 1 and numbers[0] in (int, float):
        return "int" if numbers[0] is int else "float"
    return None
