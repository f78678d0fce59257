"""The differential check: one program, eager and compiled `value_and_grad` objects, several calls.

`check_program` runs a generated `Program` through `rulekit.value_and_grad` objects: an eager
one with `copy=True` and one with `copy=False`, and a `compile=True` one (issue #15) for each
`copy` asked for. Each round (`CallPlan`) has fresh inputs on two sides, laid out in the plan's
layouts_copy and layouts_nocopy; the eager objects get their side's, and every call is compared
with plain numpy:

- the value with the program run by numpy on the same inputs (same dtype);
- every gradient with central finite differences of the program run by numpy on float64 /
  complex128 copies of the inputs (complex: ∂L/∂x + i ∂L/∂y, PyTorch's convention);
- the gradient's shape and dtype with the input's, the inputs (and captured arrays) after the
  call with before it, and (copy=True) every returned gradient at the end with what it was
  when returned.

A compiled object gets both sides' inputs, each right after the eager object of that side (so
the finite differences, the expensive part, are computed once per round and side): the eager
object has just got those inputs right, so a defect a compiled object raises is one of
`compile=True` alone, and is labelled so (its signature says `compile=True` and whether the
failing call replayed a recorded trace or traced f again; its reproducer builds the compiled
object). Its calls 2, 3, ... replay a trace wherever the layouts and dtypes of an earlier call
come back (`CallPlan`s repeat layouts on purpose) and the guards hold.

A `rulekit` refusal (`RulekitError`, `TypeError`, `NotImplementedError`) on the first call is not
a defect: the program counts as refused. Any other exception, a refusal once the program has run
(on other layouts), a refusal by a compiled object of inputs the eager object ran, and every
mismatch is a `Defect`, classified as on a first call or a later one: a failure on a later call
is repeated on a new object of the same kind, and is a later-call defect (state kept between
calls) only if the new object gets it right. A `Defect` carries a runnable reproducer: the
program, the input construction of every call so far, observed vs expected.

Tolerances (`grad_tolerance`):

- finite differences: central differences with h = 1e-6 on float64 have truncation error
  O(h² f''') and rounding error ≈ eps·|f|/h. Both are estimated per element: the rounding term as
  8·eps·S/h with S the magnitude of the loss's terms, and the truncation term (and the rounding
  noise again) as 2·|D(h) − D(2h)|, since D(2h) − D(h) ≈ 3·(truncation error of D(h)).
- the engine: a float64/complex128 gradient is computed in float64 along a different path; its
  rounding error is a few eps times the condition of the program, which the magnitude guard
  (registers ≤ 1e4) bounds: rtol 1e-7 of the input's gradient scale leaves a wide margin. A
  float32 gradient is computed in float32 (eps = 6e-8) by up to 8 steps on registers ≤ 1e4:
  rtol 2e-4 of the gradient scale, where the scale also counts the loss's magnitude per input
  element (S / (1 + max|x|)): a gradient that cancels to 0 keeps float32 noise of that size
  (var(x + c) wrt c gives 4e-8, not 0). Over 350,000 passing gradients (a 15-minute run) the
  largest |error| / tolerance was 0.16 (float64), 0.08 (complex128), 0.04 (float32).
- values: same dtype on both sides, different summation order and kernels: rtol 1e-10
  (float64) or 1e-4 (float32) of the loss's magnitude S.
"""

from __future__ import annotations

import dataclasses
import re
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
from fdcheck import fd_grad as central_differences
from fuzz.forward import check_hvp, check_jvp
from fuzz.program import NAMESPACE, IllPosed, InputSpec, Program, run_reference

import rulekit
import rules  # noqa: F401  (registers the bundled rules)

H = 1e-6
EPS64 = float(np.finfo(np.float64).eps)
GRAD_RTOL = {"float64": 1e-7, "complex128": 1e-7, "float32": 2e-4}
VALUE_RTOL = {"float64": 1e-10, "complex128": 1e-10, "float32": 1e-4}
SCALE = 0.7  # inputs are SCALE · standard normal

LAYOUTS = ("C", "F", "strided", "reversed", "reversed_F")
LAYOUTS_0D = ("C", "strided")  # numpy scalars: InputSpec.scalar, fixed per program

