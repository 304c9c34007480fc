"""The JSON-RPC 2.0 envelope: strict decoding and response encoding. Knows nothing of HTTP.

Decoding is strict where leniency would be ambiguous: a key repeated anywhere in the body, a
top-level key spelled in two cases (``method`` and ``Method``), and the non-JSON constants
``NaN``/``Infinity`` are parse errors, never resolved last-key-wins. So are values no answer could
carry back: a body that is not UTF-8, a number too large for a double, a lone UTF-16 surrogate,
arrays and objects nested deeper than :data:`MAX_DEPTH`.
"""

from __future__ import annotations

import enum
import json
import math
import re
import typing as t

from .errors import A2AError, InvalidParamsError, InvalidRequestError, JSONParseError


class _NoId(enum.Enum):
    NO_ID = "NO_ID"


#: The request carried no ``id`` (or none could be read): answered with ``"id": null``.
NO_ID: t.Final = _NoId.NO_ID

RequestId = t.Union[str, int, None]


class Request(t.NamedTuple):
    #: :data:`NO_ID` for a request without one that ``decode_request`` was told to read on.
    id: RequestId | _NoId
    method: str
    params: dict[str, t.Any]


class _DuplicateKey(ValueError):
    pass


def _pairs(pairs: list[tuple[str, t.Any]]) -> dict[str, t.Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _DuplicateKey("a key is repeated")
    return out


def _constant(name: str) -> t.NoReturn:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError("number out of range")  # 1e400 would be Infinity in disguise
    return value


#: The deepest nesting of arrays and objects a request may use, the request object being level
#: 1 (protobuf's JSON reader, which the official SDK uses, allows 100 as well). Nesting near the
#: interpreter's recursion limit would parse and then fail where the value is encoded again.
MAX_DEPTH: t.Final = 100


def _too_deep(body: bytes, doc: t.Any) -> bool:
    """``doc`` nests deeper than :data:`MAX_DEPTH` (a walk only when the brackets allow it)."""
    if body.count(b"[") + body.count(b"{") <= MAX_DEPTH:
        return False
    level: list[tuple[t.Any, int]] = [(doc, 1)]
    while level:
        value, depth = level.pop()
        children = value.values() if isinstance(value, dict) else value
        for child in children:
            if isinstance(child, (dict, list)):
                if depth == MAX_DEPTH:
                    return True
                level.append((child, depth + 1))
    return False


#: A ``\uD800``-``\uDFFF`` escape: the only way a surrogate gets into a UTF-8 body.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


#: The strict reader, made once (``json.loads`` with these hooks builds one per call).
_DECODER: t.Final = json.JSONDecoder(
    object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_finite
)


def decode_json(body: bytes) -> t.Any:
    """Parse strictly: repeated keys and NaN/Infinity raise :class:`JSONParseError`."""
    try:
        # RFC 8259: UTF-8 only (a leading BOM may be ignored); json.loads(bytes) would also
        # take UTF-16/32 and encoded surrogates.
        doc = _DECODER.decode(body.decode("utf-8-sig"))
        if _SURROGATE_ESCAPE.search(body):
            # Paired escapes decode to one code point; a lone one cannot be UTF-8 encoded
            # again, so it would break the answer (the id is echoed) and every stored copy.
            json.dumps(doc, ensure_ascii=False).encode("utf-8")
        if isinstance(doc, (dict, list)) and _too_deep(body, doc):
            raise JSONParseError(f"Invalid JSON payload: nested deeper than {MAX_DEPTH} levels")
        return doc
    except _DuplicateKey:
        raise JSONParseError("Invalid JSON payload: a key is repeated") from None
    except (ValueError, RecursionError):  # UnicodeError is a ValueError
        raise JSONParseError() from None


def _always(method: t.Any) -> bool:
    return True


#: The envelope's members as JSON-RPC spells them: keys all among these name no key twice.
_ENVELOPE_KEYS: t.Final = frozenset({"jsonrpc", "id", "method", "params"})


def decode_request(body: bytes, id_required: t.Callable[[t.Any], bool] = _always) -> Request:
    """Decode and check one JSON-RPC request. Batches are refused (-32600).

    Errors found once a usable ``id`` was read are raised as :class:`RequestError`, so the
    answer carries that id; earlier ones answer with ``"id": null``. A request without ``id``
    is -32600 unless ``id_required(its "method" member)`` says otherwise; then it is checked
    on and returned with :data:`NO_ID`, for the binding to answer (v0.3's rule, see
    ``bindings/jsonrpc.py``).
    """
    doc = decode_json(body)
    if not isinstance(doc, dict):
        raise InvalidRequestError("Request payload validation error: expected one JSON object")
    if not doc.keys() <= _ENVELOPE_KEYS and len({key.lower() for key in doc}) != len(doc):
        raise JSONParseError("Invalid JSON payload: a key is spelled in two cases")
    rid: RequestId | _NoId
    if "id" in doc:
        rid = doc["id"]
        if isinstance(rid, bool) or not isinstance(rid, (str, int, type(None))):
            raise InvalidRequestError(
                'Request payload validation error: "id" must be a string, an integer or null'
            )
    elif id_required(doc.get("method")):
        raise InvalidRequestError('Request payload validation error: "id" is required')
    else:
        rid = NO_ID
    if doc.get("jsonrpc") != "2.0":
        raise RequestError(
            rid, InvalidRequestError('Request payload validation error: "jsonrpc" must be "2.0"')
        )
    method = doc.get("method")
    if not isinstance(method, str) or not method:
        raise RequestError(
            rid,
            InvalidRequestError(
                'Request payload validation error: "method" must be a non-empty string'
            ),
        )
    params = doc.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RequestError(
            rid,
            InvalidParamsError(
                'Invalid parameters: "params" must be an object',
                field_violations=[("params", "must be an object (named parameters)")],
            ),
        )
    return Request(rid, method, params)


class RequestError(Exception):
    """An error found after the request id was read, so the answer can carry it."""

    def __init__(self, request_id: RequestId | _NoId, error: A2AError) -> None:
        super().__init__(error.message)
        self.request_id = request_id
        self.error = error


#: One encoder for every answer and stored task: ``json.dumps`` with options builds a new
#: ``JSONEncoder`` at each call. An encoder keeps nothing between calls (safe to share).
_ENCODER: t.Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _dumps(value: t.Any) -> str:
    return _ENCODER.encode(value)


def encode_id(request_id: RequestId | _NoId) -> str:
    if type(request_id) is int:
        return str(request_id)
    return "null" if request_id is NO_ID else _dumps(request_id)


def result_response(request_id: RequestId | _NoId, result_json: str) -> str:
    """A success response around an already-encoded result (encoded once, reused)."""
    return '{"jsonrpc":"2.0","id":' + encode_id(request_id) + ',"result":' + result_json + "}"


class Encoded(str):
    """A method's result already encoded as JSON (a stored task's own encoding, reused)."""

    __slots__ = ()


def encode_result(result: t.Any) -> str:
    """A method's result as JSON; an :class:`Encoded` one as it is."""
    return result if isinstance(result, Encoded) else _dumps(result)


def success(request_id: RequestId | _NoId, result: t.Any) -> str:
    return result_response(request_id, encode_result(result))


def failure(request_id: RequestId | _NoId, error: A2AError) -> str:
    return (
        '{"jsonrpc":"2.0","id":'
        + encode_id(request_id)
        + ',"error":'
        + _dumps(error.to_dict())
        + "}"
    )


encode = _dumps
