"""The values of the dialect's lowering: what a Numba IR variable is in the generated C.

A scalar is a C expression with its Numba type (``S``); everything else is known at compile
time and has no C variable of its own: an array is a descriptor (``Arr``: its pointer, address
space, shape and strides as C expressions), a tuple a list of values (``Tup``), a range its
start, stop and step (``Rng``), a Python object (a module, a stub, a dtype, a number class)
itself (``K``), a record a pointer to it (``Rec``).
"""

import math

import numpy as np
from numba.core import types


class LoweringError(NotImplementedError):
    """A construct the dialect's lowering does not take: names it and the Python line."""


_INT_C = {(8, True): "dv_i8", (16, True): "dv_i16", (32, True): "dv_i32", (64, True): "dv_i64",
          (8, False): "dv_u8", (16, False): "dv_u16", (32, False): "dv_u32",
          (64, False): "dv_u64"}


def unlit(t):
    return types.unliteral(t)


def ctype(t, what="value"):
    """The dialect's C type of Numba scalar type t."""
    t = unlit(t)
    if isinstance(t, types.Boolean):
        return "bool"
    if isinstance(t, types.Integer):
        return _INT_C[(t.bitwidth, t.signed)]
    if t == types.float32:
        return "float"
    if t == types.float64:
        return "double"
    if t == types.float16:
        return "dv_f16"
    if isinstance(t, types.Complex):
        return "dv_c64" if t == types.complex64 else "dv_c128"
    raise LoweringError("%s of type %s: the dialect has no such scalar (numbers and bools "
                        "only)" % (what, t))


def elem_ctype(dtype):
    """The C type of an array's element (bool arrays are bytes, as the contract reads
    `unsigned char`)."""
    if isinstance(dtype, types.Boolean):
        return "unsigned char"
    if isinstance(dtype, types.Record):
        return record_ctype(dtype)
    return ctype(dtype, "array element")


def record_ctype(rec):
    """The C type standing for record type `rec`: a struct of its size and alignment (its
    fields are read through their byte offsets); the program declares it (record_decl)."""
    return "dv_rec%d_%d" % (rec.size, _rec_align(rec))


def _rec_align(rec):
    try:
        a = int(np.dtype(rec.dtype).alignment)
    except Exception:
        a = 1
    while a > 1 and rec.size % a:
        a //= 2
    return a


def record_decl(rec):
    a = _rec_align(rec)
    word = {8: "dv_u64", 4: "dv_u32", 2: "dv_u16"}.get(a, "unsigned char")
    n = rec.size // max(a, 1) if word != "unsigned char" else rec.size
    return "typedef struct { %s b[%d]; } %s;" % (word, max(n, 1), record_ctype(rec))


def is_scalar(t):
    t = unlit(t)
    return isinstance(t, (types.Boolean, types.Integer, types.Float, types.Complex))


def literal(value, t):
    """A C literal of Python number `value` as Numba type t."""
    t = unlit(t)
    if isinstance(t, types.Complex):
        z = complex(value)
        f = types.float32 if t == types.complex64 else types.float64
        return "%s_make(%s, %s)" % (ctype(t), literal(z.real, f), literal(z.imag, f))
    if isinstance(value, complex):
        raise LoweringError("the complex constant %r where a %s is needed" % (value, t))
    if isinstance(t, types.Boolean):
        return "true" if value else "false"
    if isinstance(t, types.Integer):
        v = int(value)
        if t.signed:
            v = int(np.array(v).astype(np.int64)) if t.bitwidth == 64 else v
            if -(1 << 31) <= v < (1 << 31) and t.bitwidth >= 32:
                return str(v) if v >= 0 else "(%d)" % v
            if v == -(1 << 63):
                return "((dv_i64)(-9223372036854775807 - 1))"
            return "((%s)%dLL)" % (ctype(t), v) if v >= 0 else "((%s)(%dLL))" % (ctype(t), v)
        v &= (1 << t.bitwidth) - 1
        return "((%s)%dULL)" % (ctype(t), v)
    if isinstance(t, types.Float):
        v = float(value)
        suffix = "f" if t.bitwidth == 32 else ""
        if math.isnan(v):
            return "((%s)NAN)" % ctype(t)
        if math.isinf(v):
            return "((%s)INFINITY)" % ctype(t) if v > 0 else "(-(%s)INFINITY)" % ctype(t)
        if t.bitwidth == 32:
            v = float(np.float32(v))
            r = repr(v)
        else:
            r = repr(v)
        if "e" not in r and "." not in r and "n" not in r:
            r += ".0"
        return ("(%s%s)" % (r, suffix)) if r.startswith("-") else r + suffix
    raise LoweringError("a constant %r of type %s" % (value, t))


class S:
    """A scalar: C expression `c` of Numba type `ty`; `const` its Python value when known;
    `nonneg` when it is known never to be negative (a thread index, a shape, a sum of
    such): indexing with it needs no wraparound, `//` and `%` are C's."""
    __slots__ = ("c", "ty", "const", "nonneg")

    def __init__(self, c, ty, const=None, nonneg=False):
        self.c, self.ty, self.const = c, unlit(ty), const
        self.nonneg = bool(nonneg) or (const is not None and not isinstance(const, complex)
                                       and const >= 0)

    def __repr__(self):
        return "S(%s: %s)" % (self.c, self.ty)


class K:
    """A Python object known at compile time (module, stub, function, class, dtype)."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class Tup:
    __slots__ = ("items",)

    def __init__(self, items):
        self.items = list(items)


class Rng:
    """range(start, stop, step) and its iterator."""
    __slots__ = ("start", "stop", "step", "ty")

    def __init__(self, start, stop, step, ty):
        self.start, self.stop, self.step, self.ty = start, stop, step, ty


class Arr:
    """An array: `ptr` a C expression of type `space T *`; shape and strides (bytes) are
    lists of C expressions (int64); `layout` Numba's ('C', 'F', 'A'); `space` one of
    global, shared, local, constant."""
    __slots__ = ("ptr", "dtype", "ndim", "layout", "shape", "strides", "space", "ty", "name")

    def __init__(self, ptr, ty, shape, strides, space, name):
        self.ptr, self.ty = ptr, ty
        self.dtype, self.ndim, self.layout = ty.dtype, ty.ndim, ty.layout
        self.shape, self.strides, self.space, self.name = list(shape), list(strides), space, name

    @property
    def qual(self):
        return {"global": "DV_GLOBAL_MEM ", "shared": "DV_SHARED_MEM ", "local": "",
                "constant": "DV_CONSTANT_MEM "}[self.space]


class Rec:
    """A record: `ptr` a C expression of type `space unsigned char *` to its first byte."""
    __slots__ = ("ptr", "ty", "space")

    def __init__(self, ptr, ty, space):
        self.ptr, self.ty, self.space = ptr, ty, space


NONE = K(None)


def paren(c):
    if c.isidentifier() or c.replace(".", "").replace("_", "").isalnum() and not c.startswith("-"):
        return c
    if c.startswith("(") and c.endswith(")"):
        depth = 0
        for i, ch in enumerate(c):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i != len(c) - 1:
                return "(" + c + ")"
        return c
    return "(" + c + ")"
