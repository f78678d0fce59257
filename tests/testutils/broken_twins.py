"""Correct rules and their broken twins: each twin differs from its original by one defect.

`test_broken_twins.py` checks that every original passes every check and that
the kit rejects every twin, naming the check that its defect breaks. A kit that
passes a twin, or names another check, is a failing kit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg.blas import dgemm

from rulekit import CoDual, NoFData, NoRData, StatefulRRule, TracingError, zero_fdata

NO_R, NO_F = NoRData(), NoFData()

# -- primal functions -----------------------------------------------------------------------


def softsign(x: Any) -> Any:
    return x / (1 + np.abs(x))


def csquare(z: np.ndarray) -> np.ndarray:
    return z * z


def cube(x: np.ndarray) -> Any:
    return x**3


def scal_(a: float, y: np.ndarray) -> None:
    """y ← a·y, in place."""
    y *= a


def gemm_(alpha: float, A: np.ndarray, B: np.ndarray, beta: float, C: np.ndarray) -> None:
    """C ← αAB + βC, in place."""
    C *= beta
    C += alpha * (A @ B)


def first_row(x: np.ndarray) -> np.ndarray:
    return x[0]


def flat_copy(x: np.ndarray) -> np.ndarray:
    return x.flatten()


def add_bias(x: np.ndarray, b: np.ndarray) -> np.ndarray:
    return x + b


def total(x: np.ndarray) -> Any:
    return np.sum(x)


def blas_gemm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A·B by scipy's dgemm (f2py copies C-ordered operands to Fortran order)."""
    return dgemm(1.0, a, b)


def tiny_slope(c: float, x: float) -> float:
    """c·x³ + sin x: at x ≈ 1e-90 the derivative in c (x³) is far below the value."""
    return c * x**3 + np.sin(x)


# -- correct rules ----------------------------------------------------------------------------


def softsign_rule(f: CoDual, x: CoDual) -> Any:
    """y = x / (1 + |x|) ⇒ x̄ += ȳ / (1 + |x|)²; 0-d arrays and scalars too."""
    value = softsign(x.x)
    y = CoDual(value, zero_fdata(value))  # a numpy scalar (0-d input) gets NoFData

    def pullback(dy: Any) -> tuple[Any, ...]:
        g = y.dx if isinstance(y.dx, np.ndarray) else dy
        if x.dx is None:
            return NO_R, NO_R
        d = g / (1 + np.abs(x.x)) ** 2
        if isinstance(x.dx, np.ndarray):
            x.dx += d
            return NO_R, NO_R
        return NO_R, type(x.x)(d)  # a scalar input: its cotangent is rdata

    return y, pullback


def csquare_rule(f: CoDual, z: CoDual) -> Any:
    """y = z² (holomorphic) ⇒ z̄ += conj(2z)·ȳ (PyTorch's convention)."""
    y = CoDual(z.x * z.x, np.zeros_like(z.x))

    def pullback(dy: Any) -> tuple[Any, ...]:
        if z.dx is not None:
            z.dx += np.conj(2 * z.x) * y.dx
        return NO_R, NO_R

    return y, pullback


