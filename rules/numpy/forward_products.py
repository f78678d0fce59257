"""Forward rules and differentiable pullbacks for products: matmul/@, dot, inner, outer,
vdot, einsum, tensordot (and np.linalg.tensordot), kron.

Every one of them is bilinear (einsum: multilinear) in its array operands, so

    forward:   ẏ = Σₖ f(x₁, …, ẋₖ, …, xₙ)        (the call with operand k replaced by its tangent)
    pullback:  x̄ₖ = ∂f/∂xₖᴴ ȳ                     (ȳ contracted with the conjugated other operands)

The pullbacks are plain NumPy on their arguments (matmul, einsum, reshape, conj, sums), so
they are differentiated again when the arguments are traced: the products are twice (and
more times) differentiable. Cotangents have their operand's shape and dtype (a real operand
of a complex product takes the real part; a scalar operand gets the sum over what it was
broadcast to). Registered with `register_like` on the reverse rules' patterns (the `out=`
forms, which mutate, get no rules here).
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import rulekit
from rulekit import Dual
from rulekit._declared_rules import shaped_like
from rules._support.forward import register_like
from rules.numpy import contractions as _contractions  # noqa: F401  (reverse rules first)
from rules.numpy import matmul as _matmul  # noqa: F401
from rules.numpy.contractions import _td_axes, parse_einsum
from rules.numpy.reductions.forward_common import cot_like
from rules.numpy.reductions.forward_common import kind as _kind

__all__ = ["bilinear_frule", "einsum_frule", "einsum_vjp", "product_vjp"]

_LETTERS = string.ascii_uppercase + string.ascii_lowercase


# -- helpers ----------------------------------------------------------------------------------


def _real_dtype(x: Any) -> Any:
    """The real float dtype matching x's (float64 for numbers and integers)."""
    dt = getattr(x, "dtype", None)
    if dt is None or dt.kind not in "fc":
        return np.float64
    return np.finfo(dt).dtype


def _active(d: Dual) -> bool:
    return d.dx is not None and _kind(d.x) in "fc"


# -- forward: one rule for every multilinear product -------------------------------------------


def bilinear_frule(f: Dual, *args: Dual, **kwargs: Any) -> Dual:
    """ẏ = Σₖ f(…, ẋₖ, …) over the differentiated array/number operands (f multilinear in them;
    strings, subscript lists and `axes` are passed through)."""
    fn = f.x
    xs = [a.x for a in args]
    y = fn(*xs, **kwargs)
    if _kind(y) not in "fc":
        return Dual(y, None)
    t: Any = None
    for k, a in enumerate(args):
        if not _active(a) or isinstance(a.x, (str, list, tuple)):
            continue
        term = fn(*xs[:k], a.dx, *xs[k + 1 :], **kwargs)
        t = term if t is None else t + term
    return Dual(y, None if t is None else shaped_like(t, y))


einsum_frule = bilinear_frule


# -- pullbacks ----------------------------------------------------------------------------------


def _mm_cots(g: Any, A: Any, B: Any, need: Sequence[bool]) -> tuple[Any, Any]:
    """matmul: Ā = Σ_batch Ȳ·Bᴴ, B̄ = Σ_batch Aᴴ·Ȳ (1-D operands promoted as numpy does)."""
    a1, b1 = np.ndim(A) == 1, np.ndim(B) == 1
    Ae = np.expand_dims(A, 0) if a1 else A
    Be = np.expand_dims(B, -1) if b1 else B
    if a1 and b1:
        G = np.reshape(g, (1, 1))
    else:
        G = np.expand_dims(g, -2) if a1 else g
        G = np.expand_dims(G, -1) if b1 else G
    ga = gb = None
    if need[0]:
        ga = G @ np.conj(np.swapaxes(Be, -1, -2))
        ga = np.reshape(rulekit.unbroadcast(ga, np.shape(Ae)), np.shape(A))
    if need[1]:
        gb = np.conj(np.swapaxes(Ae, -1, -2)) @ G
        gb = np.reshape(rulekit.unbroadcast(gb, np.shape(Be)), np.shape(B))
    return ga, gb