# statistics of all checks in this process (read by the tests' summary)
STATS: Counter[str] = Counter()
REFUSALS: Counter[str] = Counter()
CLOCK = {"start": time.monotonic()}
# dtype -> the largest |error| / tolerance of a gradient that passed: how close the fuzzer came to
# a false alarm (a wrong gradient is typically far above 1)
CLOSEST: dict[str, float] = {}
# defect signature -> (programs run, seconds since CLOCK["start"]) when it was first seen
FIRST: dict[str, tuple[int, float]] = {}


@dataclasses.dataclass(frozen=True)
class CallPlan:
    """One round of calls: fresh input values from `seed`, a layout per input per object.

    `flip` runs this round of a float32/float64 program in the other precision, so one object
    sees a change of dtype between calls (its rules are rebuilt, its buffers must not leak).
    """

    seed: int
    layouts_copy: tuple[int, ...]  # indices into LAYOUTS / LAYOUTS_0D
    layouts_nocopy: tuple[int, ...]
    flip: bool = False


class Defect(AssertionError):
    """A wrong value or gradient, an internal error, or another broken promise."""

    kind = "defect"
    program: Program | None = None


_DEFECT_TYPES: dict[str, type[Defect]] = {}


def defect_type(signature: str) -> type[Defect]:
    """One exception class per defect signature, so hypothesis reports (and shrinks) each
    distinct defect separately instead of stopping at the first."""
    if signature not in _DEFECT_TYPES:
        name = re.sub(r"\W+", "_", signature).strip("_")
        _DEFECT_TYPES[signature] = type(name, (Defect,), {"kind": signature})
    return _DEFECT_TYPES[signature]


# -- inputs ----------------------------------------------------------------------------------------


def layout_name(spec: InputSpec, index: int) -> str:
    if spec.dtype == "int":
        return "int"
    if spec.scalar:
        return "scalar"
    names = LAYOUTS_0D if spec.shape == () else LAYOUTS
    return names[index % len(names)]


def call_dtypes(program: Program, flip: bool) -> list[str]:
    dtypes = [s.dtype for s in program.inputs]
    if flip and all(d in ("float32", "float64", "int") for d in dtypes):
        swap = {"float32": "float64", "float64": "float32", "int": "int"}
        dtypes = [swap[d] for d in dtypes]
    return dtypes


def value_lines(program: Program, seed: int, dtypes: list[str]) -> list[str]:
    lines = [f"rng = np.random.default_rng({seed})"]
    for i, (s, dtype) in enumerate(zip(program.inputs, dtypes, strict=True)):
        shape = repr(s.shape)
        if dtype == "int":
            lines.append(f"V{i} = int(rng.integers(1, 4))  # a Python int")
            continue
        if dtype == "complex128":
            v = f"{SCALE} * rng.standard_normal({shape}) + {SCALE}j * rng.standard_normal({shape})"
        elif dtype == "float32":
            v = f"({SCALE} * rng.standard_normal({shape})).astype(np.float32)"
        else:
            v = f"{SCALE} * rng.standard_normal({shape})"
        lines.append(f"V{i} = np.asarray({v})" if s.shape == () else f"V{i} = {v}")
    return lines


def layout_lines(name: str, i: int, spec: InputSpec, layout: str) -> list[str]:
    """Source that lays out V{i} as `layout` in a new array (never a view of V{i}: programs
    mutate their inputs, and V{i} is laid out again for every evaluation)."""
    nd = len(spec.shape)
    v = f"V{i}"
    if layout == "int":
        return [f"{name} = {v}"]
    if layout == "C":
        return [f"{name} = {v}.copy()"]
    if layout == "F":
        return [f"{name} = np.array({v}, order='F')"]
    if layout == "scalar":
        return [f"{name} = {v}[()]  # a numpy scalar"]
    if layout == "strided":
        if nd == 0:
            return [f"{name} = np.zeros(3, {v}.dtype)[1, ...]  # a 0-d view", f"{name}[...] = {v}"]
        big = tuple(2 * n + 1 for n in spec.shape)
        idx = ", ".join(["1::2"] * nd)
        return [f"{name} = np.zeros({big}, {v}.dtype)[{idx}]", f"{name}[...] = {v}"]
    if layout == "reversed":
        idx = ", ".join(["::-1"] * nd)
        return [f"{name} = {v}[{idx}].copy()[{idx}]  # negative strides"]
    if layout == "reversed_F":
        return [f"{name} = np.array({v}[::-1], order='F')[::-1]  # F order, axis 0 reversed"]
    raise AssertionError(layout)


