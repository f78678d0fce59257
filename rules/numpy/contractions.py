"""Rules for tensor contractions: einsum, tensordot (and linalg.tensordot), kron.

einsum is the workhorse: every call is normalized to explicit single-letter
subscripts (implicit output, ellipsis and the interleaved sublist form
resolved as numpy does), and the adjoint of operand k is an einsum of ȳ with
the conjugated other operands. tensordot and kron are written as einsums for
their adjoints. Complex: x̄ = conj(∂y/∂x)·ȳ, i.e. the other operands enter conjugated.
With a scalar operand, tensordot and kron are products (`scalar_product_rrule` of
rules.numpy._matmul_generic): ā += Σ ȳ·conj(b), b̄ += Σ ȳ·conj(a).
"""

from __future__ import annotations

import string
from collections import Counter
from typing import Any

import numpy as np

import rulekit
from rulekit import Array, CoDual, Vararg
from rules._support.arguments import array_fdata, primal
from rules._support.cotangents import NO_R, accumulate, add_to_fdata, zero_rdata_of
from rules._support.outputs import new_output
from rules.numpy._matmul_generic import register_scalar_products

__all__ = [
    "einsum_rrule",
    "kron_rrule",
    "tensordot_rrule",
]

_LETTERS = string.ascii_uppercase + string.ascii_lowercase  # numpy's sublist label order


# -- einsum machinery ------------------------------------------------------------------------


def parse_einsum(operands: list[Any]) -> tuple[list[str], str, list[int]]:
    """Normalize einsum arguments to (input terms, output term, operand positions).

    Terms are strings of single letters, one per axis (ellipses expanded, implicit
    output made explicit); positions index the array operands in `operands`.
    """
    if isinstance(operands[0], str):
        subs = operands[0].replace(" ", "")
        pos = list(range(1, len(operands)))
        lhs, arrow, rhs = subs.partition("->")
        terms = lhs.split(",")
        out: str | None = rhs if arrow else None
    else:  # interleaved: op0, sub0, op1, sub1, ..., [out]
        nops = len(operands) // 2
        pos = list(range(0, 2 * nops, 2))

        def conv(sub: Any) -> str:
            return "".join("..." if s is Ellipsis else _LETTERS[int(s)] for s in sub)

        terms = [conv(operands[i + 1]) for i in pos]
        out = conv(operands[-1]) if len(operands) % 2 else None
    arrays = [primal(operands[i]) for i in pos]
    if len(terms) != len(arrays):
        raise ValueError("einsum: more operands than subscript terms (or fewer)")
    used = set("".join(terms) + (out or "")) - {"."}
    free = [c for c in reversed(_LETTERS) if c not in used]
    ell_nd = max(
        (np.ndim(x) - (len(t) - 3) for t, x in zip(terms, arrays, strict=True) if "..." in t),
        default=0,
    )
    ell = "".join(free[:ell_nd][::-1]) if ell_nd else ""
    exp_terms = []
    for t, x in zip(terms, arrays, strict=True):
        if "..." in t:
            k = np.ndim(x) - (len(t) - 3)
            t = t.replace("...", ell[ell_nd - k :] if k else "")
        exp_terms.append(t)
    if out is None:
        counts = Counter("".join(exp_terms))
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
    return exp_terms, out, pos


def _unique(term: str) -> str:
    return "".join(dict.fromkeys(term))


def einsum_cotangent(
    k: int, terms: list[str], out: str, arrays: list[np.ndarray], ybar: Any
) -> tuple[np.ndarray, str]:
    """The cotangent of operand k on its unique labels: einsum(ȳ, conj(others)) (+ broadcast).

    Returns (G, labels). Labels of operand k that appear nowhere else were summed in
    the forward, so G is broadcast along them.
    """
    term = terms[k]
    target = _unique(term)
    others = [j for j in range(len(terms)) if j != k]
    seen = set(out).union(*(terms[j] for j in others))
    keep = "".join(c for c in target if c in seen)
    ops = [np.asarray(ybar)] + [np.conj(arrays[j]) for j in others]
    spec = ",".join([out] + [terms[j] for j in others]) + "->" + keep
    big = len(ops) > 2 or sum(np.size(o) for o in ops) > 4096  # BLAS paths pay off
    G = np.einsum(spec, *ops, optimize="greedy" if big else False)
    if keep != target:
        size = dict(zip(term, np.shape(arrays[k]), strict=True))
        G = G.reshape([G.shape[keep.index(c)] if c in keep else 1 for c in target])
        G = np.broadcast_to(G, [G.shape[i] if c in keep else size[c] for i, c in enumerate(target)])
    return G, target


