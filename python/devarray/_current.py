"""The current-context registry: which Context is current, every open one, the lock that
orders opening and closing them. State only: opening a context (current_context) and closing
it are _context's; the modules below _context (host memory, pointers, configuration) read
the registry here instead of importing _context.
"""

import threading
import weakref

lock = threading.RLock()    # held while the current context is opened, replaced or closed
ctx = None                  # the current Context, or None (the next current_context() opens one)
live = weakref.WeakSet()    # every open Context (devarray.config's limits reach them all)


def by_handle(handle):
    """The open Context whose C context is `handle`, or None."""
    return next((c for c in list(live) if c.handle == handle), None)


def handle():
    """The current context's C handle, or None when no context is current."""
    c = ctx
    return c.handle if c is not None else None


def apply_dealloc_limits(count, ratio):
    """Give every open context the limits (devarray.config's assignments)."""
    for c in list(live):
        c._apply_dealloc_limits(count, ratio)
