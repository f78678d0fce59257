"""The f2py side of the BLAS rules: parameter binding, scipy's copy-or-overwrite rule, flags.

`Routine` is the base of every `rules.blas` rule: it knows its scipy function,
dtype and parameter names (read from the f2py docstring, so positional and
keyword calls bind exactly as scipy binds them), and `begin_output`/`end_output`
implement scipy's rule for the argument a routine writes into: overwritten in
place when f2py can (`f2py_inplace`), else copied into a new F-ordered array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rulekit import CoDual, TracingError
from rules._support.arguments import is_active_scalar
from rules._support.blas_kernels import BlasRule, kernels
from rules._support.cotangents import NO_R, scalar_rdata

__all__ = ["Bound", "Routine", "f2py_inplace", "f2py_params", "op_of", "vec_view"]


def op_of(flag: Any, name: str = "trans") -> str:
    """The op of a BLAS transpose flag: 0/'N' → N, 1/'T' → T, 2/'C' → C."""
    if isinstance(flag, str) and flag.upper() in ("N", "T", "C"):
        return flag.upper()
    try:
        code = int(flag)
    except (TypeError, ValueError):
        code = -1
    if code not in (0, 1, 2):
        raise ValueError(f"{name} must be 0, 1 or 2 (N, T or C), got {flag!r}")
    return "NTC"[code]


def f2py_params(fn: Any) -> tuple[tuple[str, ...], int]:
    """Parameter names of an f2py wrapper, in positional order, and how many are required.

    Read from the first line of its docstring, e.g.
    ``c = dgemm(alpha,a,b,[beta,c,trans_a,trans_b,overwrite_c])``.
    """
    head = (fn.__doc__ or "").split("\n", 1)[0]
    inside = head[head.index("(") + 1 : head.rindex(")")]
    req, _, opt = inside.partition("[")
    required = [n.strip() for n in req.split(",") if n.strip()]
    optional = [n.strip() for n in opt.rstrip("]").split(",") if n.strip()]
    return tuple(required + optional), len(required)


def f2py_inplace(x: Any, dtype: np.dtype, ndim: int) -> bool:
    """Whether f2py hands `x` to Fortran as is (no copy) for an intent(in,out) argument.

    That takes an ndarray of exactly the routine's dtype and rank, aligned and
    Fortran-contiguous; anything else is copied and the copy is returned.
    """
    return (
        type(x) is np.ndarray
        and x.dtype == dtype
        and x.ndim == ndim
        and x.flags.aligned
        and x.flags.f_contiguous
    )


class Bound:
    """One call's arguments bound to an f2py wrapper's parameter names.

    Positional arguments are CoDuals (they return rdata); keyword arguments are
    plain values or, for traced arrays, CoDuals. (Not `rules._support.binding`: an f2py
    wrapper has no Python signature, and an optional argument it was not given must
    stay absent, since f2py derives its default from the other arguments.)
    """

    __slots__ = ("names", "npos", "vals")

    def __init__(
        self, names: tuple[str, ...], nreq: int, fname: str, args: tuple[Any, ...], kw: dict
    ) -> None:
        npos = len(args)
        if npos > len(names):
            raise TypeError(f"{fname}() takes at most {len(names)} arguments ({npos} given)")
        vals = dict(zip(names, args, strict=False))
        for k, v in kw.items():
            if k not in names:
                raise TypeError(f"{fname}() got an unexpected keyword argument {k!r}")
            if k in vals:
                raise TypeError(f"{fname}() got multiple values for argument {k!r}")
            vals[k] = v
        if npos < nreq:
            for n in names[:nreq]:
                if n not in vals:
                    raise TypeError(f"{fname}() missing required argument {n!r}")
        self.names = names
        self.vals = vals
        self.npos = npos

    def cd(self, name: str) -> CoDual | None:
        """The argument as a CoDual (constant if given as a plain keyword), None if absent."""
        v = self.vals.get(name)
        if v is None:
            return None
        return v if isinstance(v, CoDual) else CoDual(v, None)

    def get(self, name: str, default: Any) -> Any:
        """The argument's primal value, or `default` if absent."""
        v = self.vals.get(name, default)
        return v.x if isinstance(v, CoDual) else v

    def rdata(self, **cotangents: Any) -> tuple[Any, ...]:
        """The pullback's return: NO_R for the function and each positional argument,
        except the scalar arguments named here (`alpha=ᾱ`), which get their cotangent's
        rdata when they are active."""
        out = [NO_R] * (self.npos + 1)
        for name, g in cotangents.items():
            cd = self.cd(name)
            if is_active_scalar(cd):
                r = scalar_rdata(cd.x, g)
                i = self.names.index(name)
                if i < self.npos:
                    out[i + 1] = r
        return tuple(out)


