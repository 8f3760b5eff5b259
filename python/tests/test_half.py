"""Half precision in kernels (issue 21): dv_f16 conversions run on the backend under test
(tests/kernels/half.dvk) and compared with NumPy's float16 bit for bit: all 65,536 halves to
float32, and float32 / float64 inputs covering every rounding case (each half, the midpoints
between neighbours, a few ulps either side of both, subnormals, overflow to infinity, signed
zeros, NaNs quiet and signalling with their payloads) plus random bit patterns."""
import os

import numpy as np
import pytest

import devarray as cuda

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
rng = np.random.default_rng(21)


@pytest.fixture(scope="module")
def mod():
    with open(os.path.join(ROOT, "tests", "kernels", "half.dvk")) as f:
        return cuda.Module(f.read(), name="half.dvk")


def run(mod, name, src, out_dtype):
    out = np.empty(src.size, out_dtype)
    mod.get(name).forall(src.size, tpb=256)(cuda.In(src), cuda.Out(out), np.int32(src.size))
    return out


def numpy_cast(x, dtype):
    with np.errstate(all="ignore"):  # overflow to inf, NaN casts: the bits are what we check
        return x.astype(dtype)


def assert_same_bits(got, want, src, what):
    ubits = {2: np.uint16, 4: np.uint32, 8: np.uint64}
    g, w = got.view(ubits[got.itemsize]), want.view(ubits[want.itemsize])
    bad = np.nonzero(g != w)[0]
    if bad.size:
        s = src.view(ubits[src.itemsize])
        rows = ["  %#x -> got %#x, NumPy %#x" % (s[i], g[i], w[i]) for i in bad[:10]]
        pytest.fail("%s: %d of %d differ from NumPy:\n%s" % (what, bad.size, g.size, "\n".join(rows)))


ALL_HALVES = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)


def f32_from_bits(u):
    return np.asarray(u, np.uint64).astype(np.uint32).view(np.float32)


def f32_cases():
    """Every half as float32, every midpoint between neighbouring halves, each +-1 and +-2
    ulp; around every float32 exponent; NaNs; random bits."""
    h = ALL_HALVES[np.isfinite(ALL_HALVES)]
    pos = np.sort(np.unique(np.abs(h.astype(np.float64))))      # 0 .. 65504
    nxt = np.append(pos[1:], 65536.0)                             # the next half (65536: inf)
    mids = (pos + nxt) / 2                                        # exact in float32
    centres = np.concatenate([pos, mids]).astype(np.float32).view(np.uint32).astype(np.int64)
    near = (centres[:, None] + np.arange(-2, 3)[None, :]).ravel()
    near = near[(near >= 0) & (near < 0x7f800000)]
    exps = np.arange(256, dtype=np.int64) << 23
    mant = np.array([0, 1, 2, 0x1000, 0x1fff, 0x2000, 0x3fffff, 0x400000, 0x7fffff], np.int64)
    around_exps = (exps[:, None] | mant[None, :]).ravel()
    nans = np.array([0x7f800001, 0x7f801fff, 0x7f802000, 0x7fa00000, 0x7fc00000, 0x7fc00001,
                     0x7fffffff, 0x7f800000, 0x7fbfe001], np.int64)
    mags = np.concatenate([near, around_exps, nans])
    signed = np.concatenate([mags, mags | 0x80000000])
    rand = rng.integers(0, 1 << 32, size=1 << 20, dtype=np.uint64)
    return f32_from_bits(np.concatenate([signed.astype(np.uint64), rand]))


