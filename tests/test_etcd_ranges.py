"""The reach of etcd permissions and the arithmetic on key ranges that judges it (validation/checks/etcd_ranges.py).

etcd's rule for one permission (etcd-io/etcd server/auth/range_perm_cache.go@v3.5.1, getMergedPerms;
pkg/adt/interval_tree.go@v3.5.1, BytesAffineComparable): no range_end is the key alone, a range_end of one
zero byte has no end, else [key, range_end). The Hypothesis tests hold the arithmetic to that rule key by key.
"""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from validation.checks.etcd_ranges import (
    Permission,
    Span,
    UnreadablePermission,
    intersection,
    minus,
    permissions,
    prefix_range,
    reach,
    tenant_range,
    union,
)

# Short keys over a few bytes, so that spans meet, touch and nest often; 0x00 and 0xff are etcd's edge bytes.
keys = st.binary(max_size=4).map(lambda raw: bytes(b"\x00/a0\xff"[byte % 5] for byte in raw))
range_ends = st.one_of(st.just(b""), st.just(b"\0"), keys)
spans = st.builds(reach, keys, range_ends)


def reached(key: bytes, range_end: bytes, probe: bytes) -> bool:
    """etcd's rule, written out for one key."""
    if range_end == b"\0":
        return probe >= key
    if not range_end or range_end <= key:
        return probe == key
    return key <= probe < range_end


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@given(keys, range_ends, keys)
def test_a_permission_reaches_the_keys_etcds_rule_gives_it(key, range_end, probe):
    assert (probe in reach(key, range_end)) == reached(key, range_end, probe)


@given(st.lists(spans, max_size=5), keys)
def test_the_union_holds_a_key_exactly_when_one_of_its_spans_does(parts, probe):
    joined = union(parts)

    assert any(probe in span for span in joined) == any(probe in span for span in parts)
    # Sorted, disjoint and not touching: two spans that could be one are one.
    for before, after in zip(joined, joined[1:], strict=False):
        assert before.stop is not None and before.stop < after.start


@given(st.lists(spans, max_size=5), spans, keys)
def test_what_is_left_holds_a_key_exactly_when_the_spans_do_and_the_taken_span_does_not(parts, taken, probe):
    left = minus(parts, taken)

    assert any(probe in span for span in left) == (any(probe in span for span in parts) and probe not in taken)


@given(spans, spans, keys)
def test_an_intersection_holds_the_keys_of_both(one, other, probe):
    both = intersection(one, other)

    assert (both is not None and probe in both) == (probe in one and probe in other)


@given(keys.filter(bool), keys)
def test_a_prefix_range_holds_the_keys_starting_with_the_prefix(prefix, probe):
    assert (probe in prefix_range(prefix)) == probe.startswith(prefix)


def test_kamajis_grant_is_the_schemas_prefix_and_ends_at_the_byte_after_the_slash():
    assert tenant_range("tenants_tenant_a") == Span(b"/tenants_tenant_a/", b"/tenants_tenant_a0")
    assert str(tenant_range("tenants_tenant_a")) == "[/tenants_tenant_a/, /tenants_tenant_a0)"


def test_two_adjacent_grants_cover_the_same_keys_as_kamajis_one():
    halves = [
        reach(b"/tenants_tenant_a/", b"/tenants_tenant_a/m"),
        reach(b"/tenants_tenant_a/m", b"/tenants_tenant_a0"),
    ]

    assert union(halves) == [tenant_range("tenants_tenant_a")]
    assert minus(halves, tenant_range("tenants_tenant_a")) == []


def test_a_range_without_the_trailing_slash_reaches_a_look_alike_schema_and_the_next_one():
    without_slash = reach(b"/tenants_tenant_a", b"/tenants_tenant_b")

    beyond = minus([without_slash], tenant_range("tenants_tenant_a"))

    assert [str(span) for span in beyond] == [
        "[/tenants_tenant_a, /tenants_tenant_a/)",
        "[/tenants_tenant_a0, /tenants_tenant_b)",
    ]
    assert b"/tenants_tenant_a_2/configmaps" in beyond[1]
    assert b"/tenants_tenant_b/configmaps" not in beyond[1]


def test_spans_are_worded_as_a_key_a_range_or_open_ended():
    assert str(reach(b"/registry", b"")) == "key /registry"
    assert str(reach(b"/", b"\0")) == "[/, <open ended>"
    assert str(reach(b"/a/", b"/a0")) == "[/a/, /a0)"


def test_permissions_read_etcdctls_json_leaving_out_read_and_an_empty_range_end():
    # etcdctl 3.5.1's role get -w json for READ [/x, <open ended> and WRITE on the key \0.
    document = {"perm": [{"permType": 1, "key": "AA=="}, {"key": "L3g=", "range_end": "AA=="}]}

    assert permissions(document) == [Permission("WRITE", b"\0", b""), Permission("READ", b"/x", b"\0")]
    assert permissions({"header": {}}) == []


@pytest.mark.parametrize(
    "permission",
    [{"permType": 7, "key": b64(b"/a")}, {"key": "not base64!"}, "READ /a", {"key": 5}],
    ids=["unknown-type", "bad-base64", "not-an-object", "key-not-a-string"],
)
def test_a_permission_etcdctl_would_not_print_is_refused_not_guessed(permission):
    with pytest.raises(UnreadablePermission):
        permissions({"perm": [permission]})


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(["key", "range_end", "permType", "x"]), inner, max_size=3)
        ),
        max_leaves=6,
    )
)
def test_any_json_in_place_of_a_permission_is_read_or_refused_never_crashes(permission):
    try:
        found = permissions({"perm": [permission]})
    except UnreadablePermission:
        return
    assert len(found) == 1 and found[0].kind in {"READ", "WRITE", "READWRITE"}


@given(st.binary(max_size=8), range_ends)
def test_a_span_is_worded_on_one_printable_line_whatever_bytes_its_keys_hold(key, range_end):
    worded = str(reach(key, range_end))

    assert worded.isprintable()


def test_role_roots_zero_byte_start_is_shown_escaped():
    assert str(reach(b"\0", b"\0")) == "[\\x00, <open ended>"