def add_scatter(cd: CoDual, term: str, target: str, G: np.ndarray) -> None:
    """Increment operand `cd` (axes labelled `term`) by G (labelled `target`, unique labels).

    Repeated labels (diagonals, traces) are written into a diagonal view of the fdata;
    axes of size 1 that were broadcast are summed.
    """
    dx = array_fdata(cd)
    if dx is None:
        return
    shape: dict[str, int] = {}
    strides: dict[str, int] = dict.fromkeys(target, 0)
    for c, n, st in zip(term, dx.shape, dx.strides, strict=True):
        shape[c] = n
        strides[c] += st
    view = np.lib.stride_tricks.as_strided(
        dx, [shape[c] for c in target], [strides[c] for c in target], writeable=True
    )
    add_to_fdata(view, G)  # (summed over the size-1 axes G was broadcast along)


def einsum_pullback_into(
    cds: list[CoDual], terms: list[str], out: str, arrays: list[np.ndarray], ybar: Any
) -> None:
    """Increment every active operand by its einsum cotangent."""
    for k, cd in enumerate(cds):
        if array_fdata(cd) is not None:
            G, target = einsum_cotangent(k, terms, out, arrays, ybar)
            add_scatter(cd, terms[k], target, G)


def _einsum_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(40)
    n = rng.normal
    ex = rulekit.example
    return [
        ex("ij,jk->ik", n(size=(2, 3)), n(size=(3, 4))),
        ex("ij,jk", n(size=(2, 3)), n(size=(3, 4))),  # implicit output
        ex("ii->i", n(size=(3, 3))),  # diagonal: a view
        ex("ii", n(size=(3, 3))),  # trace: a scalar
        ex("iij->ji", n(size=(3, 3, 2))),
        ex("i,i", n(size=4), n(size=4)),
        ex("...ij,...jk->...ik", n(size=(2, 2, 3)), n(size=(3, 2))),
        ex("bi,bj,bk->ijk", n(size=(2, 3)), n(size=(2, 2)), n(size=(2, 2))),
        ex("ij,jk,kl->il", n(size=(2, 3)), n(size=(3, 3)), n(size=(3, 2)), optimize=True),
        ex("ij,k->ijk", n(size=(2, 1)), n(size=3)),
        ex("ij->", n(size=(2, 3))),
        ex("ij,ij->ij", n(size=(2, 1)), n(size=(2, 3))),  # size-1 broadcasting
        ex("ij,jk->ik", n(size=(2, 3)) + 1j * n(size=(2, 3)), n(size=(3, 2))),
    ]


