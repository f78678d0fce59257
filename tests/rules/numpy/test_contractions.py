"""Tests for rules.numpy.contractions: einsum (random subscripts), tensordot, kron, through
`testutils.check_rule`, plus parsing and aliasing checks."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.contractions  # noqa: F401  (registers the rules under test)
from rulekit import NoRData, zero_codual
from rules.numpy.contractions import parse_einsum
from testutils import check_rule

FAST = settings(max_examples=25, deadline=None)
seeds = st.integers(0, 2**16)


@st.composite
def einsum_calls(draw: Any) -> tuple[str, list[np.ndarray]]:
    """Random einsum calls: 1–3 operands, repeated labels, size-1 broadcasting, implicit
    output, ellipsis."""
    rng = np.random.default_rng(draw(seeds))
    labels = "abcd"
    size = {c: draw(st.integers(1, 3)) for c in labels}
    nops = draw(st.integers(1, 3))
    ell = draw(st.booleans())
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2))) if ell else ()
    terms, arrays = [], []
    for _ in range(nops):
        term = draw(st.lists(st.sampled_from(labels), max_size=3))
        shape = [size[c] for c in term]
        for i, c in enumerate(term):  # broadcast a non-repeated label now and then
            if term.count(c) == 1 and draw(st.integers(0, 4)) == 0:
                shape[i] = 1
        nb = draw(st.integers(0, len(batch))) if ell else 0
        bshape = [1 if draw(st.integers(0, 3)) == 0 else d for d in batch[len(batch) - nb :]]
        terms.append(("..." if ell else "") + "".join(term))
        arrays.append(rng.normal(size=(*bshape, *shape)))
    spec = ",".join(terms)
    if draw(st.booleans()):  # explicit output: unique labels in any order
        used = sorted(set("".join(terms)) - {"."})
        out = draw(st.permutations(used))[: draw(st.integers(0, len(used)))]
        spec += "->" + ("..." if ell else "") + "".join(out)
    return spec, arrays


@FAST
@given(einsum_calls())
def test_einsum_random_subscripts(call: tuple[str, list[np.ndarray]]) -> None:
    spec, arrays = call
    terms, out, _ = parse_einsum([spec, *arrays])
    explicit = ",".join(terms) + "->" + out
    np.testing.assert_allclose(np.einsum(explicit, *arrays), np.einsum(spec, *arrays))
    check_rule(np.einsum, spec, *arrays)


def test_einsum_interleaved_and_optimize() -> None:
    rng = np.random.default_rng(1)
    a, b, c = rng.normal(size=(2, 3)), rng.normal(size=(3, 4)), rng.normal(size=(4, 2))
    check_rule(np.einsum, a, [0, 1], b, [1, 2], [0, 2])
    check_rule(np.einsum, a, [Ellipsis, 1], b, [1, 2])
    check_rule(np.einsum, "ij,jk,kl->il", a, b, c, kwargs={"optimize": "greedy"})
    check_rule(np.einsum, "ij,jk,kl->il", a + 1j * a, b, c, kwargs={"optimize": True})


def test_einsum_views_share_fdata() -> None:
    x = zero_codual(np.random.default_rng(2).normal(size=(3, 3)))
    for spec in ("ii->i", "ij->ji", "...->..."):
        y, pb = rulekit.rrule(zero_codual(np.einsum), zero_codual(spec), x)
        assert np.shares_memory(y.x, x.x) and np.shares_memory(y.dx, x.dx)
        assert pb(NoRData())[2] == NoRData()
    y, _ = rulekit.rrule(zero_codual(np.einsum), zero_codual("ij->i"), x)
    assert not np.shares_memory(y.dx, x.dx)


def test_einsum_trace_writes_the_diagonal() -> None:
    x = zero_codual(np.random.default_rng(3).normal(size=(3, 3)))
    _, pb = rulekit.rrule(zero_codual(np.einsum), zero_codual("ii"), x)
    pb(np.float64(2.0))
    np.testing.assert_array_equal(x.dx, 2 * np.eye(3))


@st.composite
def tensordot_calls(draw: Any) -> tuple[np.ndarray, np.ndarray, Any]:
    rng = np.random.default_rng(draw(seeds))
    sa = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    c = draw(st.integers(0, len(sa)))
    axa = draw(st.permutations(range(len(sa))))[:c]
    nb_free = draw(st.integers(0, 2))
    nb = c + nb_free
    axb = draw(st.permutations(range(nb)))[:c]
    sb = [draw(st.integers(1, 3)) for _ in range(nb)]
    for i, j in zip(axa, axb, strict=True):
        sb[j] = sa[i]
    axes: Any = (list(axa), list(axb))
    if list(axa) == list(range(len(sa) - c, len(sa))) and list(axb) == list(range(c)):
        axes = c  # the int form
    return rng.normal(size=sa), rng.normal(size=sb), axes


@FAST
@given(tensordot_calls())
def test_tensordot(call: tuple[np.ndarray, np.ndarray, Any]) -> None:
    a, b, axes = call
    check_rule(np.tensordot, a, b, axes)
    check_rule(np.linalg.tensordot, a, b, kwargs={"axes": axes})


@FAST
@given(st.lists(st.integers(1, 3), max_size=2), st.lists(st.integers(1, 3), max_size=3), seeds)
def test_kron(sa: list[int], sb: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    check_rule(np.kron, rng.normal(size=sa), rng.normal(size=sb))