def _terms(fn: Any, A: Any, B: Any, rest: Sequence[Any], kw: dict[str, Any]) -> tuple[str, ...]:
    """Einsum terms (a, b, y) of the N-d dot/inner/tensordot call."""
    na, nb = np.ndim(A), np.ndim(B)
    la = _LETTERS[:na]
    lb = list(_LETTERS[na : na + nb])
    if fn is np.dot:  # y[I, J, n] = Σ_k a[I, k]·b[J, k, n]
        lb[max(nb - 2, 0)] = la[-1]
        out = la[:-1] + "".join(c for c in lb if c != la[-1])
    elif fn is np.inner:  # y[I, J] = Σ_k a[I, k]·b[J, k]
        lb[-1] = la[-1]
        out = la[:-1] + "".join(lb[:-1])
    else:  # tensordot
        aa, bb = _td_axes(na, nb, rest[0] if rest else kw.get("axes", 2))
        for i, j in zip(aa, bb, strict=True):
            lb[j] = la[i]
        out = "".join(c for i, c in enumerate(la) if i not in aa)
        out += "".join(c for j, c in enumerate(lb) if j not in bb)
    return la, "".join(lb), out


def _einsum_cot(k: int, terms: Sequence[str], out: str, arrays: Sequence[Any], g: Any) -> Any:
    """x̄ₖ = einsum(ȳ, conj(x_{j≠k}) → xₖ's labels): a label repeated in xₖ (a diagonal)
    multiplies by identity matrices, a label only in xₖ (summed out) by ones."""
    term = terms[k]
    sizes: dict[str, int] = {}
    for t, x in zip(terms, arrays, strict=True):
        for c, n in zip(t, np.shape(x), strict=True):
            sizes[c] = max(sizes.get(c, 1), n)
    others = [j for j in range(len(terms)) if j != k]
    ins = [out, *(terms[j] for j in others)]
    ops: list[Any] = [g, *(np.conj(arrays[j]) for j in others)]
    seen = set("".join(ins))
    free = iter(c for c in reversed(_LETTERS) if c not in sizes)
    target = []
    for i, c in enumerate(term):
        if c in term[:i]:  # a repeated label: a fresh one tied to c by an identity
            c2 = next(free)
            ins.append(c + c2)
            ops.append(np.eye(sizes[c], dtype=_real_dtype(arrays[k])))
            target.append(c2)
        else:
            if c not in seen:
                ins.append(c)
                ops.append(np.ones(sizes[c], dtype=_real_dtype(arrays[k])))
                seen.add(c)
            target.append(c)
    scale = None
    if not out:  # a scalar ȳ multiplies the rest (np.einsum takes no traced number)
        scale, ins, ops = g, ins[1:], ops[1:]
    spec = ",".join(ins) + "->" + "".join(target)
    if ops:
        r = np.einsum(spec, *ops, optimize=len(ops) > 2)
        r = r if scale is None else scale * r
    else:  # a 0-d operand, the only one
        r = scale * np.ones((), _real_dtype(arrays[k]))
    return cot_like(r, arrays[k]) if np.shape(r) != np.shape(arrays[k]) else r


def einsum_vjp(active: Sequence[bool], *operands: Any, **kwargs: Any) -> tuple[Any, Any]:
    """y = einsum(spec, x₁, …, xₙ) ⇒ x̄ₖ = einsum(ȳ, conj(x_{j≠k}) → labels of xₖ) (diagonals
    through identities, summed-out labels through ones; size-1 broadcasting summed back)."""
    y = np.einsum(*operands, **kwargs)
    terms, out, pos = parse_einsum(list(operands))
    arrays = [operands[i] for i in pos]

    def einsum_pullback(g: Any) -> tuple[Any, ...]:
        res: list[Any] = [None] * len(operands)
        for k, i in enumerate(pos):
            if active[i] and _kind(arrays[k]) in "fc":
                res[i] = cot_like(_einsum_cot(k, terms, out, arrays, g), arrays[k])
        return tuple(res)

    return y, einsum_pullback


def _scalar_cots(g: Any, A: Any, B: Any, need: Sequence[bool]) -> tuple[Any, Any]:
    """y = a·b with a scalar operand: ā = Σ ȳ·conj(b), b̄ = Σ ȳ·conj(a) (to each shape)."""
    shape = np.shape(g)

    def as_y(v: Any) -> Any:
        return np.reshape(v, shape) if np.ndim(v) else v

    ga = g * np.conj(as_y(B)) if need[0] else None
    gb = g * np.conj(as_y(A)) if need[1] else None
    return ga, gb


def _kron_cots(g: Any, A: Any, B: Any, need: Sequence[bool]) -> tuple[Any, Any]:
    """kron(a, b) reshaped to (a₀, b₀, a₁, b₁, …) is a ⊗ b: ā = Σ_b ȳ·conj(b), b̄ = Σ_a ȳ·conj(a)."""
    nd = max(np.ndim(A), np.ndim(B))
    sa = (1,) * (nd - np.ndim(A)) + np.shape(A)
    sb = (1,) * (nd - np.ndim(B)) + np.shape(B)
    la, lb = _LETTERS[:nd], _LETTERS[nd : 2 * nd]
    out = "".join(x + z for x, z in zip(la, lb, strict=True))
    G = np.reshape(g, [d for pair in zip(sa, sb, strict=True) for d in pair])
    arrays = [np.reshape(A, sa), np.reshape(B, sb)]
    res = [
        np.reshape(_einsum_cot(k, [la, lb], out, arrays, G), np.shape(x)) if need[k] else None
        for k, x in enumerate((A, B))
    ]
    return res[0], res[1]


