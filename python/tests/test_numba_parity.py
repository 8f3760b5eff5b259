"""The same memory program, written for numba.cuda, run with numba.cuda (its simulator,
NUMBA_ENABLE_CUDASIM=1) and with devarray: only the module changes, results must agree.
Skipped by name when Numba is missing."""
import os

import numpy as np
import pytest

import devarray


def numba_cuda():
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    try:
        from numba import cuda
    except Exception as e:  # pragma: no cover - depends on the machine
        pytest.skip("numba unavailable: %s" % e)
    return cuda


def program(cuda):
    """Numba's memory API only; returns what a user would look at."""
    out = {}
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    d = cuda.to_device(a)
    out["shape"] = (d.shape, d.strides, d.dtype, d.size, d.nbytes, d.ndim, len(d))
    out["contig"] = (d.is_c_contiguous(), d.is_f_contiguous())
    out["slice"] = d[1:3, ::2].copy_to_host()
    out["row"] = d[2].copy_to_host()
    out["item"] = d[3, 4]
    out["ravel"] = d.ravel().copy_to_host()
    out["reshape"] = d.reshape(6, 4).copy_to_host()
    out["split"] = [p.copy_to_host() for p in d.ravel().split(10)]
    like = cuda.device_array_like(a)
    like.copy_to_device(a * 2)
    out["like"] = like.copy_to_host()
    e = cuda.device_array((3, 2), dtype=np.int32, order="F")
    out["F"] = (e.strides, e.is_f_contiguous())
    d[0] = 7
    d[1, :] = np.arange(6)
    out["setitem"] = d.copy_to_host()
    p = cuda.pinned_array((4, 6), dtype=np.float32)
    s = cuda.stream()
    with s.auto_synchronize():
        d.copy_to_host(p, stream=s)
    out["pinned"] = p.copy()
    h = np.ones(8)
    with cuda.pinned(h):
        out["in_pinned"] = cuda.to_device(h).copy_to_host()
    with cuda.defer_cleanup():
        for _ in range(5):
            tmp = cuda.to_device(np.zeros(16))
        del tmp
    ev0, ev1 = cuda.event(), cuda.event()
    ev0.record(s)
    cuda.to_device(a, stream=s)
    ev1.record(s)
    ev1.synchronize()
    out["elapsed_ok"] = ev0.elapsed_time(ev1) >= 0
    out["array"] = np.asarray(cuda.to_device(a.T))
    return out


def _numba_reference():
    """program() under Numba's simulator, in a process of its own: a process that has
    imported the real numba.cuda (devarray.jit does, for Numba's typing rules) cannot switch
    to the simulator."""
    import pickle
    import subprocess
    import sys
    code = ("import os, pickle, sys\n"
            "os.environ['NUMBA_ENABLE_CUDASIM'] = '1'\n"
            "sys.path.insert(0, %r)\n"
            "sys.path.insert(0, %r)\n"
            "import test_numba_parity as t\n"
            "sys.stdout.buffer.write(pickle.dumps(t.program(t.numba_cuda())))\n"
            % (os.path.dirname(os.path.abspath(__file__)),
               os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")))
    try:
        import numba  # noqa: F401
    except ImportError as e:
        pytest.skip("numba unavailable: %s" % e)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       env=dict(os.environ, NUMBA_ENABLE_CUDASIM="1"))
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return pickle.loads(r.stdout)


def test_same_results_as_numba():
    ref = _numba_reference()
    got = program(devarray)
    assert ref.keys() == got.keys()
    for k in ref:
        r, g = ref[k], got[k]
        if isinstance(r, list):
            assert len(r) == len(g), k
            for x, y in zip(r, g):
                np.testing.assert_array_equal(x, y, err_msg=k)
        elif isinstance(r, np.ndarray):
            np.testing.assert_array_equal(r, g, err_msg=k)
            assert r.dtype == g.dtype, k
        else:
            assert r == g, k