def f64_cases():
    """The same landmarks in float64, +-1 ulp and offsets below float32's resolution around
    each midpoint (where rounding through float32 would give another answer), exponents
    around the half range, NaNs, random bits."""
    h = ALL_HALVES[np.isfinite(ALL_HALVES)]
    pos = np.sort(np.unique(np.abs(h.astype(np.float64))))
    nxt = np.append(pos[1:], 65536.0)
    mids = (pos + nxt) / 2
    centres = np.concatenate([pos, mids]).view(np.uint64).astype(np.int64)
    offs = np.array([-(1 << 28), -(1 << 20), -2, -1, 0, 1, 2, 1 << 20, 1 << 28], np.int64)
    near = (centres[:, None] + offs[None, :]).ravel()
    near = near[(near >= 0) & (near < 0x7ff0000000000000)]
    exps = np.arange(980, 1060, dtype=np.int64) << 52
    mant = np.array([0, 1, 1 << 41, (1 << 42) - 1, 1 << 42, 1 << 51, (1 << 52) - 1], np.int64)
    around_exps = (exps[:, None] | mant[None, :]).ravel()
    nans = np.array([0x7ff0000000000001, 0x7ff000000000ffff, 0x7ff0040000000000,
                     0x7ff4000000000000, 0x7ff8000000000000, 0x7fffffffffffffff,
                     0x7ff0000000000000, 0x0000000000000001, 0x000fffffffffffff], np.int64)
    mags = np.concatenate([near, around_exps, nans]).astype(np.uint64)
    signed = np.concatenate([mags, mags | np.uint64(1 << 63)])
    rand = rng.integers(0, 1 << 64, size=1 << 19, dtype=np.uint64, endpoint=False)
    biased = (rand & np.uint64(0x800fffffffffffff)) | \
        (rng.integers(990, 1045, size=rand.size, dtype=np.uint64) << np.uint64(52))
    return np.concatenate([signed, rand, biased]).view(np.float64)


def test_every_half_to_float32(mod):
    got = run(mod, "f16_to_f32", ALL_HALVES, np.float32)
    assert_same_bits(got, numpy_cast(ALL_HALVES, np.float32), ALL_HALVES, "float16 -> float32")


def test_float32_to_half_every_rounding_case(mod):
    src = f32_cases()
    want = numpy_cast(src, np.float16)
    w = want.view(np.uint16)
    # The set reaches every half (both signs), overflow, signalling NaNs, ties both ways.
    assert np.unique(w).size >= 63488 and (w == 0x7c00).any() and (w == 0x7c01).any()
    assert (w == 0x7d00).any() and (w == 0xfe00).any()
    got = run(mod, "f32_to_f16", src, np.float16)
    assert_same_bits(got, want, src, "float32 -> float16")


def test_float64_to_half_rounds_once(mod):
    src = f64_cases()
    want = numpy_cast(src, np.float16)
    # Some of these round differently through float32: the direct rounding is what counts.
    via_f32 = numpy_cast(numpy_cast(src, np.float32), np.float16)
    assert (want.view(np.uint16) != via_f32.view(np.uint16)).sum() > 1000
    got = run(mod, "f64_to_f16", src, np.float16)
    assert_same_bits(got, want, src, "float64 -> float16")


def test_bits_accessors(mod):
    src = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    got = run(mod, "f16_bits", src, np.float16)
    assert_same_bits(got, (src ^ np.uint16(0x8000)).view(np.float16), src, "dv_f16_bits")


def test_host_library_conversions_match_numpy():
    # dv_half_from_float / dv_half_to_float (behind DV_ARG_F16) against NumPy, on the same
    # float32 cases as the kernels (every rounding case, NaN payloads, random bit patterns).
    import ctypes
    from devarray._lib import lib
    lib.dv_half_from_float.restype = ctypes.c_uint16
    lib.dv_half_from_float.argtypes = [ctypes.c_float]
    lib.dv_half_to_float.restype = ctypes.c_float
    lib.dv_half_to_float.argtypes = [ctypes.c_uint16]
    src = f32_cases()[::7]
    # ctypes goes through a Python float (a double), which quiets signalling NaNs: those
    # are left to tests/kernel/test_signature.c, which calls the function with their bits.
    u = src.view(np.uint32)
    src = src[~(((u & 0x7f800000) == 0x7f800000) & ((u & 0x7fffff) != 0) & ((u & 0x400000) == 0))]
    got = np.array([lib.dv_half_from_float(float(v)) for v in src], np.uint16)
    with np.errstate(over="ignore", invalid="ignore"):
        want = src.astype(np.float16).view(np.uint16)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, "float32 %r: 0x%04x, NumPy 0x%04x" % (src[bad[0]], got[bad[0]],
                                                               want[bad[0]])
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    back = np.array([lib.dv_half_to_float(int(h)) for h in halves], np.float32)
    finite = ~np.isnan(back)
    np.testing.assert_array_equal(back[finite], halves.view(np.float16).astype(np.float32)[finite])
