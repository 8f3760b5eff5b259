"""Memory hooks, scoped statistics, the out-of-memory handler and tracking (docs/memory_hooks.md).

``memory_hook(fn)`` is a context manager that calls ``fn(event)`` on every allocation and free
of the current context's device, pinned, mapped and managed memory (CuPy's memory hooks);
``memory_scope()`` counts what a block of code allocated, nested (RMM's statistics adaptor's
push/pop); ``set_oom_handler(fn)`` lets ``fn(nbytes, attempt)`` free or spill memory when a
device allocation fails and ask for a retry (RMM's failure-callback adaptor); ``tracking`` and
``live_handles()`` list what is alive with the Python line that made it.
"""

import contextlib
import ctypes
import json
import threading
import traceback
from collections import namedtuple

from . import _abi
from ._context import current_context
from ._lib import lib, check

__all__ = ["MemoryEvent", "memory_hook", "memory_scope", "MemoryScopeStats", "set_oom_handler",
           "enable_tracking", "tracking_enabled", "live_handles", "memory_snapshot"]

_KINDS = {_abi.DV_MEM_DEVICE: "device", _abi.DV_MEM_PINNED: "pinned",
          _abi.DV_MEM_MAPPED: "mapped", _abi.DV_MEM_MANAGED: "managed"}

#: One allocation or free: ``event`` is "alloc" or "free"; ``memory`` "device", "pinned",
#: "mapped" or "managed"; ``address`` the device buffer (device memory) or the host address;
#: ``offset`` the block's offset in the buffer; ``manager`` the memory manager's name
#: ("driver" for host memory).
MemoryEvent = namedtuple("MemoryEvent", "event memory nbytes address offset manager")


def _context(context):
    return context if context is not None else current_context()


# The C callbacks of installed hooks, kept alive while installed.
_alive = {}
_alive_lock = threading.Lock()


@contextlib.contextmanager
def memory_hook(fn, context=None):
    """Call ``fn(event)`` (a MemoryEvent) on every allocation and free of the context's memory
    while the block runs. The calls come on the thread that allocates or frees (a stream
    callback's thread included), one at a time; an exception in ``fn`` is printed and
    dropped (a free cannot fail). ``fn`` must not install hooks or open scopes."""
    ctx = _context(context)

    def trampoline(_ctx, ev, _user):
        e = ev.contents
        try:
            fn(MemoryEvent("alloc" if e.event == _abi.DV_MEMORY_ALLOC else "free",
                           _KINDS.get(e.memory, str(e.memory)), e.bytes, e.address or 0, e.offset,
                           (e.manager or b"").decode()))
        except Exception:  # noqa: BLE001 -- nowhere to raise it: report it, as ctypes would
            traceback.print_exc()

    cb = _abi.MEMORY_HOOK_FN(trampoline)
    hid = ctypes.c_int(0)
    check(lib.dv_memory_hook_add(ctx.handle, cb, None, ctypes.byref(hid)), "memory_hook")
    with _alive_lock:
        _alive[(id(ctx), hid.value)] = cb
    try:
        yield
    finally:
        check(lib.dv_memory_hook_remove(ctx.handle, hid.value), "memory_hook")
        with _alive_lock:
            _alive.pop((id(ctx), hid.value), None)


#: What a memory_scope saw: for each of device, pinned, mapped, managed, a ``Counts`` of
#: ``nbytes`` and ``allocations``, each a ``Counter(current, peak, total)``.
Counter = namedtuple("Counter", "current peak total")
Counts = namedtuple("Counts", "nbytes allocations")
MemoryScopeStats = namedtuple("MemoryScopeStats", "device pinned mapped managed")


def _counts(c):
    return Counts(Counter(c.bytes.current, c.bytes.peak, c.bytes.total),
                  Counter(c.allocations.current, c.allocations.peak, c.allocations.total))


class memory_scope:
    """Count the context's allocations and frees while the block runs (every thread's):
    ``with memory_scope() as s: ...`` then ``s.stats.device.nbytes.peak``. Scopes nest; an
    inner one's counts are folded into the enclosing one when it ends."""

    def __init__(self, context=None):
        self._ctx = context
        self.stats = None

    def __enter__(self):
        self._ctx = _context(self._ctx)
        check(lib.dv_memory_scope_push(self._ctx.handle), "memory_scope")
        return self

    def __exit__(self, *exc):
        out = _abi.dv_memory_scope_stats()
        check(lib.dv_memory_scope_pop(self._ctx.handle, ctypes.byref(out)), "memory_scope")
        self.stats = MemoryScopeStats(_counts(out.device), _counts(out.pinned), _counts(out.mapped),
                                      _counts(out.managed))
        return False


_oom = {}


def set_oom_handler(fn, max_retries=3, context=None):
    """When a device allocation fails after devarray's own flush of the pending deallocations,
    call ``fn(nbytes, attempt)`` (attempt from 1); a true result flushes and tries again, at
    most ``max_retries`` times. ``fn`` may free or spill arrays. ``None`` removes the handler.
    An exception in ``fn`` counts as giving up (it is printed)."""
    ctx = _context(context)
    if fn is None:
        check(lib.dv_memory_set_oom_handler(ctx.handle, _abi.OOM_FN(0), None, 0), "set_oom_handler")
        _oom.pop(id(ctx), None)
        return

    def trampoline(_ctx, nbytes, attempt, _user):
        try:
            return 1 if fn(nbytes, attempt) else 0
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            return 0

    cb = _abi.OOM_FN(trampoline)
    check(lib.dv_memory_set_oom_handler(ctx.handle, cb, None, int(max_retries)), "set_oom_handler")
    _oom[id(ctx)] = cb


def enable_tracking(on=True):
    """Turn tracking on or off (process-wide). Handles made while it is on are listed by
    live_handles(); with DV_TRACK=1 in the environment it is on from the start, and each
    handle's origin is the Python line that made it."""
    check(lib.dv_tracking_enable(1 if on else 0), "enable_tracking")


def tracking_enabled():
    """Whether tracking is on."""
    return bool(lib.dv_tracking_enabled())


def _json(fn, handle, where):
    need = ctypes.c_size_t(0)
    for _ in range(8):
        check(fn(handle, None, 0, ctypes.byref(need)), where)
        buf = ctypes.create_string_buffer(need.value + 256)
        rc = fn(handle, buf, len(buf), ctypes.byref(need))
        if rc == _abi.DV_OK:
            return json.loads(buf.value.decode())
        if rc != _abi.DV_ERR_INVALID_ARGUMENT:  # grown meanwhile: measure again
            check(rc, where)
    check(rc, where)


def live_handles(context=None, all_contexts=False):
    """The tracked live handles of the context (every context's with all_contexts=True): a
    list of dicts with kind, seq, origin and, for arrays, memory, bytes and what."""
    handle = None if all_contexts else _context(context).handle
    return _json(lib.dv_tracking_snapshot_json, handle, "live_handles")["live"]


def memory_snapshot(context=None):
    """The context's memory snapshot (dv_memory_snapshot_json) as a dict: the pool's segments
    and blocks, and with tracking on the live handles ("tracking")."""
    return _json(lib.dv_memory_snapshot_json, _context(context).handle, "memory_snapshot")
