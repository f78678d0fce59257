"""`StatefulRRule`: rule objects that keep their buffers between calls.

A stateless rule for an in-place operation must allocate a copy of what it
overwrites on every call. A stateful rule keeps that memory: its forward pass
*pushes* a copy of the old value into a pooled buffer and its pullback *pops*
it back, so that after warm-up forward + pullback allocate nothing.

Saved state is a stack: a rule may be called again before earlier pullbacks
have run (forward a, forward b, pullback b, pullback a), and every pullback
pops exactly what its own forward pushed. A forward pass whose pullback never
runs (an abandoned trace) leaves its entry behind; the next pullback of an
*earlier* call discards everything pushed above its own entry, and `reset()`
discards everything, so an abandoned pass never leaks more than one entry
per live call nor hands a wrong buffer to a later one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["POOL_KEYS", "SaveToken", "StatefulRRule", "free_list"]

_BufKey = tuple[tuple[int, ...], str]


#: How many distinct (shape, dtype) keys a rule's pools keep free buffers for. A rule
#: that meets more shapes (a loop over growing sizes) drops the buffers of the oldest
#: key, so memory stays bounded; steady state (a few shapes, reused) never evicts.
POOL_KEYS = 8


def free_list(pool: dict[Any, list[Any]], key: Any) -> list[Any]:
    """The free list of `key` in a per-shape `pool` (made if new), keeping pools bounded.

    Past `POOL_KEYS` keys, the oldest key's free buffers are dropped (buffers in use
    are not in the pool and are unaffected). Rules with pools of their own use this too.
    """
    free = pool.get(key)
    if free is None:
        if len(pool) >= POOL_KEYS:
            del pool[next(iter(pool))]  # (dicts keep insertion order: the oldest key)
        free = pool[key] = []
    return free


class SaveToken:
    """What `StatefulRRule.save` returns: where the saved copy is on the stack."""

    __slots__ = ("buffer", "depth", "serial")

    def __init__(self, depth: int, buffer: np.ndarray, serial: int) -> None:
        self.depth = depth
        self.buffer = buffer
        self.serial = serial  # unique per push: a recycled buffer at the same depth is not ours


class StatefulRRule:
    """Base class for rules that keep buffers between calls.

    Subclasses implement ``__call__(self, f, *args, **kwargs) -> (CoDual, pullback)``
    like any rule, and use these helpers:

    * `save(x) -> token`: push a copy of array `x` into a reused buffer;
    * `restore(token, into)`: pop that copy back into `into` (and recycle it);
    * `push(shape, dtype) -> token`: push an uninitialised pooled buffer
      (`token.buffer`), e.g. for an output and its fdata that must live until
      the pullback; `pop(token)` recycles it. A forward that pushes several
      entries has its pullback pop them in reverse order.
    * `scratch(name, shape, dtype)`: a named work buffer reused across calls,
      reallocated only when its shape or dtype changes. It is for use *within*
      one forward or one pullback only (interleaved calls share it).

    The buffer pool is keyed by shape and dtype, so a change of shape allocates
    new buffers and never returns a wrong-shaped one. Free buffers are kept for
    at most `POOL_KEYS` shapes (oldest dropped first): memory stays bounded.
    """

    def __init__(self) -> None:
        self._stack: list[np.ndarray] = []
        self._serials: list[int] = []  # parallel to _stack
        self._next_serial = 0
        self._pool: dict[_BufKey, list[np.ndarray]] = {}
        self._scratch: dict[str, np.ndarray] = {}

    # -- saved copies: a LIFO stack over a pool of buffers ----------------

    def _take(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        free = self._pool.get((shape, dtype.str))
        if free:
            return free.pop()
        return np.empty(shape, dtype=dtype)

    def _recycle(self, buf: np.ndarray) -> None:
        free_list(self._pool, (buf.shape, buf.dtype.str)).append(buf)

    def _enter(self, buf: np.ndarray) -> SaveToken:
        self._stack.append(buf)
        serial = self._next_serial
        self._next_serial = serial + 1
        self._serials.append(serial)
        return SaveToken(len(self._stack) - 1, buf, serial)

    def push(self, shape: tuple[int, ...], dtype: Any) -> SaveToken:
        """Push an uninitialised pooled buffer of this shape and dtype; it is `token.buffer`."""
        return self._enter(self._take(tuple(shape), np.dtype(dtype)))

    def save(self, x: np.ndarray) -> SaveToken:
        """Push a copy of `x` (any memory layout) and return its token."""
        token = self.push(x.shape, x.dtype)
        np.copyto(token.buffer, x)
        return token

    def pop(self, token: SaveToken) -> np.ndarray:
        """Pop (and recycle) the buffer pushed under `token`; see `restore`."""
        return self.restore(token)

    def restore(self, token: SaveToken, into: np.ndarray | None = None) -> np.ndarray:
        """Pop the buffer saved under `token`, copying it into `into` if given.

        Entries pushed after `token` whose pullbacks never ran (abandoned
        forward passes) are discarded first. The returned buffer is recycled:
        read it before the next `push`/`save`.
        """
        stack, serials = self._stack, self._serials
        if token.depth >= len(stack) or serials[token.depth] != token.serial:
            raise RuntimeError(
                f"{type(self).__name__}: pullback called twice, or after reset(): "
                "its saved state is gone."
            )
        while len(stack) > token.depth + 1:
            serials.pop()
            self._recycle(stack.pop())
        serials.pop()
        buf = stack.pop()
        if into is not None:
            np.copyto(into, buf)
        self._recycle(buf)
        return buf

    def reset(self) -> None:
        """Forget all saved state (e.g. after a trace was abandoned); buffers are kept."""
        while self._stack:
            self._serials.pop()
            self._recycle(self._stack.pop())

    @property
    def depth(self) -> int:
        """How many saved entries are on the stack (0 when every pullback has run)."""
        return len(self._stack)

    # -- scratch buffers ----------------------------------------------------

    def scratch(self, name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A work buffer called `name`, reused while its shape and dtype stay the same."""
        buf = self._scratch.get(name)
        if buf is None or buf.shape != shape or buf.dtype != dtype:
            buf = self._scratch[name] = np.empty(shape, dtype=dtype)
        return buf

    def __call__(self, f: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        raise NotImplementedError(f"{type(self).__name__} must implement __call__")
