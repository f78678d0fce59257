"""Fusing chains of elementwise calls in compiled programs into one kernel each way.

A program recorded by `value_and_grad(f, compile=True)` replays one rule call per
NumPy operation: `100 * (x[1:] - x[:-1]**2)**2 + (1 - x[:-1])**2` is seven calls
with seven temporaries, and seven pullbacks. This pass (a program pass,
`rulekit._engine._program.PASSES`) replaces each chain of such calls by one
`FusedStep`: a generated numba kernel computes the chain's output in one loop
(and, when the chain ends in `np.sum(v)` or `np.mean(v)`, that), and one reverse kernel
recomputes the chain's values element by element (cheap temporaries recomputed,
not stored) and accumulates every input's cotangent by the chain rule on the
declared partials:

    v_k = f_k(operands)           (forward, per element i)
    b_k = ȳ_i;  b_j += ∂f_k/∂v_j(operands, v_k) · b_k   for k = n … 1
    x̄_j[i] += Σ over the uses of input x_j of its b

The partials are each function's declaration (`rulekit.elementwise`), inlined by
numba, so the math is still written once. A chain is fused when:

- every call is a real ufunc with an elementwise declaration, on float64 arrays of
  one shape, C-contiguous (values, and fdata of the differentiated ones; an operand
  without derivative, such as a non-differentiated argument, is only read), and
  Python or NumPy numbers, without keywords; the last may be `np.sum(v)` or
  `np.mean(v)` of the whole (non-empty) array;
- every value inside the chain is used only inside it (the rest of the program,
  its guards and its output read only the chain's last value);
- it has at least two calls, and numba compiles the kernels (a function numba
  cannot compile is left unfused).

The kernels are generated source, cached on disk like the other generated
kernels (`rules.numpy.ufuncs._kernels`). The fused result can differ from the
unfused one in the last bits (numba's libm vs NumPy's SIMD loops, a reordered sum
vs NumPy's pairwise one).
"""

from __future__ import annotations

import dis
import hashlib
import inspect
from typing import Any

import numpy as np

from rulekit import CoDual, NoFData, NoRData
from rulekit._elementwise import _DECLARED, Elementwise
from rulekit._engine._program import PASSES, Program
from rulekit._engine._steps import DirectStep, RuleStep
from rulekit._engine._tape import Record, Site
from rules.numpy.ufuncs._kernels import fingerprint, load_generated

__all__ = ["ENABLED", "FusedStep", "fuse"]

ENABLED = [True]  # (ENABLED[0] = False turns the pass off, e.g. to measure its effect)
_MIN_CALLS = 2
_F64 = np.dtype(np.float64)


def _declarations() -> dict[Any, Elementwise]:
    return {
        d.fn: d
        for d in _DECLARED.values()
        if isinstance(d.fn, np.ufunc) and d.fn.nout == 1 and d.fn.nin == d.nargs <= 2
    }


_CLOSING = (np.sum, np.mean)  # (reductions of the whole array that may end a chain)
#: Arithmetic a kernel does as fast as NumPy's loops. Other functions (exp, log1p, tanh,
#: logaddexp, ...) are scalar libm calls in a kernel, where NumPy's loops are vectorised:
#: measured, a fused chain with them wins at 5,184 elements (the 72×72 seed: 1.97×
#: against 2.17× unfused) and loses at 10⁴ (logistic regression: 2.12× against 1.80×),
#: so chains with them are fused only up to `_LARGE` elements.
_CHEAP = frozenset([np.add, np.subtract, np.multiply, np.divide, np.negative, np.positive,
                    np.square, np.absolute, np.power, np.conjugate])  # fmt: skip
_LARGE = 8192


class _Op:
    """One call of a chain: its declaration and operands ("in", j), ("v", m) or ("c", n)."""

    def __init__(self, decl: Elementwise | None, operands: list[tuple[str, int]]) -> None:
        self.decl = decl  # None: the closing np.sum or np.mean
        self.operands = operands