class CubeRule(StatefulRRule):
    """y = x³ ⇒ x̄ += 3x²·ȳ; output, fdata and work buffers pooled: no allocation once warm.

    A 0-d input gives a 0-d output array (numpy gives a scalar): rules may do that.
    """

    def __call__(self, f: CoDual, x: CoDual) -> Any:
        X = x.x
        ytok, dtok = self.push(X.shape, X.dtype), self.push(X.shape, X.dtype)
        y, dy = ytok.buffer, dtok.buffer
        np.multiply(X, X, out=y)
        np.multiply(y, X, out=y)
        dy.fill(0)

        def pullback(_: Any) -> tuple[Any, ...]:
            if x.dx is not None:
                self.accumulate(X, dy, x.dx)
            self.pop(dtok)
            self.pop(ytok)
            return NO_R, NO_R

        return CoDual(y, dy), pullback

    def accumulate(self, X: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
        """dx += 3·X²·dy through scratch buffers."""
        t = self.scratch("t", X.shape, X.dtype)
        three = self.scratch("three", (), X.dtype)  # (a Python 3.0 operand would allocate)
        three.fill(3)
        np.multiply(X, X, out=t)
        np.multiply(t, dy, out=t)
        np.multiply(t, three, out=t)
        np.add(dx, t, out=dx)


class ScalRule(StatefulRRule):
    """y ← a·y ⇒ ā = ⟨ȳ, y_old⟩, ȳ ← a·ȳ, y ← y_old; y_old kept on the rule's stack."""

    def __call__(self, f: CoDual, a: CoDual, y: CoDual) -> Any:
        if y.dx is None and a.dx is not None:
            raise TracingError("scal_: an active a written into a constant y")
        tok = self.save(y.x)
        np.multiply(y.x, self.scalar(a.x), out=y.x)

        def pullback(dy: Any) -> tuple[Any, ...]:
            ra = NO_R
            if y.dx is not None:
                if a.dx is not None:
                    ra = type(a.x)(self.dot(y.dx, tok.buffer))
                self.scale_cotangent(y.dx, a.x)
            self.restore_y(tok, y.x)
            return NO_R, ra, NO_R

        return CoDual(None, NO_F), pullback

    def scale_cotangent(self, ybar: np.ndarray, a: float) -> None:
        np.multiply(ybar, self.scalar(a), out=ybar)

    def restore_y(self, tok: Any, y: np.ndarray) -> None:
        self.restore(tok, into=y)

    def dot(self, u: np.ndarray, v: np.ndarray) -> float:
        """⟨u, v⟩ through scratch buffers (np.vdot would allocate its 0-d result)."""
        t, s = self.scratch("t", u.shape, u.dtype), self.scratch("total", (), u.dtype)
        np.multiply(u, v, out=t)
        np.sum(t, out=s)
        return float(s[()])

    def scalar(self, a: float) -> np.ndarray:
        s = self.scratch("a", (), np.float64)
        s.fill(a)
        return s


class GemmRule(StatefulRRule):
    """C ← αAB + βC (Mooncake's convention, docs/stateful-rules.md): Ā += α C̄ Bᵀ, B̄ += α Aᵀ C̄,
    ᾱ = ⟨C̄, AB⟩, β̄ = ⟨C̄, C_old⟩, then C̄ ← β C̄ and C ← C_old. Refuses active values
    written into a constant C; allocates nothing once warm."""

    def __call__(self, f: CoDual, alpha: CoDual, A: CoDual, B: CoDual, beta: CoDual,
                 C: CoDual) -> Any:  # fmt: skip
        if self.refuses(alpha, A, B, beta, C):
            raise TracingError("gemm_: active values written into a constant C")
        a, b = alpha.x, beta.x
        tok = self.save(C.x)
        AB = self.scratch("AB", C.x.shape, C.x.dtype)
        np.matmul(A.x, B.x, out=AB)
        np.multiply(AB, self.scalar("alpha", a), out=AB)
        np.multiply(C.x, self.scalar("beta", b), out=C.x)
        np.add(C.x, AB, out=C.x)

        def pullback(dy: Any) -> tuple[Any, ...]:
            dalpha: Any = NO_R
            dbeta: Any = NO_R
            Cbar = C.dx
            if Cbar is not None:
                if alpha.dx is not None:
                    AB = self.scratch("AB", Cbar.shape, Cbar.dtype)
                    np.matmul(A.x, B.x, out=AB)
                    dalpha = type(a)(self.dot(Cbar, AB))
                if beta.dx is not None:
                    dbeta = self.beta_bar(b, Cbar, tok.buffer)
                if A.dx is not None:
                    t = self.scratch("A", A.x.shape, A.x.dtype)
                    np.matmul(Cbar, B.x.T, out=t)
                    np.multiply(t, self.scalar("alpha", a), out=t)
                    np.add(A.dx, t, out=A.dx)
                if B.dx is not None:
                    t = self.scratch("B", B.x.shape, B.x.dtype)
                    np.matmul(A.x.T, Cbar, out=t)
                    np.multiply(t, self.scalar("alpha", a), out=t)
                    np.add(B.dx, t, out=B.dx)
                np.multiply(Cbar, self.scalar("beta", b), out=Cbar)
            self.restore(tok, into=C.x)
            return NO_R, dalpha, NO_R, NO_R, dbeta, NO_R

        return CoDual(None, NO_F), pullback

    def refuses(self, *args: CoDual) -> bool:
        *others, C = args
        return C.dx is None and any(a.dx is not None for a in others)

    def beta_bar(self, b: float, Cbar: np.ndarray, C_old: np.ndarray) -> Any:
        return type(b)(self.dot(Cbar, C_old))

    def dot(self, u: np.ndarray, v: np.ndarray) -> float:
        t, s = self.scratch("t", u.shape, u.dtype), self.scratch("total", (), u.dtype)
        np.multiply(u, v, out=t)
        np.sum(t, out=s)
        return float(s[()])

    def scalar(self, name: str, v: float) -> np.ndarray:
        s = self.scratch(name, (), np.float64)
        s.fill(v)
        return s


def first_row_rule(f: CoDual, x: CoDual) -> Any:
    """y = x[0], a view ⇒ its fdata is the same view of x̄: nothing to do in the pullback."""
    return CoDual(x.x[0], None if x.dx is None else x.dx[0]), lambda dy: (NO_R, NO_R)


def flat_copy_rule(f: CoDual, x: CoDual) -> Any:
    """y = x.flatten(), new memory ⇒ x̄ += ȳ reshaped."""
    y = CoDual(x.x.flatten(), np.zeros(x.x.size, x.x.dtype))

    def pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None:
            x.dx += y.dx.reshape(x.x.shape)
        return NO_R, NO_R

    return y, pullback


def add_bias_rule(f: CoDual, x: CoDual, b: CoDual) -> Any:
    """y = x + b (b broadcast along the leading axes) ⇒ x̄ += ȳ, b̄ += Σ over them of ȳ."""
    y = CoDual(x.x + b.x, np.zeros(np.broadcast_shapes(x.x.shape, b.x.shape)))

    def pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None:
            x.dx += y.dx
        if b.dx is not None:
            b.dx += y.dx.reshape(-1, *b.x.shape).sum(axis=0)
        return NO_R, NO_R, NO_R

    return y, pullback


def total_rule(f: CoDual, x: CoDual) -> Any:
    """y = Σx as a 0-d array with fdata (numpy returns a scalar: rules may do that)."""
    y = CoDual(np.array(np.sum(x.x)), np.zeros((), x.x.dtype))

    def pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None:
            x.dx += y.dx
        return NO_R, NO_R

    return y, pullback


class BlasGemmRule(StatefulRRule):
    """y = A·B by dgemm into a pooled F-ordered buffer ⇒ Ā += ȳ Bᵀ, B̄ += Aᵀ ȳ.

    f2py copies C-ordered operands (two allocations per call), as the primal call
    `dgemm(1.0, a, b)` does: the kit allows that many, no more.
    """

    def __call__(self, f: CoDual, a: CoDual, b: CoDual) -> Any:
        A, B = a.x, b.x
        m, n = A.shape[0], B.shape[1]
        ytok, dtok = self.push((n, m), A.dtype), self.push((n, m), A.dtype)
        y, dy = ytok.buffer.T, dtok.buffer.T  # Fortran-ordered (m, n)
        dgemm(1.0, A, B, c=y, overwrite_c=1)
        dy.fill(0)

        def pullback(_: Any) -> tuple[Any, ...]:
            if a.dx is not None:
                t = self.scratch("a", A.shape, A.dtype)
                np.matmul(dy, B.T, out=t)
                np.add(a.dx, t, out=a.dx)
            if b.dx is not None:
                t = self.scratch("b", B.shape, B.dtype)
                np.matmul(A.T, dy, out=t)
                np.add(b.dx, t, out=b.dx)
            self.pop(dtok)
            self.pop(ytok)
            return NO_R, NO_R, NO_R

        return CoDual(y, dy), pullback


def tiny_slope_rule(f: CoDual, c: CoDual, x: CoDual) -> Any:
    """y = c·x³ + sin x ⇒ c̄ = ȳ·x³, x̄ = ȳ·(3c·x² + cos x)."""
    y = tiny_slope(c.x, x.x)

    def pullback(dy: Any) -> tuple[Any, ...]:
        dc = type(c.x)(dy * x.x**3) if c.dx is not None else NO_R
        dx = type(x.x)(dy * (3 * c.x * x.x**2 + np.cos(x.x))) if x.dx is not None else NO_R
        return NO_R, dc, dx

    return CoDual(y, zero_fdata(y)), pullback


# -- broken twins: one defect each ------------------------------------------------------------


def overwrites_fdata(f: CoDual, x: CoDual) -> Any:
    y = CoDual(softsign(x.x), np.zeros_like(x.x))

    def pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None:
            x.dx[...] = y.dx / (1 + np.abs(x.x)) ** 2  # `=` where `+=` belongs
        return NO_R, NO_R

    return y, pullback


def contiguous_only(f: CoDual, x: CoDual) -> Any:
    y, pb = softsign_rule(f, x)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if x.x.flags.c_contiguous:  # a "fast path" only: views and F order get nothing
            return pb(dy)
        return NO_R, NO_R

    return y, pullback


def arrays_only(f: CoDual, x: CoDual) -> Any:
    value = softsign(x.x)
    y = CoDual(value, np.zeros_like(value))  # a 0-d input gives a numpy scalar: NoFData

    def pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None:
            x.dx += y.dx / (1 + np.abs(x.x)) ** 2
        return NO_R, NO_R

    return y, pullback


def wrong_dtype(f: CoDual, x: CoDual) -> Any:
    value = softsign(x.x.astype(np.float64))  # float32 in, float64 out
    y = CoDual(value, np.zeros_like(value))

    def pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None:
            x.dx += (y.dx / (1 + np.abs(x.x)) ** 2).astype(x.x.dtype)
        return NO_R, NO_R

    return y, pullback


def crashes_on_constant(f: CoDual, x: CoDual) -> Any:
    y = CoDual(softsign(x.x), np.zeros_like(x.x))

    def pullback(dy: Any) -> tuple[Any, ...]:
        x.dx += y.dx / (1 + np.abs(x.x)) ** 2  # x.dx is None when x is a constant
        return NO_R, NO_R

    return y, pullback


def missing_conj(f: CoDual, z: CoDual) -> Any:
    y = CoDual(z.x * z.x, np.zeros_like(z.x))

    def pullback(dy: Any) -> tuple[Any, ...]:
        if z.dx is not None:
            z.dx += 2 * z.x * y.dx  # conj(2z) belongs here
        return NO_R, NO_R

    return y, pullback


class StaleCacheCube(CubeRule):
    """Caches 3x² per shape on the first call: later calls of that shape use stale values."""

    def __init__(self) -> None:
        super().__init__()
        self.deriv: dict[tuple[int, ...], np.ndarray] = {}

    def accumulate(self, X: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
        d = self.deriv.setdefault(X.shape, 3 * X**2)
        np.add(dx, d * dy, out=dx)


_SHARED: dict[tuple[int, ...], np.ndarray] = {}


def global_cache_cube(f: CoDual, x: CoDual) -> Any:
    """A plain rule with a module-level cache of 3x² per shape (keyed by shape alone)."""
    X = x.x
    y = CoDual(X**3, np.zeros_like(X))
    d = _SHARED.setdefault(X.shape, 3 * X**2)

    def pullback(_: Any) -> tuple[Any, ...]:
        if x.dx is not None:
            x.dx += d * y.dx
        return NO_R, NO_R

    return y, pullback


class NotReentrantCube(CubeRule):
    """Reads the output cotangent of the latest call (an attribute), not of its own call."""

    def __call__(self, f: CoDual, x: CoDual) -> Any:
        y, pb = super().__call__(f, x)
        self.latest = y.dx
        return y, pb

    def accumulate(self, X: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
        super().accumulate(X, self.latest, dx)


class AllocatingCube(CubeRule):
    def accumulate(self, X: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
        dx += 3 * X**2 * dy  # three temporaries on every call


class FirstLayoutCube(CubeRule):
    """Remembers the memory order of the first call and reuses it for every later one."""

    order: str | None = None

    def accumulate(self, X: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
        now = "F" if X.flags.f_contiguous and not X.flags.c_contiguous else "C"
        if self.order is None:
            self.order = now
        flat = 3 * np.ravel(X, order=self.order) ** 2 * np.ravel(dy, order=self.order)
        dx += flat.reshape(X.shape, order=now)  # right only while the order is the first one


class BadRestoreScal(ScalRule):
    def restore_y(self, tok: Any, y: np.ndarray) -> None:
        y[0] = tok.buffer[0]  # only the first row comes back
        self.pop(tok)


class ForgetsCotangentScal(ScalRule):
    def scale_cotangent(self, ybar: np.ndarray, a: float) -> None:
        pass  # ȳ should become a·ȳ, the cotangent of y_old


class SharedBufferScal(ScalRule):
    """Keeps y_old in one scratch buffer for every pending call (not a stack)."""

    def __call__(self, f: CoDual, a: CoDual, y: CoDual) -> Any:
        old = self.scratch("old", y.x.shape, y.x.dtype)
        np.copyto(old, y.x)
        np.multiply(y.x, self.scalar(a.x), out=y.x)

        def pullback(dy: Any) -> tuple[Any, ...]:
            ra = NO_R
            if y.dx is not None:
                if a.dx is not None:
                    ra = type(a.x)(self.dot(y.dx, old))
                np.multiply(y.dx, self.scalar(a.x), out=y.dx)
            np.copyto(y.x, old)
            return NO_R, ra, NO_R

        return CoDual(None, NO_F), pullback


class NoBetaGemm(GemmRule):
    def beta_bar(self, b: float, Cbar: np.ndarray, C_old: np.ndarray) -> Any:
        return NO_R  # β̄ = ⟨C̄, C_old⟩ forgotten


class OverRefusingGemm(GemmRule):
    def refuses(self, *args: CoDual) -> bool:
        return args[1].dx is not None  # refuses whenever A is active: that is no write-in


def copies_a_view(f: CoDual, x: CoDual) -> Any:
    y = x.x[0].copy()  # numpy's x[0] is a view
    return CoDual(y, np.zeros_like(y)), lambda dy: (NO_R, NO_R)


def views_a_copy(f: CoDual, x: CoDual) -> Any:
    y = x.x.reshape(-1)  # numpy's flatten copies; this is a view
    return CoDual(y, None if x.dx is None else x.dx.reshape(-1)), lambda dy: (NO_R, NO_R)


def forgets_broadcast_sum(f: CoDual, x: CoDual, b: CoDual) -> Any:
    y = CoDual(x.x + b.x, np.zeros(np.broadcast_shapes(x.x.shape, b.x.shape)))

    def pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None:
            x.dx += y.dx
        if b.dx is not None:
            b.dx += y.dx.reshape(-1, *b.x.shape)[0]  # the first row only, not the sum
        return NO_R, NO_R, NO_R

    return y, pullback


class CopyingBlasGemm(BlasGemmRule):
    """Saves a copy of A on every call: one allocation more than the primal makes."""

    def __call__(self, f: CoDual, a: CoDual, b: CoDual) -> Any:
        self.kept = a.x.copy()
        return super().__call__(f, a, b)
