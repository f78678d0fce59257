"""Rule packages rulekit loads by itself (rulekit/_loading.py): entry points and `registry.defer`.

`import rulekit` is enough: the modules of the `rulekit.rules` entry-point group
(the bundled `rules` among them) are imported before the first lookup, once and
thread-safely; `registry.defer(trigger, module)` imports `module` at the first
lookup that finds `trigger` imported; `registry.load_all()` imports everything.
Tests that need a fresh process (what `import rulekit` imports, entry points)
run one; the others defer modules written to a temporary directory.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import rulekit
from rulekit import Array, CoDual, NoRData, RulePackageError, registry, zero_fdata

pytestmark = pytest.mark.usefixtures("registrations")  # (tests/conftest.py)


def run(code: str, path: pathlib.Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter (with `path` first on PYTHONPATH)."""
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(path), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip


def write(root: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def entry_point(root: pathlib.Path, name: str, module: str) -> None:
    """Declare a `rulekit.rules` entry point `name = module`, as an installed distribution."""
    write(
        root,
        {
            f"{name}_dist-0.1.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}-dist\n"
            "Version: 0.1\n",
            f"{name}_dist-0.1.dist-info/entry_points.txt": f"[rulekit.rules]\n{name} = {module}\n",
        },
    )


# -- import rulekit: fast, and nothing heavy ----------------------------------------------


def test_import_rulekit_imports_no_rules_scipy_or_numba_and_registers_only_its_own() -> None:
    proc = run(
        """
        import sys, rulekit
        heavy = ("rules", "scipy", "numba", "importlib.metadata", "testutils", "hypothesis")
        print(sorted(m for m in sys.modules if m.split(".")[0] in heavy or m in heavy))
        regs = [r for rs in rulekit.registry._by_f.values() for r in rs]
        print(sorted(r.module for r in regs))  # (only scan's and checkpoint's own rules)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["[]", "['rulekit._checkpoint', 'rulekit._scan']"]


def test_import_rulekit_leaves_the_transformations_to_their_first_use() -> None:
    """`import rulekit` compiles none of forward mode, the nested levels or the scipy.optimize
    helper; the first use of a name imports it. (How long the import takes is measured
    side by side with `import numpy` in benchmarks/bench_import.py, not here: a timed test
    on this noisy machine fails on load, not on code.)"""
    proc = run(
        """
        import sys, rulekit
        lazy = ("_transforms", "_optimize", "_nested", "_forward", "_reverse_level")
        print(sorted(m for m in sys.modules if m.removeprefix("rulekit.") in lazy))
        print(rulekit.jvp.__module__, rulekit.scipy_objective.__module__, "hvp" in dir(rulekit))
        print(sorted(m for m in sys.modules if m.removeprefix("rulekit.") in lazy))
        try:
            rulekit.no_such_name
        except AttributeError as e:
            print(e)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "[]",
        "rulekit._transforms rulekit._optimize True",
        "['rulekit._forward', 'rulekit._nested', 'rulekit._optimize', 'rulekit._reverse_level', "
        "'rulekit._transforms']",
        "module 'rulekit' has no attribute 'no_such_name'",
    ]


def test_the_first_gradient_loads_the_bundled_rules() -> None:
    proc = run(
        """
        import sys
        import numpy as np
        import rulekit
        assert "rules" not in sys.modules
        g = rulekit.grad(lambda x: np.sum(np.sin(x)))(np.zeros(3))
        assert "rules" in sys.modules and np.allclose(g, 1.0)
        print("ok")
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


# -- entry points ---------------------------------------------------------------------------

RULE_MODULE = """
    import time
    import numpy as np
    import rulekit
    from rulekit import Array, CoDual, NoRData, zero_fdata
    import {target}

    IMPORTS = getattr({target}, "IMPORTS", 0) + 1
    {target}.IMPORTS = IMPORTS
    time.sleep({sleep})  # (a slow import: other threads must wait for it)
    rulekit.registry.find(rulekit.signature_of(np.sin, np.ones(2)))  # (a lookup while importing)

    def double_rule(f, x):
        y = CoDual(2 * x.x, zero_fdata(2 * x.x))

        def pullback(dy):
            if x.dx is not None:
                x.dx += 2 * y.dx
            return NoRData(), NoRData()

        return y, pullback

    rulekit.rrule.register({target}.double, Array[np.floating])(double_rule)
"""

TARGET = """
    import rulekit

    @rulekit.primitive
    def double(x):
        return 2 * x
"""


def test_entry_point_modules_load_once_before_the_first_lookup_from_any_thread(
    tmp_path: pathlib.Path,
) -> None:
    entry_point(tmp_path, "slowrules", "slow_rules")
    write(
        tmp_path,
        {"slow_rules.py": RULE_MODULE.format(target="doubling", sleep=0.5), "doubling.py": TARGET},
    )
    proc = run(
        """
        import sys, threading
        import numpy as np
        import rulekit, doubling
        assert "slow_rules" not in sys.modules
        results, errors = [], []

        def work():
            try:
                results.append(rulekit.grad(lambda x: np.sum(doubling.double(x)))(np.ones(2)))
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert len(results) == 4 and all(np.array_equal(r, [2.0, 2.0]) for r in results)
        print(doubling.IMPORTS)
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1"


def test_a_registration_made_before_the_first_lookup_beats_a_loaded_one(
    tmp_path: pathlib.Path,
) -> None:
    entry_point(tmp_path, "bundled", "bundled_rules")
    write(
        tmp_path,
        {"bundled_rules.py": RULE_MODULE.format(target="doubling", sleep=0), "doubling.py": TARGET},
    )
    proc = run(
        """
        import numpy as np
        import rulekit, doubling

        def mine(f, x):
            raise NotImplementedError

        rulekit.rrule.register(doubling.double, rulekit.Array[np.floating])(mine)
        assert rulekit.registry.which(doubling.double, np.ones(2)).impl is mine
        print("ok")
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr


def test_an_entry_point_that_fails_to_import_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    entry_point(tmp_path, "broken", "broken_rules")
    write(tmp_path, {"broken_rules.py": "raise ValueError('a bug in the rule package')\n"})
    proc = run(
        """
        import numpy as np
        import rulekit
        for attempt in range(2):  # (not imported: it raises again)
            try:
                rulekit.grad(lambda x: np.sum(x))(np.ones(2))
            except rulekit.RulePackageError as e:
                assert isinstance(e.__cause__, ValueError) and e.name == "broken_rules"
                print(e)
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("importing the rule package broken_rules, named by the ")
    assert "rulekit.rules entry point broken = 'broken_rules'" in lines[0]
    assert "ValueError: a bug in the rule package" in lines[0]


# -- registry.defer -----------------------------------------------------------------------


@pytest.fixture
def tmp_modules(tmp_path: pathlib.Path) -> Iterator[tuple[pathlib.Path, str]]:
    """A directory on sys.path and a unique prefix for module names; deferrals and modules
    made by the test are dropped afterwards."""
    prefix = f"defer_{uuid.uuid4().hex[:8]}"
    sys.path.insert(0, str(tmp_path))
    loader: Any = registry._loader
    pending = list(loader._pending)
    yield tmp_path, prefix
    sys.path.remove(str(tmp_path))
    loader._pending[:] = pending
    for name in [m for m in sys.modules if m.startswith(prefix)]:
        del sys.modules[name]


def _rule_for(f: Any) -> Any:
    def rule(fc: CoDual, x: CoDual) -> Any:
        y = CoDual(f(x.x), zero_fdata(f(x.x)))
        return y, lambda dy: (NoRData(), NoRData())

    return rule


def deferred_package(root: pathlib.Path, prefix: str) -> None:
    """`{prefix}_lib` (a library), `{prefix}_rules` (its rules, deferred by `{prefix}_pkg`)."""
    write(
        root,
        {
            f"{prefix}_lib.py": "import rulekit\n\n@rulekit.primitive\ndef f(x):\n    return x\n",
            f"{prefix}_pkg/__init__.py": (
                "import rulekit\n"
                f"rulekit.registry.defer('{prefix}_lib', '{prefix}_pkg.lib_rules')\n"
            ),
            f"{prefix}_pkg/lib_rules.py": (
                "import numpy as np\nimport rulekit\n"
                f"import {prefix}_lib as lib\n"
                "rulekit.rrule.register(lib.f, rulekit.Array[np.floating])(lambda f, x: None)\n"
            ),
        },
    )


def test_a_deferred_module_loads_at_the_first_lookup_after_its_trigger(
    tmp_modules: tuple[pathlib.Path, str],
) -> None:
    root, prefix = tmp_modules
    deferred_package(root, prefix)
    __import__(f"{prefix}_pkg")
    assert (f"{prefix}_lib", f"{prefix}_pkg.lib_rules") in registry.deferred()
    registry.find(rulekit.signature_of(np.cos, np.ones(3)))  # the trigger is not imported
    assert f"{prefix}_pkg.lib_rules" not in sys.modules
    lib = __import__(f"{prefix}_lib")
    reg = registry.which(lib.f, np.ones(3))  # (a cache miss: the deferred module loads)
    assert f"{prefix}_pkg.lib_rules" in sys.modules
    assert reg.f is lib.f and reg.meta["importing"] == f"{prefix}_pkg.lib_rules"
    assert (f"{prefix}_lib", f"{prefix}_pkg.lib_rules") not in registry.deferred()


def test_load_all_imports_deferred_modules_whatever_their_triggers(
    tmp_modules: tuple[pathlib.Path, str],
) -> None:
    root, prefix = tmp_modules
    deferred_package(root, prefix)
    __import__(f"{prefix}_pkg")
    registry.load_all("some_other_package")  # (deferred by another package: left alone)
    assert f"{prefix}_pkg.lib_rules" not in sys.modules
    registry.load_all(f"{prefix}_pkg")
    assert f"{prefix}_pkg.lib_rules" in sys.modules and f"{prefix}_lib" in sys.modules
    assert registry.deferred() == [d for d in registry.deferred() if prefix not in d[1]]


def test_a_deferred_module_that_fails_raises_at_the_lookup_and_stays_pending(
    tmp_modules: tuple[pathlib.Path, str],
) -> None:
    root, prefix = tmp_modules
    write(root, {f"{prefix}_bad.py": "import no_such_module_anywhere\n"})
    registry.defer("numpy", f"{prefix}_bad")
    for _ in range(2):
        with pytest.raises(RulePackageError, match=rf"registry.defer\('numpy', '{prefix}_bad'\)"):
            registry.find(rulekit.signature_of(np.tan, np.ones(3)))
    assert ("numpy", f"{prefix}_bad") in registry.deferred()


def test_defer_takes_module_names() -> None:
    with pytest.raises(TypeError, match="dotted module name"):
        registry.defer("scipy.special", "rules/scipy/special.py")


def test_a_rule_registered_after_the_trigger_replaces_the_deferred_one(
    tmp_modules: tuple[pathlib.Path, str],
) -> None:
    root, prefix = tmp_modules
    deferred_package(root, prefix)
    __import__(f"{prefix}_pkg")
    lib = __import__(f"{prefix}_lib")
    calls: list[Any] = []

    def rule(fc: CoDual, x: CoDual) -> Any:
        calls.append(x.x)
        y = CoDual(x.x.copy(), zero_fdata(x.x))

        def pullback(dy: Any) -> Any:
            if x.dx is not None:
                x.dx += y.dx
            return NoRData(), NoRData()

        return y, pullback

    rulekit.rrule.register(lib.f, Array[np.floating])(rule)  # (the deferred module loads first)
    assert f"{prefix}_pkg.lib_rules" in sys.modules
    g = rulekit.grad(lambda x: np.sum(lib.f(x)))(np.ones(2))
    assert np.array_equal(g, [1.0, 1.0]) and len(calls) == 1


A_, B_, W_ = np.array([[3.0, 1.0], [1.0, 2.0]]), np.array([1.0, -1.0]), np.array([1.0, 2.0])


def _grad(A: Any) -> Any:
    """∂(w·A⁻¹b)/∂A = −A⁻ᵀw (A⁻¹b)ᵀ"""
    return -np.outer(np.linalg.solve(A.T, W_), np.linalg.solve(A, B_))


#: the first call of the process, and its value computed here
FIRST_CALLS = {
    "jvp": ("rulekit.jvp(lambda A: scipy.linalg.solve(A, b), (A,), (np.eye(2),))[1]",
            -np.linalg.solve(A_, np.linalg.solve(A_, B_))),
    "grad": ("rulekit.grad(lambda A: scipy.linalg.solve(A, b) @ w)(A)", _grad(A_)),
    "hessian": ("rulekit.hessian(lambda A: scipy.linalg.solve(A, b) @ w)(A)",
                np.stack([(_grad(A_ + 1e-6 * e.reshape(2, 2)) - _grad(A_ - 1e-6 * e.reshape(2, 2)))
                          / 2e-6 for e in np.eye(4)], axis=-1).reshape(2, 2, 2, 2)),
}  # fmt: skip


@pytest.mark.parametrize("first", FIRST_CALLS)
def test_a_first_transformation_loads_the_rule_packages_before_it_runs_f(first: str) -> None:
    """A transformation as the first call of a process, scipy.linalg imported: the rule
    packages due load before f runs, and those they defer whose trigger is imported (the
    bundled scipy rules) too, so scipy's names reach their rules on the first call."""
    proc = run(
        f"""
        import numpy as np, scipy.linalg, rulekit
        A, b, w = np.array([[3.0, 1.0], [1.0, 2.0]]), np.array([1.0, -1.0]), np.array([1.0, 2.0])
        print(np.asarray({FIRST_CALLS[first][0]}).ravel().tolist())
        """
    )
    assert proc.returncode == 0, proc.stderr
    got = np.array(json.loads(proc.stdout))
    np.testing.assert_allclose(got, FIRST_CALLS[first][1].ravel(), rtol=1e-7, atol=1e-9)