def _chain_op(
    step: RuleStep,
    decls: dict[Any, Elementwise],
    shape: Any,
    inputs: dict[int, tuple[int, bool]],
    values: dict[int, int],
    consts: list[float],
) -> _Op | None:
    """`step` as the next op of a chain over arrays of `shape`, or None if it cannot be.

    `inputs` maps the chain's input slots to (index, active): an active input gets a
    cotangent; a tracked one (no derivative: a non-differentiated argument, a mask) is
    only read."""
    if step.kwspec or step.k is None:
        return None
    closing = step.f in _CLOSING
    decl = None if closing else decls.get(step.f)
    if decl is None and not closing:
        return None
    operands: list[tuple[str, int]] = []
    for (kind, v), meta in zip(step.operands(), step.meta, strict=False):
        if kind in ("active", "tracked") and meta is not None:
            active = kind == "active"
            if meta[0] != shape or meta[1] != _F64 or not meta[2] or (active and not meta[3]):
                return None
            if v in values:
                operands.append(("v", values[v]))
            else:
                operands.append(("in", inputs.setdefault(v, (len(inputs), active))[0]))
        elif kind == "value" and type(v) in (float, int, np.float64):
            operands.append(("c", len(consts)))
            consts.append(float(v))
        else:
            return None
    if closing:
        return _Op(None, operands) if len(operands) == 1 and operands[0][0] == "v" else None
    out = step.meta[-1]
    if out is None or out[0] != shape or out[1] != _F64:
        return None
    return _Op(decl, operands)


def fuse(program: Program) -> None:
    """Replace each fusible chain of `program`'s steps by a `FusedStep` (a program pass)."""
    if not ENABLED[0]:
        return
    decls = _declarations()
    uses = program.uses()
    steps = program.steps
    out: list[Any] = []
    i = 0
    while i < len(steps):
        fused, n = _longest_chain(steps, i, decls, uses)
        if fused is None:
            out.append(steps[i])
            i += 1
        else:
            out.append(fused)
            i += n
    program.steps = out


def _longest_chain(
    steps: list[Any], i: int, decls: dict[Any, Elementwise], uses: dict[int, list[int]]
) -> tuple[FusedStep | None, int]:
    first = steps[i]
    if not isinstance(first, RuleStep) or first.meta[-1] is None:
        return None, 0
    shape = first.meta[-1][0]
    members: list[RuleStep] = []
    probe: tuple[dict[int, tuple[int, bool]], dict[int, int], list[float]] = ({}, {}, [])
    for step in steps[i:]:
        if not isinstance(step, RuleStep) or (members and members[-1].f in _CLOSING):
            break
        if step.k is None or _chain_op(step, decls, shape, *probe) is None:
            break
        members.append(step)
        probe[1][step.k] = len(members) - 1
    # the longest prefix whose inner values are used only inside it
    while len(members) >= _MIN_CALLS:
        end = i + len(members) - 1
        if all(i <= u <= end for m in members[:-1] for u in uses.get(m.k, [])):  # type: ignore[arg-type]
            break
        members.pop()
    size = int(np.prod(shape))
    if members and members[-1].f is np.mean and size == 0:
        members.pop()  # (the mean of nothing is NumPy's nan and warning: left to its rule)
    if len(members) < _MIN_CALLS or all(m.f in _CLOSING for m in members):
        return None, 0
    if size > _LARGE and any(m.f not in _CHEAP and m.f not in _CLOSING for m in members):
        return None, 0
    inputs: dict[int, tuple[int, bool]] = {}  # slot → (input index, active)
    values: dict[int, int] = {}  # slot → op index, for the chain's values
    consts: list[float] = []
    ops = []
    for m in members:
        op = _chain_op(m, decls, shape, inputs, values, consts)
        assert op is not None and m.k is not None
        ops.append(op)
        values[m.k] = len(ops) - 1
    slots = sorted(inputs, key=inputs.__getitem__)
    active = [inputs[s][1] for s in slots]
    kernels = _kernels(ops, active, consts)
    if kernels is None:
        return None, 0
    fused = FusedStep(members, slots, active, np.array(consts or [0.0]), kernels, size)
    return fused, len(members)


