"""Chat-completions bodies from a per-shape template: the fixed text encoded once, the varying
text (system and user messages, a per-request seed or output cap) escaped into it per request.

Every request of a model shares everything but those four values, yet encoding the whole body
cost about a third of building a request (issue 12). A template is made by encoding, with the
very encoder `encode` uses, the body `build_body` makes for a request whose varying values are
markers, then cutting the text at the markers; a request's body is that text with its own
values escaped by the encoder's own string escaper (`json.encoder.encode_basestring`, which
`JSONEncoder(ensure_ascii=False)` calls for every string). The bytes are therefore the same as
encoding the whole body, not a second encoder that could drift from it (tested on awkward text).
A body whose shape a template cannot capture is encoded whole (`template` returns None).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

from providers.types import ChatRequest

#: Private-use characters: JSON leaves them unescaped, and no prompt or option has them.
_SYSTEM_MARK = "\ue000dutchbook-system\ue000"
_USER_MARK = "\ue000dutchbook-user\ue000"
#: Integers no seed or cap is: found in the encoded text by their digits, exactly once.
_CAP_MARK = -314159265358979323846264338327950288
_SEED_MARK = -271828182845904523536028747135266249

#: The format fields a template's text has, in this order (`str.format` positions).
_FIELDS = ("{0}", "{1}", "{2}", "{3}")


@dataclass(frozen=True)
class BodyTemplate:
    """The encoded body of one request shape, `str.format` fields where the values go."""

    text: str
    omitted: tuple[str, ...]

    def render(self, req: ChatRequest) -> bytes:
        """The body of `req`: the same bytes the whole-body encoder would make. Strings go in
        unquoted, as a folded user turn has both messages inside one JSON string."""
        return self.text.format(
            encode_basestring(req.system)[1:-1],
            encode_basestring(req.user)[1:-1],
            req.max_tokens,
            req.seed,
        ).encode()


def shape(req: ChatRequest, with_keys: bool) -> tuple[object, ...] | None:
    """What decides a request's template (the values aside), or None when no template fits.

    The model's own seed and cap are part of its template; a request's own win over them and
    are values. The answer keys matter only when the model asks for constrained output. A seed
    or cap that is not a plain int (a bool, a numpy integer) is not what `json` writes as
    digits, so such a request has no template.
    """
    for value in (req.seed, req.max_tokens):
        if value is not None and type(value) is not int:
            return None
    return (not req.system, req.seed is None, req.max_tokens is None,
            req.keys if with_keys else ())


def template(
    req: ChatRequest,
    build: Callable[[ChatRequest], tuple[dict[str, Any], tuple[str, ...]]],
    encode: Callable[[dict[str, Any]], str],
) -> BodyTemplate | None:
    """The template of `req`'s shape, from the body `build` makes for the shape with markers
    for values, as text from `encode`; None when a marker is not found exactly once (a fold
    that rewrites the text, say), so the caller encodes such bodies whole."""
    marked = ChatRequest(
        request_id=req.request_id,
        system=_SYSTEM_MARK if req.system else "",
        user=_USER_MARK,
        seed=None if req.seed is None else _SEED_MARK,
        keys=req.keys,
        max_tokens=None if req.max_tokens is None else _CAP_MARK,
    )
    body, omitted = build(marked)
    text = encode(body).replace("{", "{{").replace("}", "}}")
    marks = (
        (_SYSTEM_MARK, bool(req.system)),
        (_USER_MARK, True),
        (str(_CAP_MARK), req.max_tokens is not None),
        (str(_SEED_MARK), req.seed is not None),
    )
    for (mark, present), field_name in zip(marks, _FIELDS, strict=True):
        if text.count(mark) != (1 if present else 0):
            return None
        text = text.replace(mark, field_name)
    return BodyTemplate(text, omitted)


__all__ = ["BodyTemplate", "shape", "template"]
