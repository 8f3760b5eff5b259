#!/usr/bin/env python3
"""NumPy as the oracle for devarray's layout rules.

Generates random shapes and byte strides, asks NumPy for contiguity flags,
no-copy reshape results and slicing results, and pipes the cases to the C
checker (test_layout_check), which must agree on every one.
Usage: layout_oracle.py CHECKER [N]   (exit 77 when NumPy is missing)
"""
import random
import subprocess
import sys

try:
    import numpy as np
    from numpy.lib.stride_tricks import as_strided
except ImportError:
    print("SKIPPED: layout oracle: python3-numpy is not installed")
    sys.exit(77)

ITEM = 8
rng = random.Random(20261122)


def rand_layout():
    nd = rng.randint(0, 4)
    shape = [rng.choice([0, 1, 1, 2, 3, 4, 5]) if rng.random() < 0.15 else rng.randint(1, 5) for _ in range(nd)]
    kind = rng.random()
    if kind < 0.4:  # dense, random order
        perm = list(range(nd))
        rng.shuffle(perm)
        strides = [0] * nd
        s = ITEM
        for k in reversed(perm):
            strides[k] = s
            s *= max(shape[k], 1)
        if rng.random() < 0.5:  # then a step
            strides = [st * rng.choice([1, 1, 2, -1, 3]) for st in strides]
    else:  # arbitrary multiples of the itemsize
        strides = [ITEM * rng.randint(-6, 6) for _ in range(nd)]
    return shape, strides


def make(shape, strides):
    lo = sum(min(0, (n - 1) * s) for n, s in zip(shape, strides)) if 0 not in shape else 0
    hi = sum(max(0, (n - 1) * s) for n, s in zip(shape, strides)) + ITEM if 0 not in shape else ITEM
    buf = np.zeros((hi - lo) // ITEM + 1, dtype=np.float64)
    base = buf[(-lo) // ITEM:]
    return as_strided(base, shape=shape, strides=strides), buf


def rand_slice(n):
    """A random slice of a dimension of extent n.  A third of them are empty
    on purpose (stop at, or on the wrong side of, start) and most of those
    have a step other than 1: NumPy gives an empty dimension the parent's
    stride and keeps the view's start, whatever the step."""
    def b():
        return None if rng.random() < 0.3 else rng.randint(-n - 2, n + 2)
    r = rng.random()
    if r < 0.2:  # empty: stop == start
        st = rng.randint(-n - 2, n + 2)
        return st, st, rng.choice([1, 2, 3, 5, -1, -2, -3])
    if r < 0.33:  # empty: stop on the wrong side of start for the step's sign
        lo, hi = sorted((rng.randint(0, n + 2), rng.randint(0, n + 2)))
        step = rng.choice([1, 2, 3, -1, -2, -3])
        return (hi, lo, step) if step > 0 else (lo, hi, step)
    return b(), b(), rng.choice([1, 1, 2, 3, -1, -2])


def fmt(xs):
    return " ".join(str(x) for x in xs)


def factor_shape(size):
    nnd = rng.randint(1, 4)
    if size == 0:
        out = [rng.randint(1, 3) for _ in range(nnd)]
        out[rng.randrange(nnd)] = 0
        return out
    out = [1] * nnd
    rem = size
    p = 2
    facs = []
    while rem > 1:
        while rem % p == 0:
            facs.append(p)
            rem //= p
        p += 1
    for f in facs:
        out[rng.randrange(nnd)] *= f
    return out


def main():
    checker = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    lines = []
    for _ in range(n):
        shape, strides = rand_layout()
        a, _buf = make(shape, strides)
        nd = len(shape)
        head = f"{nd} {fmt(shape)} {fmt(strides)}".replace("  ", " ")
        lines.append(f"F {head} {int(a.flags.c_contiguous)} {int(a.flags.f_contiguous)}")
        size = int(np.prod(shape)) if shape else 1
        ns = factor_shape(size)
        order = rng.choice("CF")
        r = a.reshape(ns, order=order)
        # NumPy copies into a fresh buffer when no view exists.
        view = r.ctypes.data == a.ctypes.data or np.shares_memory(r, a) if size else True
        line = f"R {head} {order} {len(ns)} {fmt(ns)} {int(view)}"
        if view and size:
            line += " " + fmt(r.strides)
        lines.append(line)
        # slicing
        if nd:
            idx = []
            desc = []
            k = rng.randint(1, nd)
            for d in range(k):
                if rng.random() < 0.25 and shape[d] > 0:
                    i = rng.randint(-shape[d], shape[d] - 1)
                    idx.append(i)
                    desc.append(f"I {i}")
                else:
                    st, sp, step = rand_slice(shape[d])
                    idx.append(slice(st, sp, step))
                    desc.append(f"S {'N' if st is None else st} {'N' if sp is None else sp} {step}")
            v = a[tuple(idx) + (Ellipsis,)]  # a view even when every index is an integer
            off = v.__array_interface__["data"][0] - a.__array_interface__["data"][0]
            # Every stride and the offset are compared, empty and one-element
            # dimensions included, with the view's contiguity flags and what
            # split (Numba's contract: 1-D and unit stride) makes of it.
            split = int(v.ndim == 1 and v.strides[0] == ITEM)
            lines.append(f"S {head} {k} {' '.join(desc)} {v.ndim} {fmt(v.shape)} {fmt(v.strides)} {off} "
                         f"{int(v.flags.c_contiguous)} {int(v.flags.f_contiguous)} {split}")
    text = "\n".join(" ".join(l.split()) for l in lines) + "\n"
    p = subprocess.run([checker], input=text.encode(), capture_output=True)
    sys.stdout.write(p.stdout.decode())
    sys.stderr.write(p.stderr.decode())
    print(f"layout oracle: {len(lines)} NumPy cases checked, exit {p.returncode}")
    sys.exit(p.returncode)


main()