class FusedStep(DirectStep):
    """A chain of elementwise calls (and its closing sum) replayed as one kernel each way.

    Forward: y = chain(inputs) (or Σ chain(inputs)) into a kept buffer; the record's
    pullback runs the reverse kernel: x̄ⱼ += Σ (∂ chain / ∂ xⱼ) · ȳ, element by element.
    """

    __slots__ = ("active", "buffers", "consts", "f", "fused", "k", "kernels", "last", "scale",
                 "site", "slots", "summed")  # fmt: skip

    def __init__(
        self,
        members: list[RuleStep],
        slots: list[int],
        active: list[bool],
        consts: np.ndarray,
        kernels: Any,
        size: int,
    ) -> None:
        self.fused = members
        self.last = members[-1]
        self.f = self.last.f
        assert self.last.k is not None and members[0].k is not None
        self.k: int = self.last.k
        self.slots = slots
        self.consts = consts
        self.kernels = kernels
        self.active = active  # per input: gets a cotangent (else: tracked, only read)
        self.summed = self.last.f in _CLOSING
        self.scale = 1.0 / size if self.last.f is np.mean else 1.0  # (a mean: Σ/n, ȳ/n)
        self.buffers: list[tuple[np.ndarray, np.ndarray]] = []  # (value, fdata), reused
        self.site = Site((self, None), "fused chain", None)

    def read_slots(self) -> list[int]:
        return list(self.slots)

    def run(self, tape: Any, table: dict[int, CoDual], freeze: Any, tracked: Any) -> bool:
        xs = [table[s] for s in self.slots]
        flat = []
        grads = []
        for cd, active in zip(xs, self.active, strict=True):
            x = cd.x
            if active:  # (the recording's layouts; a flattening copy would lose cotangents)
                if not (x.flags.c_contiguous and cd.dx.flags.c_contiguous):
                    return False
                grads.append(cd)
            elif not x.flags.c_contiguous:  # (a tracked value is only read: read a copy)
                x = np.ascontiguousarray(x)
            elif tracked is not None:  # (a tracked value a later call may write into)
                x = tracked(x)
            flat.append(x.reshape(-1))
        c = self.consts
        scale = self.scale
        shape = self.last.shape
        k = self.k
        first: int = self.fused[0].k  # type: ignore[assignment]
        if len(tape.rdata) != first:
            return False
        kern = self.kernels
        if self.last.out_slot is not None:  # (a scalar result: its cotangent is rdata)
            y = np.float64(kern.forward_sum(*flat, c) * scale)
            out: CoDual[Any] = CoDual(y, NoFData())

            def fused_scalar_pullback(dy: Any) -> tuple[Any, ...]:
                kern.reverse_sum(*flat, c, dy * scale, *[cd.dx.reshape(-1) for cd in grads])
                return (NoRData(),)

            pullback: Any = fused_scalar_pullback
            rdata0: Any = np.float64(0.0)
        else:
            if freeze is None and self.buffers:  # (forward and reverse back to back)
                buf, dbuf = self.buffers[0]
            else:
                buf, dbuf = np.empty(shape), np.zeros(shape)
                if freeze is None:
                    self.buffers.append((buf, dbuf))
            if self.summed:
                buf[()] = kern.forward_sum(*flat, c) * scale
            else:
                kern.forward(*flat, c, buf.reshape(-1))
            dbuf.fill(0.0)
            out = CoDual(buf, dbuf)
            summed = self.summed

            def fused_pullback(_: Any) -> tuple[Any, ...]:
                dflat = [cd.dx.reshape(-1) for cd in grads]
                if summed:
                    kern.reverse_sum(*flat, c, dbuf[()] * scale, *dflat)
                else:
                    kern.reverse(*flat, c, dbuf.reshape(-1), *dflat)
                dbuf.fill(0.0)
                return (NoRData(),)

            pullback, rdata0 = fused_pullback, None
        reads = list(self.slots)
        tape.records.append(
            Record(self.f, self.site, pullback, self.last.out_slot, None, reads, (k,), xs, out)
        )
        tape.rdata.extend([None] * (k - first))  # (the chain's slots: one per call)
        tape.rdata.append(rdata0)
        table[k] = out
        return True


