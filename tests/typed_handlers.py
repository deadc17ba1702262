"""Typed handlers used only by the tests (loaded with
``JOBS_HANDLER_MODULES=tests.handlers,tests.typed_handlers``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from jobctl.activities.registry import JobContext, handler

CHARGE = "test.typed.charge"
RECEIPT = "test.typed.receipt"


class Address(BaseModel):
    model_config = ConfigDict(extra="forbid")

    city: str = Field(min_length=1, max_length=100)
    zip: str = Field(pattern=r"^[0-9]{5}$")


class ChargeRequest(BaseModel):
    """What ``test.typed.charge`` takes: extra fields are refused, amounts must be even (a
    rule the JSON schema cannot carry: only the worker checks it)."""

    model_config = ConfigDict(extra="forbid")

    customer: str = Field(min_length=1, max_length=100)
    amount_cents: int = Field(gt=0, le=1_000_000)
    currency: Literal["EUR", "USD"] = "EUR"
    tags: list[str] = Field(default_factory=list, max_length=10)
    address: Address | None = None

    @field_validator("amount_cents")
    @classmethod
    def _even(cls, value: int) -> int:
        if value % 2:
            raise ValueError("amounts must be even")
        return value


class Receipt(BaseModel):
    customer: str
    total: int


@handler(CHARGE, payload=ChargeRequest)
def charge(ctx: JobContext[ChargeRequest]) -> dict[str, Any]:
    """Echo what the handler received: its type and the validated (defaulted) fields."""
    return {"type": type(ctx.payload).__name__, **ctx.payload.model_dump(mode="json")}


@handler(RECEIPT, payload=Receipt)
async def receipt(ctx: JobContext[Receipt]) -> Receipt:
    """An async typed handler returning a model (stored as its JSON form)."""
    return Receipt(customer=ctx.payload.customer.upper(), total=ctx.payload.total * 2)