def install(namespace: dict[str, Any], name: str, value: Any) -> None:
    """Give a captured array its call's values: written into the array f's global `name` holds
    when shape, dtype and strides agree (a change of contents f's compiled trace must see),
    else the global rebound (a change of identity). `install_lines` is this as source."""
    cur = namespace.get(name)
    if isinstance(cur, np.ndarray) and _same_layout(cur, value):
        cur[...] = value
    else:
        namespace[name] = value


def _same_layout(a: np.ndarray, b: Any) -> bool:
    return isinstance(b, np.ndarray) and (a.shape, a.dtype, a.strides) == (
        b.shape, b.dtype, b.strides)  # fmt: skip


def install_lines(spec: InputSpec, i: int, layout: str) -> list[str]:
    """Reproducer source for a captured input: laid out as `_name`, then installed."""
    n = spec.name
    return [
        *layout_lines(f"_{n}", i, spec, layout),
        f"if isinstance(globals().get({n!r}), np.ndarray) and ({n}.shape, {n}.dtype, "
        f"{n}.strides) == (_{n}.shape, _{n}.dtype, _{n}.strides):",
        f"    {n}[...] = _{n}  # f captured {n}: the new values written into it",
        "else:",
        f"    {n} = _{n}  # f captured {n}: the global rebound",
    ]


def _exec(lines: list[str], env: dict[str, Any]) -> dict[str, Any]:
    exec("\n".join(lines), env)
    return env


def _upcast(x: Any) -> Any:
    if isinstance(x, int):  # (a Python int argument stays one)
        return x
    a = np.asarray(x)
    return np.array(a, dtype=np.complex128 if a.dtype.kind == "c" else np.float64)


def _copies(args: list[Any]) -> list[Any]:
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


# -- finite differences ----------------------------------------------------------------------------


def fd_grad(
    f: Callable[..., Any],
    build: Callable[[list[Any]], list[Any]],
    vals: list[Any],
    i: int,
    h: float,
) -> np.ndarray:
    """Central differences of real f wrt input i (complex: ∂/∂Re + i ∂/∂Im): the suite's one
    finite-difference gradient (`fdcheck.fd_grad`) of f∘build at step h.

    `vals` are C-ordered float64/complex128 values; `build` lays them out as the call under test
    does. The layout matters: numpy's reshape/ravel return a view or a copy depending on it, so
    a program that mutates an array after reshaping it computes a different function per layout.
    """

    def loss(*a: Any) -> Any:
        return np.real(f(*build(list(a))))

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        g = np.asarray(central_differences(loss, tuple(vals), i, eps=h))
    if not np.all(np.isfinite(g)):
        raise IllPosed("finite differences are not finite")
    return g


def loss_scale(program: Program, regs: dict[str, Any]) -> float:
    """S: the magnitude of the terms the loss adds up (the w's are ≤ 1), plus the largest
    register (rounding in an intermediate reaches the loss too)."""
    names = dict.fromkeys(re.findall(r"\b[xr][0-9]+\b", "\n".join(program.loss)))
    s = abs(complex(regs["loss"]))
    for n in names:
        a = np.abs(np.asarray(regs[n]))
        s += float(np.sum(a) + np.sum(a * a))
    sizes = [np.max(np.abs(np.asarray(v))) for k, v in regs.items() if k != "loss" and np.size(v)]
    return s + float(max(sizes, default=0.0)) + 1e-300


def grad_tolerance(
    fd_h: np.ndarray, fd_2h: np.ndarray, x: np.ndarray, scale: float, dtype: str
) -> np.ndarray:
    gscale = float(np.max(np.abs(fd_h))) if fd_h.size else 0.0
    if dtype == "float32":  # cancellation: a zero gradient made of float32 terms of size ~S/|x|
        gscale = max(gscale, scale / (1.0 + float(np.max(np.abs(x))) if x.size else 1.0))
    return 2 * np.abs(fd_h - fd_2h) + 8 * EPS64 * scale / H + GRAD_RTOL[dtype] * gscale


# -- the check -------------------------------------------------------------------------------------


