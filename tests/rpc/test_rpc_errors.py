"""Error classes: codes and reasons per SPEC §2, and the wire round trip."""

import pickle

import pytest

from tether.rpc import errors
from tether.rpc.errors import ERRORS, InternalError, NotFound, RpcError

# SPEC §2, copied by hand so a renumbering in code fails here.
SPEC_TABLE = [
    ("ParseError", "parse_error", -32700),
    ("InvalidRequest", "invalid_request", -32600),
    ("MethodNotFound", "method_not_found", -32601),
    ("InvalidParams", "invalid_params", -32602),
    ("InternalError", "internal_error", -32603),
    ("NotFound", "not_found", -32004),
    ("AdmissionConflict", "admission_conflict", -32009),
    ("RuntimeDraining", "runtime_draining", -32010),
    ("UnknownExecution", "unknown_execution", -32011),
    ("Overloaded", "overloaded", -32012),
    ("StorageUnavailable", "storage_unavailable", -32013),
    ("Forbidden", "forbidden", -32003),
]


def test_registry_is_exactly_the_spec_table_in_order():
    assert [(c.__name__, r, c.code) for r, c in ERRORS.items()] == SPEC_TABLE


@pytest.mark.parametrize(("name", "reason", "code"), SPEC_TABLE)
def test_each_error_round_trips_through_the_wire(name, reason, code):
    cls = getattr(errors, name)
    err = cls("session s1 is gone", session_id="s1", attempt=2)
    wire = err.to_wire()
    assert wire == {
        "code": code,
        "message": reason,
        "data": {
            "reason": reason,
            "detail": "session s1 is gone",
            "session_id": "s1",
            "attempt": 2,
        },
    }
    back = RpcError.from_wire(wire)
    assert type(back) is cls
    assert (back.code, back.reason, back.detail) == (code, reason, "session s1 is gone")
    assert back.data == {"session_id": "s1", "attempt": 2}
    assert isinstance(back, RpcError) and isinstance(back, Exception)


def test_defaults_detail_empty_and_no_extras():
    wire = NotFound().to_wire()
    assert wire == {
        "code": -32004,
        "message": "not_found",
        "data": {"reason": "not_found", "detail": ""},
    }


def test_unknown_reason_keeps_code_and_reason():
    err = RpcError.from_wire(
        {
            "code": -32077,
            "message": "quota_exhausted",
            "data": {"reason": "quota_exhausted", "detail": "x", "n": 1},
        }
    )
    assert type(err) is RpcError
    assert (err.code, err.reason, err.detail, err.data) == (
        -32077,
        "quota_exhausted",
        "x",
        {"n": 1},
    )
    # and it goes back out unchanged
    assert err.to_wire()["code"] == -32077
    assert err.to_wire()["message"] == "quota_exhausted"
    # the class attributes were not touched
    assert (RpcError.code, RpcError.reason) == (-32000, "rpc_error")


def test_foreign_error_without_data_uses_message_as_reason():
    err = RpcError.from_wire({"code": -32601, "message": "method_not_found"})
    assert type(err) is errors.MethodNotFound
    foreign = RpcError.from_wire({"code": 7, "message": "Something broke"})
    assert (type(foreign), foreign.code, foreign.reason, foreign.detail) == (
        RpcError,
        7,
        "Something broke",
        "",
    )


@pytest.mark.parametrize("junk", [None, [], "boom", {"data": 3}, {"code": True, "message": 5}])
def test_from_wire_tolerates_malformed_objects(junk):
    err = RpcError.from_wire(junk)
    assert isinstance(err, RpcError)
    assert err.reason == "rpc_error"


def test_reserved_data_keys_are_refused():
    with pytest.raises(TypeError, match="reserved"):
        NotFound("x", reason="other")


def test_str_and_repr_are_readable():
    err = NotFound("no session s1", session_id="s1")
    assert str(err) == "not_found: no session s1"
    assert repr(err) == "NotFound('no session s1', session_id='s1')"
    assert str(InternalError()) == "internal_error"


def test_errors_pickle_with_their_extras_and_foreign_codes():
    err = pickle.loads(pickle.dumps(NotFound("gone", session_id="s1")))
    assert type(err) is NotFound and err.data == {"session_id": "s1"} and err.detail == "gone"
    foreign = RpcError.from_wire({"code": -1, "message": "odd", "data": {"reason": "odd"}})
    back = pickle.loads(pickle.dumps(foreign))
    assert (back.code, back.reason) == (-1, "odd")


def test_duplicate_reason_is_refused():
    with pytest.raises(TypeError, match="duplicate"):

        class Again(RpcError):
            code = -1
            reason = "not_found"

    assert ERRORS["not_found"] is NotFound


def test_local_subclass_travels_as_its_parent_reason():
    class SessionGone(NotFound):
        pass

    wire = SessionGone("s").to_wire()
    assert wire["message"] == "not_found" and wire["code"] == -32004
    assert type(RpcError.from_wire(wire)) is NotFound
