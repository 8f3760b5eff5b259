"""One IR expression to its lowering: operators, attributes and items (ops), calls (calls).
Above both, so that the lowering of a call (which lowers its arguments' operators) and of an
operator never import each other."""

from numba.core import types

from .calls import call
from .ops import binop, getattr_, getitem, static_index, static_index_ok, unary
from .values import Rng, Tup, unlit


def expr(fl, e, ty, loc, target):
    op = e.op
    if op == "binop":
        return binop(fl, e.fn, e, ty, loc)
    if op == "inplace_binop":
        lt = unlit(fl.typemap[e.lhs.name])
        if isinstance(lt, types.Array):
            raise fl.error("an in-place operation on a whole array (%s): kernels index "
                           "elements" % e.fn.__name__, loc)
        return binop(fl, e.immutable_fn, e, ty, loc)
    if op == "unary":
        return unary(fl, e, ty, loc)
    if op == "call":
        return call(fl, e, ty, loc, target)
    if op == "getattr":
        return getattr_(fl, fl.value(e.value, loc), e.attr, ty, loc)
    if op in ("getitem", "static_getitem", "typed_getitem"):
        base = fl.value(e.value, loc)
        if op == "static_getitem" and static_index_ok(e.index):
            idx = static_index(fl, e.index, loc)
        else:
            idx = fl.value(e.index_var if op == "static_getitem" else e.index, loc)
        return getitem(fl, base, idx, ty, e, loc)
    if op == "build_tuple":
        return Tup([fl.value(v, loc) for v in e.items])
    if op == "exhaust_iter":
        v = fl.value(e.value, loc)
        if isinstance(v, Tup):
            if len(v.items) != e.count:
                raise fl.error("unpacking %d values into %d names" % (len(v.items), e.count),
                               loc)
            return v
        raise fl.error("unpacking a %s (only tuples unpack in a kernel)" % type(v).__name__,
                       loc)
    if op == "getiter":
        v = fl.value(e.value, loc)
        if isinstance(v, Rng):
            return v
        raise fl.error("iterating over a %s (only range(...) is taken)" %
                       unlit(fl.typemap[e.value.name]), loc)
    if op == "cast":
        return fl.value(e.value, loc)
    if op in ("iternext", "pair_first", "pair_second"):
        raise fl.error("this iteration (only `for ... in range(...)` loops)", loc)
    if op == "make_function":
        raise fl.error("a function or lambda defined inside a kernel: define it at module "
                       "level with @devarray.jit(device=True)", loc)
    if op in ("build_list", "build_set", "build_map", "list_comprehension"):
        raise fl.error("a %s inside a kernel (no lists, sets or dicts on a device; use "
                       "local.array or a tuple)" % op.replace("build_", ""), loc)
    raise fl.error("the expression `%s`" % op, loc)
