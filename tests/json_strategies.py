"""Hypothesis strategies for values as they arrive from JSON traces: anything, malformed too."""

from __future__ import annotations

from hypothesis import strategies as st

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True),
    st.text(max_size=8),
)
json_values = st.recursive(json_leaf, lambda c: st.lists(c, max_size=4), max_leaves=20)
