"""The per-request types built by `fills_dict` behave as the frozen dataclasses they are."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from providers.types import (
    ChatRequest,
    Completion,
    HttpRequest,
    RateLimitInfo,
    fills_dict,
)

CASES: list[tuple[type[Any], tuple[Any, ...], dict[str, Any]]] = [
    (ChatRequest, ("r1", "sys", "user"), {}),
    (ChatRequest, ("r2", "", "user", 7, ("a", "b"), 128), {}),
    (ChatRequest, ("r3",), {"system": "s", "user": "u", "max_tokens": 9}),
    (HttpRequest, ("POST", "http://x/v1", {"a": "b"}, b"{}"), {}),
    (HttpRequest, ("POST", "http://x/v1", {}, b"{}", ("temperature",), ("folded",)), {}),
    (Completion, ("text", "stop", 1, 2, "id", "m"), {}),
    (Completion, ("text", None, None, None, None, None, RateLimitInfo(1.0), 0.5), {}),
    (Completion, ("t", "length"), {"tokens_in": 3, "tokens_out": 4, "provider_request_id": "p",
                                    "model_reported": None, "cost_usd": 1e-6}),
]


def _reference(cls: type[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The object the dataclass's own `__init__` makes from the same arguments."""
    made = object.__new__(cls)
    cls.__init__.__wrapped__(made, *args, **kwargs)
    return made


@pytest.mark.parametrize(("cls", "args", "kwargs"), CASES)
def test_construction_equals_the_dataclass_init(
    cls: type[Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    made, reference = cls(*args, **kwargs), _reference(cls, args, kwargs)
    assert vars(made) == vars(reference)
    assert list(vars(made)) == [f.name for f in dataclasses.fields(cls)]
    assert made == reference
    if cls is not HttpRequest:  # its headers are a dict: unhashable, as before
        assert hash(made) == hash(reference)
    assert repr(made) == repr(reference)


@pytest.mark.parametrize("cls", [ChatRequest, HttpRequest, Completion])
def test_signature_is_the_dataclass_one(cls: type[Any]) -> None:
    ours = inspect.signature(cls.__init__, follow_wrapped=False)
    theirs = inspect.signature(cls.__init__.__wrapped__)
    assert ours == theirs


@pytest.mark.parametrize(("cls", "args", "kwargs"), CASES)
def test_still_frozen_and_replaceable(
    cls: type[Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    made = cls(*args, **kwargs)
    first = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, first, "changed")
    changed = dataclasses.replace(made, **{first: "changed"})
    assert getattr(changed, first) == "changed"
    assert getattr(made, first) != "changed"


def test_wrong_arguments_fail_as_before() -> None:
    with pytest.raises(TypeError):
        ChatRequest("only-an-id", "sys", "user", 1, (), 2, "one too many")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Completion("text")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        HttpRequest("POST", "u", {}, b"", nope=1)  # type: ignore[call-arg]


def test_default_factories_are_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class WithFactory:
        items: list[int] = dataclasses.field(default_factory=list)

    with pytest.raises(TypeError):
        fills_dict(WithFactory)