def _einsum_rule(f: CoDual, *operands: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = einsum(spec, x₁, …, xₙ) ⇒ x̄ₖ += einsum(ȳ, conj(x_{j≠k}) → labels of xₖ).

    Repeated labels of xₖ (e.g. 'ii->i', 'ii'): the cotangent lands on the diagonal
    (a diagonal view of x̄ₖ); labels only in xₖ (summed out): broadcast. A
    single-operand einsum that numpy returns as a view gets the same view of x̄ as fdata.
    """
    primals = [primal(o) for o in operands]
    y = np.einsum(*primals, **kwargs)
    terms, out_term, pos = parse_einsum(primals)
    cds = [operands[i] for i in pos]
    arrays = [primals[i] for i in pos]
    nr = tuple(zero_rdata_of(o) if isinstance(primal(o), np.ndarray) else NO_R for o in operands)
    if len(pos) == 1 and isinstance(y, np.ndarray) and np.may_share_memory(y, arrays[0]):
        dx = array_fdata(cds[0])
        ydx = None
        if dx is not None:
            ydx = np.einsum(*[dx if i == pos[0] else p for i, p in enumerate(primals)], **kwargs)
            assert np.shares_memory(ydx, dx), "einsum returned a view of x but not of dx"
        return CoDual(y, ydx), lambda dy: (NO_R, *nr)
    res = new_output(y)

    def pullback(dy: Any) -> tuple[Any, ...]:
        ybar = res.dx if isinstance(res.dx, np.ndarray) else dy
        if isinstance(ybar, (np.ndarray, float, complex, np.number)):
            einsum_pullback_into(cds, terms, out_term, arrays, ybar)
        return (NO_R, *nr)

    return res, pullback


einsum_rrule = rulekit.rrule.register(
    np.einsum, str, Vararg[Array[np.number]], examples=_einsum_examples
)(_einsum_rule)


def _einsum_interleaved_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(45)
    a, b = rng.normal(size=(2, 3)), rng.normal(size=(3, 4))
    return [
        rulekit.example(a, [0, 1], b, [1, 2], [0, 2]),
        rulekit.example(a, [0, 1], b, [1, 2]),  # implicit output
        rulekit.example(rng.normal(size=(2, 3, 3)), [Ellipsis, 0, 0], [Ellipsis, 0]),
    ]


_einsum_interleaved = rulekit.rrule.register(
    np.einsum, Array[np.number], Vararg[Any], examples=_einsum_interleaved_examples
)(_einsum_rule)


# -- tensordot, kron --------------------------------------------------------------------------


def _td_axes(nda: int, ndb: int, axes: Any) -> tuple[list[int], list[int]]:
    try:
        iter(axes)
    except TypeError:
        n = int(axes)
        return list(range(nda - n, nda)), list(range(n))
    aa, bb = axes
    aa = [aa] if isinstance(aa, (int, np.integer)) else list(aa)
    bb = [bb] if isinstance(bb, (int, np.integer)) else list(bb)
    return [int(i) % max(nda, 1) for i in aa], [int(i) % max(ndb, 1) for i in bb]


def _tensordot_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(41)
    n = rng.normal
    ex = rulekit.example
    return [
        ex(n(size=(2, 3, 4)), n(size=(3, 4, 2))),
        ex(n(size=(2, 3)), n(size=(3, 4)), 1),
        ex(n(size=(2, 3, 4)), n(size=(4, 2, 3)), ([1, 2], [2, 0])),
        ex(n(size=(2, 3)), n(size=(4,)), 0),
        rulekit.Example((n(size=(3, 2)), n(size=(2, 3))), {"axes": ([0], [1])}),
        ex(n(size=(2, 3)) + 1j * n(size=(2, 3)), n(size=(3, 2)), 1),
    ]


def _tensordot_rule(f: CoDual, a: CoDual, b: CoDual, *rest: CoDual, **kwargs: Any) -> Any:
    """y = tensordot(a, b, axes): as the einsum with a's contracted axes labelled like b's;
    ā += einsum(ȳ, conj(b)), b̄ += einsum(ȳ, conj(a))."""
    axes = primal(rest[0]) if rest else kwargs.get("axes", 2)
    y = f.x(a.x, b.x, *map(primal, rest), **kwargs)
    A, B = a.x, b.x
    aa, bb = _td_axes(A.ndim, B.ndim, axes)
    la = _LETTERS[: A.ndim]
    lb = list(_LETTERS[A.ndim : A.ndim + B.ndim])
    for i, j in zip(aa, bb, strict=True):
        lb[j] = la[i]
    out_term = "".join(c for i, c in enumerate(la) if i not in aa)
    out_term += "".join(c for j, c in enumerate(lb) if j not in bb)
    terms = [la, "".join(lb)]
    res = new_output(y)

    def pullback(dy: Any) -> tuple[Any, ...]:
        ybar = res.dx if isinstance(res.dx, np.ndarray) else dy
        einsum_pullback_into([a, b], terms, out_term, [A, B], ybar)
        return (NO_R, NO_R, NO_R, *map(zero_rdata_of, rest))

    return res, pullback


tensordot_rrule = rulekit.rrule.register(
    np.tensordot, Array[np.number], Array[np.number], Vararg[Any], examples=_tensordot_examples
)(_tensordot_rule)
_linalg_tensordot = rulekit.rrule.register(
    np.linalg.tensordot,
    Array[np.number],
    Array[np.number],
    examples=lambda: [e for e in _tensordot_examples() if len(e.args) == 2],
)(_tensordot_rule)


def _kron_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(42)
    n = rng.normal
    return [
        rulekit.example(n(size=(2, 3)), n(size=(3, 2))),
        rulekit.example(n(size=3), n(size=(2, 2))),
        rulekit.example(n(size=(2, 2)) + 1j * n(size=(2, 2)), n(size=(2,))),
    ]


@rulekit.rrule.register(np.kron, Array[np.number], Array[np.number], examples=_kron_examples)
def kron_rrule(f: CoDual, a: CoDual, b: CoDual) -> tuple[CoDual, Any]:
    """y = kron(a, b): y reshaped to (a₀, b₀, a₁, b₁, …) is the outer product a ⊗ b, so
    ā += Σ_b ȳ·conj(b), b̄ += Σ_a ȳ·conj(a) (shapes left-padded with 1s to equal ndim)."""
    y = np.kron(a.x, b.x)
    nd = max(a.x.ndim, b.x.ndim)
    sa = (1,) * (nd - a.x.ndim) + a.x.shape
    sb = (1,) * (nd - b.x.ndim) + b.x.shape
    la, lb = _LETTERS[:nd], _LETTERS[nd : 2 * nd]
    out_term = "".join(x + z for x, z in zip(la, lb, strict=True))
    inter = [d for pair in zip(sa, sb, strict=True) for d in pair]
    arrays = [a.x.reshape(sa), b.x.reshape(sb)]
    res = new_output(y)

    def pullback(dy: Any) -> tuple[Any, ...]:
        ybar = np.reshape(res.dx if isinstance(res.dx, np.ndarray) else dy, inter)
        for k, cd in enumerate((a, b)):
            if array_fdata(cd) is not None:
                G, _ = einsum_cotangent(k, [la, lb], out_term, arrays, ybar)
                accumulate(cd, G.reshape(cd.x.shape))
        return (NO_R, NO_R, NO_R)

    return res, pullback


# a scalar operand (np.kron(x, 2.5), np.tensordot(2.5, x, axes=0)): a product, y = a·b
register_scalar_products(np.tensordot)
register_scalar_products(np.kron)
