"""Streams and events."""

import contextlib
import ctypes

from ._context import current_context
from ._lib import lib, check

class Stream:
    """A devarray stream (Numba's cuda.stream()).

    Host arrays used by asynchronous work on the stream (copy_to_host into a NumPy array,
    to_device of one, kernel launches with NumPy arguments) are kept alive by the stream
    until its next synchronize().
    """

    def __init__(self, handle, owned, ctx):
        self.handle = handle
        self._owned = owned
        self._ctx = ctx
        self._keep = []

    def __repr__(self):
        return "<devarray.Stream %#x on %s>" % (self.handle or 0, self._ctx.backend)

    def __int__(self):
        return self.handle or 0

    def __bool__(self):
        return True

    def synchronize(self):
        """Block until all work queued on the stream is complete."""
        st = lib.dv_stream_synchronize(self.handle)
        self._keep = []
        check(st, "stream.synchronize")

    def query(self):
        """True when all queued work is complete (never blocks)."""
        return lib.dv_stream_query(self.handle) == 0

    @contextlib.contextmanager
    def auto_synchronize(self):
        """A context manager that synchronizes the stream when the block exits."""
        check(lib.dv_stream_auto_sync_begin(self.handle), "auto_synchronize")
        try:
            yield self
        finally:
            st = lib.dv_stream_auto_sync_end(self.handle)
            self._keep = []
            check(st, "auto_synchronize")

    def _hold(self, obj):
        self._keep.append(obj)

    def __del__(self):
        if self._owned and self.handle and lib is not None:
            try:
                lib.dv_stream_release(self.handle)
            except Exception:
                pass
            self.handle = None


def stream():
    """A new stream on the current context (Numba's cuda.stream())."""
    ctx = current_context()
    h = ctypes.c_void_p()
    check(lib.dv_stream_create(ctx.handle, 0, ctypes.byref(h)), "stream")
    return Stream(h.value, True, ctx)


def _borrowed(fn):
    ctx = current_context()
    return Stream(fn(ctx.handle), False, ctx)


def default_stream():
    """The context's default stream (work on it is asynchronous, as on any stream)."""
    return _borrowed(lib.dv_context_default_stream)


def legacy_default_stream():
    return _borrowed(lib.dv_context_legacy_stream)


def per_thread_default_stream():
    return _borrowed(lib.dv_context_per_thread_stream)


def _stream_handle(stream):
    """None for 0/None (synchronous on the default stream), else the C handle."""
    if not stream:
        return None
    if isinstance(stream, Stream):
        return stream.handle
    raise TypeError("stream must be 0 or a devarray Stream, not %r" % (stream,))


class Event:
    """An event (Numba's cuda.event())."""

    def __init__(self, timing=True):
        ctx = current_context()
        h = ctypes.c_void_p()
        check(lib.dv_event_create(ctx.handle, 1 if timing else 0, ctypes.byref(h)), "event")
        self.handle = h.value
        self._ctx = ctx

    def record(self, stream=0):
        """Record the event on `stream` (0: the default stream)."""
        check(lib.dv_event_record(self.handle, _stream_handle(stream)), "event.record")

    def wait(self, stream=0):
        """Make `stream` wait for the event's last record (never blocks the host)."""
        s = _stream_handle(stream) or lib.dv_context_default_stream(self._ctx.handle)
        check(lib.dv_stream_wait_event(s, self.handle), "event.wait")

    def query(self):
        """True when the last record completed (or the event was never recorded)."""
        return lib.dv_event_query(self.handle) == 0

    def synchronize(self):
        check(lib.dv_event_synchronize(self.handle), "event.synchronize")

    def elapsed_time(self, evtend):
        """Milliseconds between this event and `evtend` (both timing events, completed)."""
        return event_elapsed_time(self, evtend)

    def __del__(self):
        if getattr(self, "handle", None) and lib is not None:
            lib.dv_event_release(self.handle)
            self.handle = None


def event(timing=True):
    """A new event (Numba's cuda.event(timing=True))."""
    return Event(timing)


def event_elapsed_time(evtstart, evtend):
    ms = ctypes.c_float()
    check(lib.dv_event_elapsed_ms(evtstart.handle, evtend.handle, ctypes.byref(ms)),
          "event_elapsed_time")
    return ms.value