class Routine(BlasRule):
    """A rule for one scipy.linalg.blas routine: its name, dtype and parameter list."""

    def __init__(self, fn: Any, dtype: Any) -> None:
        super().__init__()
        self.fn = fn
        self.name = f"scipy.linalg.blas.{fn.__name__.split()[-1]}"
        self.params, self.nreq = f2py_params(fn)
        self.dtype = np.dtype(dtype)
        self.k = kernels(self.dtype)

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Bound:
        return Bound(self.params, self.nreq, self.name, args, kwargs)

    def scalar(self, cd: CoDual | None, default: Any) -> Any:
        """A scalar argument as the routine's scalar type (float or complex)."""
        return self.k.scalar(default if cd is None else cd.x)

    # -- outputs of routines that write into an argument --------------------------

    def begin_output(
        self,
        fname: str,
        io: CoDual | None,
        ioname: str,
        inplace: bool,
        shape: tuple[int, ...],
        dtype: np.dtype,
        others_active: bool,
        fill: bool,
        reads: tuple[tuple[str, CoDual | None], ...] = (),
    ) -> tuple[np.ndarray, CoDual, tuple[Any, ...]]:
        """Where a routine that writes into argument `io` writes, and the output CoDual.

        In place (f2py would not copy `io`): the old value is pushed into a pooled
        buffer, the output *is* `io` (sharing its fdata). Otherwise the output is a
        fresh F-ordered pooled buffer, filled with `io`'s value when `fill`, with
        pooled zero fdata. Returns (target, output, state for `end_output`).
        `reads` are the (name, argument) pairs the routine reads: in place, none may
        share memory with `io` (`refuse_overlap`).
        """
        if inplace:
            assert io is not None
            self.refuse_overlap(fname, io, ioname, dtype, reads)
            if io.dx is None and others_active:
                raise TracingError(
                    f"{fname} overwrites its argument {ioname}= (overwrite flag set, "
                    f"Fortran-contiguous {dtype} array) with a value computed from traced "
                    f"inputs, but {ioname} is not traced: the gradient would be lost. Pass a "
                    f"traced array (e.g. made with np.zeros_like from a traced one) or leave "
                    "the overwrite flag unset."
                )
            tok, old = self.save_like(io.x)
            return io.x, CoDual(io.x, io.dx), (tok, old)
        ytok, y = self.push_f(shape, dtype)
        if fill:
            if io is not None:
                np.copyto(y, io.x)
            else:
                y.fill(0)
        dtok, dy = self.push_f(shape, dtype)
        dy.fill(0)
        return y, CoDual(y, dy), (ytok, dtok)

    def refuse_overlap(
        self,
        fname: str,
        io: CoDual,
        ioname: str,
        dtype: np.dtype,
        reads: tuple[tuple[str, CoDual | None], ...],
    ) -> None:
        """Raise TracingError if `io`, about to be overwritten in place, shares memory with
        an argument the routine reads (e.g. `dgemm(1.0, a, b, c=a, overwrite_c=1)`).

        BLAS would then read values it has already overwritten (scipy does not check), and
        the pullback, which needs the operands' values from before the call, could only
        give a wrong gradient. `np.may_share_memory` (bounds only, cheap) screens first;
        `np.shares_memory` decides exactly.
        """
        x = io.x
        if not x.size:
            return
        flag = f"overwrite_{ioname}=1, " if f"overwrite_{ioname}" in self.params else ""
        for name, cd in reads:
            v = None if cd is None else cd.x
            if (
                type(v) is np.ndarray
                and v.size
                and np.may_share_memory(x, v)  # (cheap: bounds only)
                and np.shares_memory(x, v)
            ):
                raise TracingError(
                    f"{fname} overwrites its argument {ioname}= in place ({flag}a "
                    f"Fortran-contiguous {dtype} array: scipy writes into it), but "
                    f"{ioname} shares memory with {name}=, which the routine reads: "
                    "BLAS would read values it has already overwritten, and the gradient "
                    f"would be wrong. Pass a separate buffer as {ioname}= (e.g. "
                    f"{ioname}.copy(order='F')) or a copy of {name}=."
                )

    def end_output(self, state: tuple[Any, ...], io: CoDual | None, inplace: bool) -> None:
        """Restore `io` (in place) or recycle the output buffers (see `begin_output`)."""
        if inplace:
            assert io is not None
            self.restore_like(state[0], state[1], io.x)
        else:
            self.pop(state[1])
            self.pop(state[0])

    def check_io(self, fname: str, name: str, io: CoDual | None, dtype: np.dtype, nd: int) -> None:
        """An array argument that a rule reads or writes must have the routine's dtype/rank."""
        if io is None:
            return
        x = io.x
        if not (isinstance(x, np.ndarray) and x.dtype == dtype and x.ndim == nd):
            what = f"{x.dtype} array of ndim {x.ndim}" if isinstance(x, np.ndarray) else type(x)
            raise TypeError(
                f"{fname}: to differentiate it, pass {name}= as a {dtype} ndarray of ndim {nd} "
                f"(got {what}); convert it first, e.g. np.asarray({name}, dtype=np.{dtype})."
            )

    def contig(self, name: str, x: np.ndarray) -> np.ndarray:
        """`x` if C-contiguous, else a kept contiguous copy (f2py would copy it on every call)."""
        if x.flags.c_contiguous:
            return x
        buf = self.scratch(name, x.shape, x.dtype)
        np.copyto(buf, x)
        return buf

    def add_subset(self, dst: np.ndarray, g: np.ndarray, sub: Any, s: Any) -> None:
        """dst += G, with the part of G that `sub` selects (a view maker) scaled by s."""
        whole = sub(g)
        if whole.shape == g.shape:
            self.axpy(dst, s, g)
            return
        z = self.scratch_like("_sub", g)
        np.copyto(z, g)
        self.scal(sub(z), s)
        self.axpy(dst, 1.0, z)


def vec_view(x: np.ndarray, off: int, inc: int, n: int, fname: str, name: str) -> np.ndarray:
    """The n elements x[off], x[off + inc], … a level-1/2 routine reads (inc > 0)."""
    if inc <= 0:
        raise NotImplementedError(
            f"{fname}: inc{name}={inc}: only positive increments have a rule; pass a reversed "
            f"view (x[::-1]) instead of a negative increment."
        )
    if n <= 0:
        return x[off:off]
    last = off + (n - 1) * inc
    if off < 0 or last >= x.shape[0]:
        raise ValueError(f"{fname}: {name} has {x.shape[0]} elements, fewer than off/inc/n need")
    return x[off : last + 1 : inc]
