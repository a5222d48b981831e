"""R24 differential: the compiled params walk and its pure-Python spec agree on any params object.

``MethodSpec.parse`` checks every request's params with ``_walk`` (compiled in
wire/_decode.pyx when built). For every method of the table and params drawn
from the values that decide the outcome (each field missing, null, of the
right type, of a near-miss type; ``_meta`` of any type), both walks must
return the same kwargs or the same failing field, and ``parse`` must answer
-32602 naming that field.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_fast.agent import methods
from acp_fast.agent.methods import AGENT_METHODS, _walk_fields, add_undeclared
from acp_fast.wire.errors import InvalidParams

try:
    from acp_fast.wire._decode import walk_fields as _walk_c
except ImportError:  # pragma: no cover - the CI build always has it
    _walk_c = None  # type: ignore[assignment]

SPECS = sorted(AGENT_METHODS)
field_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**65), max_value=2**65),
    st.floats(allow_nan=False),
    st.sampled_from(["/tmp", "tmp", "", "code", "/a/b"]),
    st.lists(
        st.one_of(st.sampled_from(["/x", "y", 1]), st.fixed_dictionaries({"type": st.sampled_from(["text", 1])})),
        max_size=3,
    ),
    st.dictionaries(st.sampled_from(["type", "a"]), st.sampled_from(["text", 2]), max_size=2),
)


@st.composite
def cases(draw: Any) -> tuple[str, dict[str, Any]]:
    method = draw(st.sampled_from(SPECS))
    params: dict[str, Any] = {}
    for field in AGENT_METHODS[method].fields:
        if draw(st.booleans()):
            params[field.wire] = draw(field_values)
    if draw(st.booleans()):
        params["_meta"] = draw(field_values)
    # Undeclared keys: a plain one, a camelCase one, and names that collide with declared ones.
    for key in draw(st.lists(st.sampled_from(["extra", "messageId", "session_id", "field_meta", "cwd_"]), max_size=3)):
        params[key] = draw(field_values)
    return method, params


def _outcome(method: str) -> Any:
    spec = AGENT_METHODS[method]

    def run(params: dict[str, Any]) -> Any:
        try:
            return ("ok", spec.parse(params))
        except InvalidParams as exc:
            return ("err", exc.message, exc.data)

    return run


@pytest.mark.c_extension
@settings(max_examples=600, deadline=None)
@given(cases())
def test_r24_c_and_python_params_walks_agree(case: tuple[str, dict[str, Any]]) -> None:
    if _walk_c is None:
        pytest.fail("the Cython params walk is not built (pip install -e .)")
    method, params = case
    steps = AGENT_METHODS[method]._steps
    assert _walk_c(params, steps, add_undeclared) == _walk_fields(params, steps, add_undeclared)


@settings(max_examples=300, deadline=None)
@given(cases())
def test_r24_parse_answers_the_same_with_either_walk(case: tuple[str, dict[str, Any]]) -> None:
    method, params = case
    parse = _outcome(method)
    used = parse(params)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(methods, "_walk", _walk_fields)
        assert parse(params) == used
    if used[0] == "err":
        assert used[2]["field"] in {f.wire for f in AGENT_METHODS[method].fields}
