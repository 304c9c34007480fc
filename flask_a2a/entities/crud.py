"""An owner-scoped CRUD blueprint for a SQLAlchemy model and a marshmallow schema.

For apps that have no REST routes for a resource yet: the routes :class:`~flask_a2a.Entity`
expects by default (list / get / create / update / delete under one URL), every query narrowed to
the calling owner's rows. Another owner's row answers 404, exactly like a missing one.

The list takes ``page``, ``limit``, ``sort`` (a field, ``-field`` for descending) and one
filter per scalar field, the same keys the entity's ``list`` tool advertises (both come from
:func:`flask_a2a.entities.toolschema.walk`), and answers
``{"data": [...], "page": 1, "perPage": 20, "total": 2, "totalPages": 1}``.
"""

from __future__ import annotations

import math
import typing as t

from flask import Blueprint, Response, jsonify, request
from marshmallow import Schema, ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from . import host_schema
from .toolschema import walk

#: ``owner() -> str | Principal | None``, called inside the request (e.g. the principal hook).
OwnerHook = t.Callable[[], t.Any]


def _error(status: int, message: str, errors: t.Any = None) -> Response:
    body: dict[str, t.Any] = {"error": message}
    if errors is not None:
        body["errors"] = errors
    response = jsonify(body)
    response.status_code = status
    return response


class _Refused(Exception):
    def __init__(self, response: Response) -> None:
        self.response = response


def crud_blueprint(
    name: str,
    *,
    model: type[t.Any],
    schema: Schema,
    session: t.Callable[[], Session],
    owner: OwnerHook,
    owner_column: str = "owner_id",
    url_prefix: str,
    id_column: str = "id",
    default_limit: int = 20,
    max_limit: int = 100,
) -> Blueprint:
    """Build the blueprint.

    :param model: a SQLAlchemy declarative model with ``id_column`` and ``owner_column``.
    :param schema: the record schema; it loads what clients send and dumps what they get.
    :param session: returns a new :class:`~sqlalchemy.orm.Session` (a ``sessionmaker``);
        each request uses one and closes it.
    :param owner: who is calling; ``None`` answers 401. A :class:`~flask_a2a.Principal`
        (anything with ``.owner``) or a plain owner id.
    :param url_prefix: where the routes live, e.g. ``/api/invoices``.
    """
    facts = walk(schema)
    #: A filter's key (as sent) and a sort key (as seen) -> (model attribute, field).
    by_key = {
        key: (field.attribute or name, field)
        for name, field in schema.fields.items()
        for key in (host_schema.load_key(name, field), host_schema.dump_key(name, field))
    }
    owner_attr = getattr(model, owner_column)
    id_attr = getattr(model, id_column)
    id_type: type = getattr(id_attr.type, "python_type", str)
    bp = Blueprint(name, __name__, url_prefix=url_prefix)

    def current_owner() -> str:
        found = owner()
        found = getattr(found, "owner", found)
        if not found:
            raise _Refused(_error(401, "authentication required"))
        return str(found)

    def load_body(partial: bool) -> dict[str, t.Any]:
        body = request.get_json(silent=True)
        if not isinstance(body, dict):
            raise _Refused(_error(400, "send a JSON object"))
        try:
            data = host_schema.load(schema, body, partial=partial)
        except ValidationError as exc:
            raise _Refused(_error(400, "invalid data", exc.messages)) from None
        data.pop(owner_column, None)
        data.pop(id_column, None)
        return data

    def find(db: Session, who: str, record_id: str) -> t.Any:
        try:
            key = id_type(record_id)
        except (TypeError, ValueError):
            raise _Refused(_error(404, "not found")) from None
        row = db.scalar(select(model).where(id_attr == key, owner_attr == who))
        if row is None:
            raise _Refused(_error(404, "not found"))
        return row

    def positive(key: str, default: int) -> int:
        raw = request.args.get(key)
        if raw is None:
            return default
        if not raw.isdigit() or int(raw) < 1:
            raise _Refused(_error(400, f"{key} must be a positive integer"))
        return int(raw)

    def list_rows(db: Session, who: str) -> dict[str, t.Any]:
        page = positive("page", 1)
        limit = min(positive("limit", default_limit), max_limit)
        stmt = select(model).where(owner_attr == who)
        for key, raw in request.args.items(multi=True):
            if key in ("page", "limit", "sort"):
                continue
            if key not in facts.filters:
                raise _Refused(_error(400, f"unknown query parameter: {key}"))
            attr, field = by_key[key]
            try:
                value = field.deserialize(raw)
            except ValidationError as exc:
                raise _Refused(_error(400, "invalid filter", {key: exc.messages})) from None
            stmt = stmt.where(getattr(model, attr) == value)
        order = []
        sort = request.args.get("sort")
        if sort:
            key = sort.removeprefix("-")
            if key not in facts.sorts:
                raise _Refused(_error(400, f"cannot sort by {key}"))
            column = getattr(model, by_key[key][0])
            order.append(column.desc() if sort.startswith("-") else column.asc())
        total = db.scalar(select(func.count()).select_from(stmt.subquery())) or 0
        rows = db.scalars(
            stmt.order_by(*order, id_attr).offset((page - 1) * limit).limit(limit)
        ).all()
        return {
            "data": host_schema.dump(schema, rows, many=True),
            "page": page,
            "perPage": limit,
            "total": total,
            "totalPages": math.ceil(total / limit),
        }

    def handle(work: t.Callable[[Session, str], tuple[t.Any, int]]) -> Response:
        try:
            who = current_owner()
            with session() as db:
                body, status = work(db, who)
        except _Refused as refused:
            return refused.response
        response = jsonify(body)
        response.status_code = status
        return response

    @bp.get("", strict_slashes=False)
    def list_view() -> Response:
        return handle(lambda db, who: (list_rows(db, who), 200))

    @bp.post("", strict_slashes=False)
    def create_view() -> Response:
        def work(db: Session, who: str) -> tuple[t.Any, int]:
            row = model(**load_body(partial=False))
            setattr(row, owner_column, who)
            db.add(row)
            db.commit()
            return host_schema.dump(schema, row), 201

        return handle(work)

    @bp.get("/<record_id>")
    def get_view(record_id: str) -> Response:
        return handle(lambda db, who: (host_schema.dump(schema, find(db, who, record_id)), 200))

    @bp.route("/<record_id>", methods=["PATCH", "PUT"])
    def update_view(record_id: str) -> Response:
        def work(db: Session, who: str) -> tuple[t.Any, int]:
            data = load_body(partial=request.method == "PATCH")
            row = find(db, who, record_id)
            for attr, value in data.items():
                setattr(row, attr, value)
            db.commit()
            return host_schema.dump(schema, row), 200

        return handle(work)

    @bp.delete("/<record_id>")
    def delete_view(record_id: str) -> Response:
        def work(db: Session, who: str) -> tuple[t.Any, int]:
            row = find(db, who, record_id)
            record_key = getattr(row, id_column)
            db.delete(row)
            db.commit()
            return {"id": record_key, "deleted": True}, 200

        return handle(work)

    return bp