# -- kernel source ----------------------------------------------------------------------------


_LOADED: dict[Any, Any] = {}  # chain structure → its kernels (None: numba could not)


def _kernels(ops: list[_Op], active: list[bool], consts: list[float]) -> Any:
    """The compiled kernels of a chain, or None if numba cannot compile them (made once per
    chain structure in a process: a retrace finds them here)."""
    key = (
        tuple(active),
        tuple((op.decl and op.decl.key, tuple(op.operands), _power(op, consts)) for op in ops),
    )
    if key not in _LOADED:
        _LOADED[key] = _build(ops, active, consts)
    return _LOADED[key]


def _build(ops: list[_Op], active: list[bool], consts: list[float]) -> Any:
    decls = [op.decl for op in ops if op.decl is not None]
    n_in, n_grad = len(active), sum(active)
    src_of = _source(ops, active, consts)
    text = src_of(True)
    h = hashlib.sha256(text.encode())
    for d in decls:
        h.update(fingerprint(d, "").encode())
    try:
        mod = load_generated(f"rulekit_fused_{h.hexdigest()[:20]}", src_of)
        one = [np.full(2, 0.5) for _ in range(n_in)]
        c = np.ones(max(1, len(consts)))
        if ops[-1].decl is None:
            mod.forward_sum(*one, c)
            mod.reverse_sum(*one, c, 1.0, *[np.zeros(2) for _ in range(n_grad)])
        else:
            mod.forward(*one, c, np.empty(2))
            mod.reverse(*one, c, np.ones(2), *[np.zeros(2) for _ in range(n_grad)])
    except Exception:  # (a function numba cannot compile: the chain stays unfused)
        return None
    return mod


def _operand(o: tuple[str, int]) -> str:
    kind, n = o
    return {"in": f"x{n}[i]", "v": f"v{n}", "c": f"c[{n}]"}[kind]


def _reads_output(op: _Op) -> bool:
    """Whether any of `op`'s declared partials reads its last parameter, the output y."""
    assert op.decl is not None
    for d in op.decl.derivs:
        code = getattr(d, "__code__", None)
        if code is None or code.co_argcount < 1:
            return True
        y = code.co_varnames[code.co_argcount - 1]
        if code.co_flags & inspect.CO_NESTED or any(
            ins.argval == y for ins in dis.get_instructions(code) if "LOAD" in ins.opname
        ):
            return True
    return False


def _power(op: _Op, consts: list[float]) -> tuple[str, str] | None:
    """x ** e for a constant e: (value, derivative) expressions in `{x}`, or None.

    With e known the partial is e·x^(e−1) (0 for e = 0), folded by the compiler, and
    x ** 2 is x·x, as NumPy computes it.
    """
    if op.decl is None or op.decl.fn is not np.power or op.operands[1][0] != "c":
        return None
    e = consts[op.operands[1][1]]
    if e == 2.0:
        return "{x} * {x}", "2.0 * {x}"
    if e == 0.0:
        return "{x} ** 0.0", "0.0"
    return f"{{x}} ** {e!r}", f"{e!r} * {{x}} ** {e - 1.0!r}"