def _is_refusal(e: BaseException) -> bool:
    # NotImplementedError: some rules refuse an unsupported case on purpose with it (e.g. an
    # out= that overlaps an operand); it names the case, so it counts as a clean refusal
    return isinstance(e, rulekit.RulekitError | TypeError | NotImplementedError)


def _where(e: BaseException) -> str:
    """The innermost frame in rulekit/ or rules/ (else the innermost), as file:function."""
    frames = traceback.extract_tb(e.__traceback__)
    inner = [fr for fr in frames if re.search(r"[/\\](rulekit|rules)[/\\]", fr.filename)]
    fr = (inner or frames)[-1]
    return f"{fr.filename.rsplit('/', 1)[-1]}:{fr.name}"


def _fmt(a: Any) -> str:
    """An array as comment text: continuation lines start with '#', so reproducers stay code."""
    text = np.array2string(np.asarray(a), precision=6, separator=", ", max_line_width=90)
    return text.replace("\n", "\n#   ")


@dataclasses.dataclass
class _Prepared:
    setup: list[str]  # reproducer source that builds the inputs
    rebuild: Callable[[], list[Any]]  # builds them (fresh arrays each time)
    build: Callable[[list[Any]], list[Any]]  # builds inputs of other values, in the same layouts
    values: list[Any]  # the round's input values (per program input)
    np_value: Any
    dtype: str  # the precision the tolerances are for
    scale: float  # the loss's magnitude S
    fds: dict[int, np.ndarray]  # central differences with h and 2h, per active input
    fd2s: dict[int, np.ndarray]


@dataclasses.dataclass
class _Object:
    """One `value_and_grad` object under test, called once per round on each side's inputs
    in `sides` (0: the round's inputs in layouts_copy, 1: in layouts_nocopy)."""

    name: str  # its name in reproducers
    copy: bool
    compile: bool
    sides: tuple[int, ...]
    vg: Any = None
    calls: int = 0

    def make(self, f: Callable[..., Any], argnums: Any) -> Any:
        return rulekit.value_and_grad(f, argnums=argnums, copy=self.copy, compile=self.compile)

    def source(self, argnums: Any) -> str:
        compiled = ", compile=True" if self.compile else ""
        return (
            f"{self.name} = rulekit.value_and_grad(f, argnums={argnums!r}, "
            f"copy={self.copy}{compiled})"
        )

    @property
    def label(self) -> str:
        return f"{self.name} (copy={self.copy}{', compile=True' if self.compile else ''})"


def _objects(compiled: tuple[bool, ...]) -> list[_Object]:
    """The objects of a session, in calling order: the eager ones, then a compiled one for each
    `copy` in `compiled`. A compiled object gets a round's inputs only after an eager object got
    those very inputs right, so a defect it raises is one of compile=True alone. It gets both
    sides' inputs (its own side's first), which costs no finite differences: 2 calls per round,
    more replays and more switches between recorded traces."""
    objects = [_Object("vg", True, False, (0,)), _Object("vg_nocopy", False, False, (1,))]
    for copy in compiled:
        name, sides = ("vgc", (0, 1)) if copy else ("vgc_nocopy", (1, 0))
        objects.append(_Object(name, copy, True, sides))
    return objects