def _pair_cots(fn: Any, g: Any, A: Any, B: Any, rest: Sequence[Any], kw: dict[str, Any],
               need: Sequence[bool]) -> tuple[Any, Any]:  # fmt: skip
    if np.ndim(A) == 0 or np.ndim(B) == 0:
        if fn is np.vdot:
            return (np.conj(g) * B if need[0] else None), (g * A if need[1] else None)
        return _scalar_cots(g, A, B, need)
    if fn is np.matmul or (fn in (np.dot, np.inner) and np.ndim(A) <= 2 and np.ndim(B) <= 2
                           and not (fn is np.inner and np.ndim(B) == 2)):  # fmt: skip
        return _mm_cots(g, A, B, need)
    if fn is np.inner and np.ndim(A) <= 2 and np.ndim(B) == 2:  # a @ bᵀ
        ga, gbt = _mm_cots(g, A, np.swapaxes(B, -1, -2), need)
        return ga, (None if gbt is None else np.swapaxes(gbt, -1, -2))
    if fn is np.outer:  # y = ravel(a)[:, None]·ravel(b)[None, :]
        a, b = np.ravel(A), np.ravel(B)
        ga = np.reshape(g @ np.conj(b), np.shape(A)) if need[0] else None
        gb = np.reshape(np.swapaxes(g, 0, 1) @ np.conj(a), np.shape(B)) if need[1] else None
        return ga, gb
    if fn is np.vdot:  # y = Σ conj(a)·b (flattened, C order)
        ga = np.reshape(np.conj(g) * np.ravel(B), np.shape(A)) if need[0] else None
        gb = np.reshape(g * np.ravel(A), np.shape(B)) if need[1] else None
        return ga, gb
    if fn is np.kron:
        return _kron_cots(g, A, B, need)
    terms = _terms(fn, A, B, rest, kw)  # N-d dot / inner, tensordot
    ga = _einsum_cot(0, terms[:2], terms[2], [A, B], g) if need[0] else None
    gb = _einsum_cot(1, terms[:2], terms[2], [A, B], g) if need[1] else None
    return ga, gb


def product_vjp(fn: Any) -> Callable[..., tuple[Any, Any]]:
    """The differentiable pullback of product `fn` (matmul/dot/inner/outer/vdot/kron/
    tensordot): y = f(a, b) ⇒ ā = ∂y/∂aᴴ ȳ, b̄ = ∂y/∂bᴴ ȳ; `rest` (tensordot's axes) gets None."""
    base = np.tensordot if fn is np.linalg.tensordot else fn

    def rule(active: Sequence[bool], a: Any, b: Any, *rest: Any, **kwargs: Any) -> Any:
        if fn is not np.tensordot and fn is not np.linalg.tensordot and kwargs:
            raise NotImplementedError(
                f"{rulekit.function_name(fn)}: keyword arguments {sorted(kwargs)} have no "
                "differentiable pullback; call it without them."
            )
        y = fn(a, b, *rest, **kwargs)
        need = [bool(active[0]) and _kind(a) in "fc", bool(active[1]) and _kind(b) in "fc"]

        def product_pullback(g: Any) -> tuple[Any, ...]:
            ga, gb = _pair_cots(base, g, a, b, rest, kwargs, need)
            return (
                None if ga is None else cot_like(ga, a),
                None if gb is None else cot_like(gb, b),
                *([None] * len(rest)),
            )

        return y, product_pullback

    rule.__name__ = rule.__qualname__ = f"{getattr(fn, '__name__', 'product')}_vjp"
    rule.__doc__ = f"y = {rule.__name__[:-4]}(a, b) ⇒ ā = ∂y/∂aᴴ ȳ, b̄ = ∂y/∂bᴴ ȳ."
    return rule


for _fn in (np.matmul, np.dot, np.inner, np.outer, np.vdot, np.kron, np.tensordot,
            np.linalg.tensordot):  # fmt: skip
    register_like(_fn, frule=bilinear_frule, vjp=product_vjp(_fn))
register_like(np.einsum, frule=einsum_frule, vjp=einsum_vjp)

# ufunc reduce methods and np.ptp: their reverse rules are registered after the reductions
from rules.numpy.reductions import forward_methods as forward_methods  # noqa: E402
