"""One line per problem of a pydantic error, an unknown key matched against the document's own model."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from shared.formats.validation import format_validation_error


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cluster: str
    detail: Inner


def _error(document: object) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        Message.model_validate(document)
    return info.value


def test_an_unknown_key_is_matched_against_the_mapping_it_is_in() -> None:
    # Given a message with a misspelt key inside its nested mapping
    error = _error({"cluster": "c", "detail": {"reasn": "x"}})
    # When formatted against the message's model
    text = format_validation_error(error, "message", Message)
    # Then the line names the place and suggests the nested model's key, not a key of another model
    assert "message: detail.reasn: unknown key; did you mean 'reason'?" in text.splitlines()


def test_without_the_model_an_unknown_key_is_named_without_guesses() -> None:
    error = _error({"cluster": "c", "detail": {"reason": "x"}, "clutser": "c"})
    assert format_validation_error(error, "event").splitlines() == ["event: clutser: unknown key"]


def test_each_problem_has_its_own_line() -> None:
    error = _error({"detail": {"reason": 3}})
    assert format_validation_error(error, "message", Message).splitlines() == [
        "message: cluster: Field required",
        "message: detail.reason: Input should be a valid string",
    ]
