"""Numba's device list and driver object: ``gpus`` (``len``, iteration, ``gpus[i]`` as a
context manager, ``gpus.current``), ``require_context`` and ``driver.driver`` (the device
count and memory information only: devarray drives several backends, not the CUDA driver
API; docs/semantics.md, "Python binding")."""

import ctypes
import functools

from . import _context, _current
from ._lib import lib, check, DevarrayError

_MAX_DEVICES = 64
_counts = {}  # backend name -> number of devices


def _opens(backend, device):
    """Whether a context of `backend` (None: the configured one) opens on `device`; and the
    backend that opened (None when none did)."""
    cfg = ctypes.c_void_p()
    check(lib.dv_config_create(ctypes.byref(cfg)), "dv_config_create")
    try:
        if backend:
            check(lib.dv_config_set(cfg, b"backend", backend.encode()), "gpus")
        for opt in (b"device", b"opencl_device", b"cuda_device", b"hip_device"):
            check(lib.dv_config_set(cfg, opt, str(device).encode()), "gpus")
        h = ctypes.c_void_p()
        if lib.dv_context_create(cfg, ctypes.byref(h)):
            return None
    finally:
        lib.dv_config_destroy(cfg)
    name = lib.dv_context_backend(h.value).decode()
    lib.dv_context_destroy(h.value)
    return name


def _device_count():
    """Devices of the current context's backend (else the configured one): the ordinals
    from 0 on that a context opens on (the host simulator has one)."""
    c = _current.ctx
    backend = c.backend if c is not None else _context._backend
    if backend in _counts:
        return _counts[backend]
    n = 0
    while n < _MAX_DEVICES:
        if c is not None and n == c.device_id:
            n += 1
            continue
        name = _opens(backend, n)
        if name is None:
            break
        backend = backend or name
        n += 1
    if c is None and n == 0:
        _context.current_context()  # raises the backend's reason for opening nothing
    _counts[backend] = n
    return n


class GPU:
    """Device `id` of the backend (Numba's ``gpus[i]``): ``with gpus[i]:`` makes it the
    current device (select_device) and makes the earlier one current again on exit."""

    def __init__(self, device_id):
        self.id = device_id
        self._prev = []

    def __enter__(self):
        c = _current.ctx
        self._prev.append(c.device_id if c is not None else None)
        _context.select_device(self.id)
        return self

    def __exit__(self, *exc):
        prev = self._prev.pop()
        if prev is not None and prev != self.id:
            _context.select_device(prev)
        return False

    def __int__(self):
        return self.id

    def __repr__(self):
        return "<devarray GPU %d>" % self.id


class _DeviceList:
    """Numba's ``cuda.gpus``: the backend's devices."""

    def __len__(self):
        return _device_count()

    def __iter__(self):
        return iter([GPU(i) for i in range(len(self))])

    def __getitem__(self, i):
        n = len(self)
        i = int(i)
        if not -n <= i < n:
            raise IndexError("gpus[%d]: the backend has %d device(s)" % (i, n))
        return GPU(i % n)

    @property
    def current(self):
        """The current context's Device (its ``id``), or None when no context is current."""
        c = _current.ctx
        return c.device if c is not None else None

    def __repr__(self):
        return "<devarray gpus: %d device(s)>" % len(self)


gpus = _DeviceList()


def _device_info(backend, device):
    """The Device of ordinal `device` of `backend`: the current context's, else read from a
    context opened for it and closed again (None when none opens)."""
    c = _current.ctx
    if c is not None and c.device_id == device and (backend in (None, c.backend)):
        return c.device
    cfg = ctypes.c_void_p()
    check(lib.dv_config_create(ctypes.byref(cfg)), "dv_config_create")
    try:
        if backend:
            check(lib.dv_config_set(cfg, b"backend", backend.encode()), "detect")
        for opt in (b"device", b"opencl_device", b"cuda_device", b"hip_device"):
            check(lib.dv_config_set(cfg, opt, str(device).encode()), "detect")
        h = ctypes.c_void_p()
        if lib.dv_context_create(cfg, ctypes.byref(h)):
            return None
    finally:
        lib.dv_config_destroy(cfg)

    class _Open:  # what Device reads: a handle
        handle = h.value
    try:
        return _context.Device(_Open, device)
    finally:
        lib.dv_context_destroy(h.value)


def detect():
    """Numba's detect(): print the devices of the backend (the current context's, else the
    configured one) with their attributes, and return whether any was found. Every device a
    context opens on is usable by devarray ("[SUPPORTED]"); compute capability is CUDA's
    (0.0 on the host simulator and OpenCL, which have none)."""
    try:
        n = _device_count()
    except DevarrayError as e:
        print("Found 0 devices (%s)" % e)
        print("Summary:")
        print("\t0/0 devices are supported")
        return False
    c = _current.ctx
    backend = c.backend if c is not None else _context._backend
    found = []
    for i in range(n):
        dev = _device_info(backend, i)
        if dev is not None:
            found.append(dev)
    print("Found %d devices (backend %s)" % (len(found), found[0].backend if found
                                              else backend or "auto"))
    for dev in found:
        print("id %d    %20s %40s" % (dev.id, dev.name, "[SUPPORTED]"))
        for key, val in (("Backend", dev.backend), ("Vendor", dev.vendor),
                         ("Compute Capability", "%d.%d" % dev.compute_capability),
                         ("PCI Bus ID", dev.pci_bus_id or "(none)"),
                         ("Total Memory", "%d bytes" % dev.total_memory),
                         ("Can Map Host Memory", "Yes" if dev.CAN_MAP_HOST_MEMORY else "No"),
                         ("Managed Memory", "Yes" if dev.MANAGED_MEMORY else "No")):
            print("%40s: %s" % (key, val))
    print("Summary:")
    print("\t%d/%d devices are supported" % (len(found), len(found)))
    return bool(found)


def list_devices():
    """Numba's list_devices(): the device list (gpus)."""
    return gpus


def require_context(fn):
    """Decorator (Numba's): the current context exists (is created) before `fn` runs."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _context.current_context()
        return fn(*args, **kwargs)
    return wrapper


def _store(out, value):
    """Write `value` through `out`: ctypes.byref(x), ctypes.pointer(x) or x itself."""
    target = getattr(out, "_obj", None)  # byref()'s object
    if target is None:
        target = out.contents if isinstance(out, ctypes._Pointer) else out
    if not hasattr(target, "value"):
        raise TypeError("cuMemGetInfo: outputs must be ctypes integers, passed by byref()")
    target.value = value


class DriverObject:
    """``driver.driver``: Numba's CUDA driver object reduced to what devarray can give on
    every backend: get_device_count() and cuMemGetInfo(byref(free), byref(total)) (the
    current context's memory information). Any other attribute raises AttributeError."""

    def get_device_count(self):
        """Devices of the backend (len(gpus))."""
        return _device_count()

    def cuMemGetInfo(self, free, total):
        """Store the current context's free and total memory, in bytes, in `free` and
        `total` (ctypes integers passed by byref, as with Numba's ctypes binding)."""
        info = _context.current_context().get_memory_info()
        _store(free, info.free)
        _store(total, info.total)

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        raise AttributeError("devarray's driver object has only get_device_count and "
                             "cuMemGetInfo (devarray drives several backends, not the CUDA "
                             "driver API): no %r" % attr)

    def __repr__(self):
        return "<devarray driver object: get_device_count, cuMemGetInfo>"


driver = DriverObject()