class _Session:
    def __init__(self, program: Program, compiled: tuple[bool, ...]):
        self.program = program
        self.f = program.compile()
        self.argnums = program.argnums
        self.active = [i for i, s in enumerate(program.inputs) if s.active]
        self.objects = _objects(compiled)
        for o in self.objects:
            o.vg = o.make(self.f, self.argnums)
        self.history: list[str] = []  # reproducer lines of the calls so far
        self.succeeded = [False, False]  # per side: an eager call on that side's inputs passed
        # (object, call and input, returned gradient, its value when returned), for copy=True
        self.kept: list[tuple[_Object, str, Any, np.ndarray]] = []

    def header(self) -> list[str]:
        p = self.program
        return [
            "import numpy as np",
            "import scipy.special as sp",
            "import rulekit",
            "import rules  # noqa: F401  (the bundled rules)",
            "",
            f"# inputs: {p.describe_inputs()}",
            p.source(),
            "",
            *(o.source(self.argnums) for o in self.objects),
        ]

    def fail(self, signature: str, lines: list[str]) -> Defect:
        if signature not in FIRST:
            FIRST[signature] = (STATS["programs"], time.monotonic() - CLOCK["start"])
        text = "\n".join([*self.header(), *self.history, *lines])
        defect = defect_type(signature)(f"{signature}\n\n{text}\n")
        defect.program = self.program
        return defect

    def run(self, plans: list[CallPlan], min_calls: int) -> str:
        for plan in plans:
            if self.objects[0].calls >= min_calls:
                break
            try:
                prepared = [self.prepare(plan, copy) for copy in (True, False)]
            except IllPosed:
                STATS["ill-posed calls"] += 1
                continue
            for o in self.objects:
                for side in o.sides:
                    if self.call(o, prepared[side], side) == "refused":
                        return "refused"
            if self.succeeded[0]:
                self.forward(prepared[0], plan.seed)
        if self.objects[0].calls < min_calls:
            return "ill-posed"
        for o, where, ret, snapshot in self.kept:
            if not np.array_equal(np.asarray(ret), snapshot, equal_nan=True):
                mode = " (compile=True)" if o.compile else ""
                raise self.fail(
                    f"returned gradient overwritten by a later call{mode}",
                    [
                        "# ... and the later calls above",
                        f"# {where}: when returned {_fmt(snapshot)}",
                        f"# after the later calls:  {_fmt(ret)}",
                    ],
                )
        return "ok"

    def prepare(self, plan: CallPlan, copy: bool) -> _Prepared:
        """One call's inputs, numpy's value on them, and the finite differences (float64 inputs
        in the same layout); IllPosed when these inputs leave the smooth region."""
        p = self.program
        layouts = plan.layouts_copy if copy else plan.layouts_nocopy
        layout_src, shown = [], []  # (shown: the reproducer's, which installs captured arrays)
        for i, s in enumerate(p.inputs):
            lines = layout_lines(s.name, i, s, layout_name(s, layouts[i]))
            layout_src += lines
            shown += install_lines(s, i, layout_name(s, layouts[i])) if s.captured else lines
        code = compile("\n".join(layout_src), "<fuzz inputs>", "exec")
        captured = [s.name for s in p.inputs if s.captured]
        namespace = self.f.__globals__

        def lay_out(vals: list[Any]) -> dict[str, Any]:
            env: dict[str, Any] = {"np": np, **{f"V{i}": v for i, v in enumerate(vals)}}
            exec(code, env)
            return env

        def build(vals: list[Any]) -> list[Any]:
            """The arguments of f; captured arrays installed as f's globals."""
            env = lay_out(vals)
            for name in captured:
                install(namespace, name, env[name])
            return [env[s.name] for s in p.params]

        for flip in (True, False) if plan.flip else (False,):
            dtypes = call_dtypes(p, flip)
            vlines = value_lines(p, plan.seed, dtypes)
            env = _exec(vlines, {"np": np})
            vals = [env[f"V{i}"] for i in range(len(p.inputs))]
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    np_value = self.f(*build(vals))
            except Exception:
                if flip:  # the program is not valid numpy in the other precision: do not flip
                    continue
                raise
            break
        vals64 = [_upcast(v) for v in vals]
        env = lay_out(vals64)
        _, regs = run_reference(p, [env[s.name] for s in p.inputs])
        scale = loss_scale(p, regs)
        fds = {i: fd_grad(self.f, build, vals64, i, H) for i in self.active}
        fd2s = {i: fd_grad(self.f, build, vals64, i, 2 * H) for i in self.active}
        dtype = "float32" if "float32" in dtypes else dtypes[self.active[0]]
        setup = [*vlines, *shown]
        return _Prepared(setup, lambda: build(vals), build, vals, np_value, dtype, scale, fds, fd2s)

    def call(self, o: _Object, prep: _Prepared, side: int) -> str:
        """Call the object under test; raise a Defect on any broken promise. A failure on a later
        call is repeated on a new object: if that fails too, the defect is reported as a first
        call (of the new object), else as a later-call defect (state kept between calls). A
        compiled object's later call says whether it replayed a trace or traced f again."""
        o.calls += 1
        n = o.calls
        desc = f"call {n} of {o.label}"
        replays = o.vg.tracer.replays if o.compile else 0
        failure = self.attempt(o, o.vg, prep, prep.rebuild(), desc, side)
        if failure == "refused":
            return "refused"
        lines = [f"# {desc}", *prep.setup, f"value, grads = {o.name}({self.names})"]
        if o.compile:
            replayed = o.vg.tracer.replays > replays
            STATS["compiled calls"] += 1
            STATS["compiled calls replayed"] += replayed
            lines[0] += ": replays a trace" if replayed else ": traces f"
        if failure is None:
            self.succeeded[side] |= not o.compile
            self.history += lines
            return "ok"
        assert isinstance(failure, tuple)
        kind, detail = failure
        mode = "compile=True, " if o.compile else ""
        if n > 1:
            fresh = o.make(self.f, self.argnums)
            desc1 = f"call 1 of a new {o.label}"
            again = self.attempt(o, fresh, prep, prep.rebuild(), desc1, side)
            if again is not None and again != "refused":  # (the history stays: rulekit has
                # global state, and the new object may fail only after the calls before it)
                lines = [*lines, f"# ... and on {desc1}:", o.source(self.argnums), *prep.setup,
                         lines[-1]]  # fmt: skip
                raise self.fail(f"{again[0]} ({mode}first call)", [*lines, *again[1]])
        when = "first call" if n == 1 else "later call"
        if o.compile and n > 1:
            when += ", replayed" if replayed else ", traced again"
        raise self.fail(f"{kind} ({mode}{when})", [*lines, *detail])

    def forward(self, prep: _Prepared, seed: int) -> None:
        """`rulekit.jvp` on this round's inputs against its finite differences, then
        `rulekit.hvp` against differences of the gradient (tests/fuzz/forward.py), on fresh
        copies: a jvp writes into its inputs as numpy would."""
        xs = prep.rebuild()
        params = self.program.params
        pos = {i: params.index(self.program.inputs[i]) for i in self.active}
        fds = {pos[i]: prep.fds[i] for i in self.active}
        tols = {
            pos[i]: grad_tolerance(
                prep.fds[i], prep.fd2s[i], _upcast(xs[pos[i]]), prep.scale, prep.dtype
            )
            for i in self.active
        }
        vtol = VALUE_RTOL[prep.dtype] * prep.scale
        try:
            failure = check_jvp(self.f, xs, fds, tols, vtol, seed, STATS)
        except Exception as e:
            msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            failure = (f"jvp error ({type(e).__name__} at {_where(e)})",
                       [f"# rulekit.jvp raises {msg}", *_tb_lines(e)])  # fmt: skip
        if failure is not None:
            lines = ["# rulekit.jvp on the last inputs", *prep.setup,
                     f"out, tangent = rulekit.jvp(f, ({self.names},), tangents)"]  # fmt: skip
            raise self.fail(failure[0], [*lines, *failure[1]])

        active = sorted(pos.values())
        try:
            failure = check_hvp(self.f, prep.build, prep.values, pos, seed, STATS)
        except Exception as e:
            msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            failure = (f"hvp error ({type(e).__name__} at {_where(e)})",
                       [f"# rulekit.hvp raises {msg}", *_tb_lines(e)])  # fmt: skip
        if failure is not None:
            lines = ["# rulekit.hvp of f in its differentiated inputs, on the last inputs",
                     *prep.setup, f"active = {active!r}  # positions of the differentiated inputs",
                     "g = lambda *a: f(*[a[active.index(i)] if i in active else x "
                     f"for i, x in enumerate(({self.names},))])",
                     "hv = rulekit.hvp(g, tuple(x for i, x in enumerate(inputs) if i in active),"
                     " v, mode=...)[1]"]  # fmt: skip
            raise self.fail(failure[0], [*lines, *failure[1]])

    @property
    def names(self) -> str:
        return ", ".join(s.name for s in self.program.params)

    def attempt(
        self, o: _Object, vg: Any, prep: _Prepared, xs: list[Any], desc: str, side: int
    ) -> tuple[str, list[str]] | str | None:
        """One call: None if all is well, "refused" for a clean refusal before any success,
        else (defect kind, comment lines with observed vs expected)."""
        p = self.program
        namespace = self.f.__globals__
        held = {s.name: x for s, x in zip(p.params, xs, strict=True)}
        held.update({s.name: namespace[s.name] for s in p.inputs if s.captured})
        before = {n: np.array(x, copy=True) for n, x in held.items()}
        STATS["engine calls"] += 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                # (a compiled object that traces on every call says so: correct, only slow)
                warnings.simplefilter("ignore", rulekit.RetraceWarning)
                value, grads = vg(*xs)
        except Exception as e:
            msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            if _is_refusal(e) and not o.compile and not any(self.succeeded):
                REFUSALS[f"{type(e).__name__} at {_where(e)}: {msg[:160]}"] += 1
                return "refused"
            if not _is_refusal(e):
                kind = "internal error"
            elif o.compile and self.succeeded[side]:
                kind = "refusal only with compile=True"  # (eager ran these very inputs)
            else:
                kind = "refusal depending on the layout"
            return f"{kind} ({type(e).__name__} at {_where(e)})", [f"# raises {msg}", *_tb_lines(e)]
        for s in p.inputs:
            x, b = held[s.name], before[s.name]
            if s.captured and namespace[s.name] is not x:
                return "input changed by the call", [f"# {desc}: global {s.name} rebound"]
            if not np.array_equal(np.asarray(x), b, equal_nan=True):
                lines = [
                    f"# {desc}: {s.name} changed",
                    f"# before: {_fmt(b)}",
                    f"# after: {_fmt(x)}",
                ]
                return "input changed by the call", lines
        vtol = VALUE_RTOL[prep.dtype] * prep.scale
        if np.ndim(value) != 0 or not abs(complex(value) - complex(prep.np_value)) <= vtol:
            return "wrong value", [
                f"# {desc}: value {value!r}",
                f"# numpy:             {prep.np_value!r} (tolerance {vtol:.1e})",
            ]
        gs = (grads,) if isinstance(self.argnums, int) else tuple(grads)
        if len(gs) != len(self.active):
            return "wrong number of gradients", [f"# got {len(gs)}"]
        kept = []
        for i, g in zip(self.active, gs, strict=True):
            s = p.inputs[i]
            x = held[s.name]
            want = np.asarray(x).dtype
            if (
                np.shape(g) != s.shape
                or np.asarray(g).dtype != want
                or (s.scalar and isinstance(g, np.ndarray))
            ):
                return "gradient shape/dtype", [
                    f"# {desc}: grad of {s.name} has shape {np.shape(g)}, "
                    f"dtype {np.asarray(g).dtype}, type {type(g).__name__}",
                    f"# expected shape {s.shape}, dtype {want}, type {type(x).__name__}",
                ]
            ga = np.asarray(g, dtype=np.complex128 if want.kind == "c" else np.float64)
            tol = grad_tolerance(prep.fds[i], prep.fd2s[i], _upcast(x), prep.scale, prep.dtype)
            err = np.abs(ga - prep.fds[i])
            STATS["gradients compared"] += 1
            if err.size and np.all(err <= tol):
                worst = float(np.max(err / np.maximum(tol, 1e-300)))
                CLOSEST[prep.dtype] = max(CLOSEST.get(prep.dtype, 0.0), worst)
            if not np.all(err <= tol):
                k = np.unravel_index(int(np.argmax(err - tol)), err.shape) if err.ndim else ()
                return "wrong gradient", [
                    f"# {desc}: wrong gradient of {s.name}",
                    f"# observed: {_fmt(g)}",
                    f"# expected (central differences): {_fmt(prep.fds[i])}",
                    f"# worst element {tuple(map(int, k))}: |error| {err[k]:.3g} "
                    f"> tolerance {tol[k]:.3g}",
                ]
            if o.copy and isinstance(g, np.ndarray):
                kept.append((o, f"{desc}, grad of {s.name}", g, g.copy()))
        if vg is o.vg:
            self.kept += kept
        return None


def _tb_lines(e: BaseException) -> list[str]:
    frames = traceback.extract_tb(e.__traceback__)[-4:]
    return [f"#   {fr.filename.rsplit('/', 1)[-1]}:{fr.lineno} in {fr.name}" for fr in frames]


def check_program(
    program: Program,
    plans: list[CallPlan],
    min_calls: int = 3,
    compiled: tuple[bool, ...] = (True, False),
) -> str:
    """Run the differential check; return "ok", "refused" or "ill-posed", or raise a Defect.

    `compiled`: a `compile=True` object is checked for each `copy` value given (the fuzzer
    draws one per program: the budget goes to more programs)."""
    STATS["programs"] += 1
    status = _Session(program, compiled).run(plans, min_calls)
    STATS[f"programs {status}"] += 1
    return status


__all__ = ["NAMESPACE", "CallPlan", "Defect", "check_program"]
