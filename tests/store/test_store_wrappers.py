"""The exchange's store is built of named wrappers a reader can open (#36): the chosen store,
its error mapping until the choice, the metered store after; no attribute forwarded by magic."""

from __future__ import annotations

import typing as t
from pathlib import Path

import pytest
from flask import Flask

from flask_a2a import A2A, MemoryStore, Skill
from flask_a2a.store.base import OptionalOperations, Store, offers
from flask_a2a.store.calls import MeteredStore
from flask_a2a.store.choice import ChosenStore
from flask_a2a.store.errors import StoreErrors
from flask_a2a.testing import A2ATestClient

from ..conftest import echo, token_principal

PACKAGE = Path(__file__).resolve().parents[2] / "flask_a2a"


def operations(protocol: type) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")}


@pytest.mark.parametrize("wrapper", [ChosenStore, StoreErrors, MeteredStore])
def test_each_wrapper_writes_out_every_store_operation(wrapper: type) -> None:
    written = set(vars(wrapper))
    assert operations(Store) | operations(OptionalOperations) <= written
    assert "__getattr__" not in written and "__getattribute__" not in written


def test_no_store_is_cast_to_the_protocol() -> None:
    casts = [
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if "cast(Store" in path.read_text(encoding="utf-8")
    ]
    assert casts == []


def app_with(store: t.Any = None, metrics: bool = True) -> Flask:
    app = Flask("wrappers_app")
    app.config.update(A2A_METRICS=metrics)
    skill = Skill(id="echo", name="Echo", description="Echo.", handler=echo)
    A2A(app, skills=[skill], principal=token_principal, store=store)
    return app


@pytest.mark.parametrize("store_kind", ["sqlite", "memory"])
def test_the_chosen_store_serves_from_its_error_mapping_then_the_metered_store(
    store_kind: str, new_store: t.Callable[..., t.Any]
) -> None:
    """A database store is served metered; the memory store as it is (its calls are
    dictionary reads in the process: nothing to time or trace)."""
    given = new_store() if store_kind == "sqlite" else None
    app = app_with(given)
    handle = app.extensions["a2a"].exchange.store
    assert isinstance(handle, ChosenStore)
    if given is None:
        assert isinstance(handle.target, StoreErrors)  # not chosen yet: a call chooses it
    task = A2ATestClient(app, token="alice").send("hi")["task"]
    if given is None:
        assert isinstance(handle.chosen(), MemoryStore)
        assert handle.target is handle.chosen()
    else:
        assert isinstance(handle.target, MeteredStore)
        assert handle.chosen() is given
    assert handle.get_task(task["id"]) == handle.chosen().get_task(task["id"])


class ProtocolOnly:
    """A host's store with the Store protocol's operations and none of the optional ones."""

    filters_scope = True
    filters_tenant = True

    def __init__(self) -> None:
        self._inner = MemoryStore()
        for name in operations(Store) - {"filters_scope", "filters_tenant"}:
            setattr(self, name, getattr(self._inner, name))


def test_a_store_with_only_the_protocol_serves_and_offers_nothing_else() -> None:
    app = app_with(ProtocolOnly())
    handle = app.extensions["a2a"].exchange.store
    client = A2ATestClient(app, token="alice")
    task = client.send("hi")["task"]
    assert client.rpc("GetTask", {"id": task["id"]}).result["id"] == task["id"]
    assert not any(offers(handle, name) for name in operations(OptionalOperations))
    assert offers(handle.chosen(), "create_task")