def _source(ops: list[_Op], active: list[bool], consts: list[float]) -> Any:
    n_in = len(active)
    xs = ", ".join(f"x{j}" for j in range(n_in))
    dxs = "".join(f", dx{j}" for j in range(n_in) if active[j])  # (tracked inputs: none)
    head = ['"""A fused elementwise chain, generated by rules.numpy.ufuncs.fusion."""',
            "import numba", "from rulekit._elementwise import declaration",
            "from rules._support.select import install_numba", "", "install_numba()"]  # fmt: skip
    body: list[str] = []
    for m, op in enumerate(ops):
        if op.decl is not None:
            head.append(f"_d{m} = declaration({op.decl.key!r})")
            head.append(f"_f{m} = _d{m}.fn")
            for a in range(op.decl.nargs):
                head.append(f'_p{m}_{a} = numba.njit(inline="always")(_d{m}.derivs[{a}])')
            power = _power(op, consts)
            if power is not None:
                body.append(f"v{m} = {power[0].format(x=_operand(op.operands[0]))}")
            else:
                body.append(f"v{m} = _f{m}({', '.join(_operand(o) for o in op.operands)})")
    last = len(ops) - 1
    summed = ops[-1].decl is None
    top = ops[-1].operands[0][1] if summed else last  # (the value the chain returns)
    value = f"v{top}"
    loop = "    for i in range(x0.size):\n" + "".join(f"        {b}\n" for b in body)
    # The reverse sweep runs the ops the returned value depends on: as the tape skips
    # pullbacks no cotangent reaches, a value computed and never used costs nothing and
    # cannot turn the gradient into NaN (0·∞ from a partial infinite there).
    live = {top}
    for m in range(top, -1, -1):
        if m in live:
            live |= {n for kind, n in ops[m].operands if kind == "v"}
    # It recomputes only the values their partials read (a partial that does not read its
    # op's output, log1p's 1/(1 + x), spares recomputing that output).
    reads_y = {m: _power(ops[m], consts) is None and _reads_output(ops[m]) for m in live}
    needed = {m for m in live if reads_y[m]}
    needed |= {n for m in live for kind, n in ops[m].operands if kind == "v"}
    for m in range(top, -1, -1):  # (a needed value needs the values it is computed from)
        if m in needed:
            needed |= {n for kind, n in ops[m].operands if kind == "v"}
    recompute = "    for i in range(x0.size):\n" + "".join(
        f"        {b}\n" for m, b in enumerate(body) if m in needed
    )
    rev = []  # the reverse sweep: b{m} is the cotangent of v{m}, a{j} of input j
    rev.append(f"        b{top} = g if SUMMED else g[i]")
    for m in sorted(live - {top}):
        rev.append(f"        b{m} = 0.0")
    for j in range(n_in):
        if active[j]:
            rev.append(f"        a{j} = 0.0")
    for m in sorted(live, reverse=True):
        op = ops[m]
        assert op.decl is not None
        args = ", ".join(_operand(o) for o in op.operands)
        power = _power(op, consts)
        for a, (kind, n) in enumerate(op.operands):
            if kind == "c" or (kind == "in" and not active[n]):
                continue  # (constants and tracked inputs get no cotangent)
            target = f"b{n}" if kind == "v" else f"a{n}"
            if power is not None:
                d = power[1].format(x=_operand(op.operands[0]))
            else:
                d = f"_p{m}_{a}({args}, {f'v{m}' if reads_y[m] else '0.0'})"
            rev.append(f"        {target} += {d} * b{m}")
    for j in range(n_in):
        if active[j]:
            rev.append(f"        dx{j}[i] += a{j}")
    reverse = "\n".join(rev) + "\n"

    def source(cache: bool) -> str:
        jit = f'_jit = numba.njit(cache={cache}, nogil=True, error_model="numpy")'
        jit_sum = (  # (a sum the compiler may reorder: vectorised, as NumPy's pairwise is)
            f'_jit_sum = numba.njit(cache={cache}, nogil=True, error_model="numpy", '
            'fastmath={"reassoc"})'
        )
        parts = ["\n".join(head), jit, jit_sum, ""]
        if summed:
            parts += ["@_jit_sum", f"def forward_sum({xs}, c):", "    s = 0.0",
                      loop + f"        s += {value}", "    return s", ""]  # fmt: skip
            parts += ["@_jit", f"def reverse_sum({xs}, c, g{dxs}):",
                      recompute + reverse.replace("SUMMED", "True")]  # fmt: skip
        else:
            parts += ["@_jit", f"def forward({xs}, c, y):",
                      loop + f"        y[i] = {value}", ""]  # fmt: skip
            parts += ["@_jit", f"def reverse({xs}, c, g{dxs}):",
                      recompute + reverse.replace("SUMMED", "False")]  # fmt: skip
        return "\n".join(parts) + "\n"

    return source


PASSES.append(fuse)
