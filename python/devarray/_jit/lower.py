"""Typed Numba IR to a kernel (or device function) of devarray's C dialect.

One ``FunctionLowering`` per specialization: it structures the IR (``structure``), decides
where each C variable is declared, and writes the statements. Calls, attributes and
operators are in ``ops``; the values it manipulates in ``values``. The generated source
carries ``#line`` directives back to the Python file, so compiler messages and the host
simulator's checked-mode reports name the Python line.

How Python maps to C (Numba's semantics, docs/python.md):

- an array parameter is a ``DV_VIEW`` (pointer, shape, byte strides); a C-ordered array is
  indexed through its shape, any other layout through its strides; a negative index counts
  from the end (Numba's wraparound); there is no bounds check outside the simulator's
  checked mode (Numba's default);
- scalars are the dialect's fixed-width types; integer ``//`` and ``%`` take Python's signs,
  ``/`` is true division; a division by zero gives 0 for integers (Numba's error model for
  kernels), IEEE results for floats;
- ``shared.array`` and ``local.array`` are C arrays declared at the top of the kernel, as
  CUDA and OpenCL hoist them; a ``shared.array`` of shape 0 is the launch's dynamic shared
  memory (every such array starts at its beginning, as in Numba);
- a ``raise`` or failed ``assert`` ends the thread (Numba's kernels without ``debug``).
"""

import numpy as np
from numba.core import ir, types
from numba.core.analysis import compute_cfg_from_blocks

from . import calls, exprs, helpers, ops
from .complexops import PRELUDE
from .ops import _c_strides_expr
from .structure import structure, StructureError, _body, _cond_tail
from .values import paren, record_ctype, record_decl
from .values import (S, K, Tup, Rng, Arr, Rec, NONE, LoweringError, ctype, elem_ctype,
                     is_scalar, unlit, literal)

_C_RESERVED = set("""auto break case char const continue default do double else enum extern
float for goto if inline int long register restrict return short signed sizeof static struct
switch typedef union unsigned void volatile while bool true false half kernel global local
constant private read_only write_only abs min max sin cos tan exp log sqrt pow floor ceil
fabs round rint trunc fmod fma NAN INFINITY printf main new delete this class template
namespace operator private public protected virtual friend catch try throw using typename
select mix clamp sign step dot cross length normalize""".split())
# the C library's names (the host compiles kernels with <stdlib.h>, <math.h>; OpenCL and
# CUDA have their built-ins): a kernel or variable of such a name gets a prefix
_C_RESERVED |= set("""div ldiv lldiv labs llabs atoi atol atoll atof strtol strtod rand srand
malloc calloc realloc free exit abort atexit getenv system qsort bsearch memcpy memset memmove
memcmp strcpy strncpy strlen strcmp strncmp strcat strchr strstr sprintf snprintf puts putchar
fprintf fopen fclose time clock signal raise assert errno isnan isinf isfinite signbit
asin acos atan atan2 sinh cosh tanh asinh acosh atanh exp2 exp10 expm1 log2 log10 log1p
cbrt hypot erf erfc tgamma lgamma nearbyint lrint llrint lround llround remainder remquo
frexp ldexp modf scalbn ilogb logb copysign nextafter fdim fmax fmin nan rsqrt sincos
barrier mem_fence popcount""".split())
_C_RESERVED |= {n + "f" for n in list(_C_RESERVED)}
# OpenCL C's built-in families (a kernel named atomic_add would be OpenCL's function)
_RESERVED_PREFIXES = ("atomic_", "atom_", "get_", "vload", "vstore", "convert_", "as_",
                      "async_", "read_image", "write_image", "sub_group_", "work_group_",
                      "native_", "half_", "mad", "wait_group", "prefetch")


def reserved(name):
    """Whether C name `name` could clash with the dialect, a C library or OpenCL built-in."""
    return name in _C_RESERVED or name.startswith(_RESERVED_PREFIXES) or name.startswith("dv") \
        or name.startswith("__")


class Program:
    """What one compilation adds to a module: device functions, helpers, constants."""

    def __init__(self, backend_hint=None):
        self.functions = []       # C text of device functions, in dependency order
        self.done = {}            # (device function, key) -> C name
        self.dev_needs = {}       # device function's C name -> its shared-array parameters
        self.helpers = {}         # name -> C text (helpers.helper_text)
        self.constants = {}       # C name -> NumPy array (dv_program_constant)
        self.const_ids = {}       # id(array) -> C name
        self.uses_dynshared = False
        self.names = set()
        self.records = {}          # C name -> typedef of a record type used

    def record(self, rec):
        name = record_ctype(rec)
        self.records.setdefault(name, record_decl(rec))
        return name

    def helper(self, name):
        if name not in self.helpers:
            text, deps = helpers.helper_text(name)
            for d in deps:
                self.helper(d)
            self.helpers[name] = text
        return name

    def unique(self, base):
        name = base
        i = 1
        while name in self.names:
            i += 1
            name = "%s_%d" % (base, i)
        self.names.add(name)
        return name

    def constant(self, arr):
        key = id(arr)
        name = self.const_ids.get(key)
        if name is None:
            name = self.unique("dv_const%d" % len(self.constants))
            self.constants[name] = np.ascontiguousarray(arr)
            self.const_ids[key] = name
        return name

    def source(self, kernel_text):
        head = ["/* Generated by devarray.jit from Python: the dialect of docs/kernels.md. */",
                "#ifdef DV_BACKEND_HOST", "#include <stdbool.h>", "#endif"]
        head.extend(self.records.values())
        text = "\n".join(list(self.helpers.values()) + self.functions + [kernel_text])
        if "dv_c64" in text or "dv_c128" in text:
            head.append(PRELUDE)
        if self.helpers:
            head.append('#line 1 "devarray.jit helpers"')
        return "\n".join(head + list(self.helpers.values()) + self.functions
                         + [kernel_text]) + "\n"


class FunctionLowering:
    def __init__(self, program, tir, name, kind, arg_spaces=None):
        self.p = program
        self.ir = tir.func_ir
        self.typemap = tir.typemap
        self.calltypes = tir.calltypes
        self.return_type = tir.return_type
        self.argtypes = tir.args
        self.name = name
        self.kind = kind  # "kernel" or "device"
        self.arg_spaces = arg_spaces or {}
        self.vals = {}
        self.cnames = {}
        self.lines = []
        self.indent = 1
        self.filename = self.ir.loc.filename
        self.lastline = None
        self.top_decls = []
        self.hoisted = []
        self.used_cnames = set()
        self.shared_params = []   # a device function's shared arrays, passed by its caller
        self.shared_names = {}    # (device function, array) -> this function's C name

    # ---- errors ----------------------------------------------------------------------

    def error(self, msg, loc=None):
        loc = loc or self.ir.loc
        return LoweringError("%s\n\nin %s, File \"%s\", line %s" % (
            msg, self.ir.func_id.func_qualname, loc.filename, loc.line))

    # ---- names and declarations ------------------------------------------------------

    def cname(self, var):
        n = self.cnames.get(var)
        if n is None:
            base = var.lstrip("$").replace(".", "_")
            if var.startswith("$"):
                base = "t_" + base
            if not base.isidentifier() or reserved(base):
                base = "py_" + base
            base = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in base)
            n = base
            i = 1
            while n in self.used_cnames:
                i += 1
                n = "%s_%d" % (base, i)
            self.used_cnames.add(n)
            self.cnames[var] = n
        return n

    def assigned_once(self, c):
        """Whether C name `c` is a variable given its value once (so reading it later gives
        the same value)."""
        for name, cn in self.cnames.items():
            if cn == c:
                return len(self.defs.get(name, ())) <= 1
        return False

    def emit(self, text, loc=None):
        if loc is not None and loc.line != self.lastline and loc.line is not None:
            self.lines.append("#line %d \"%s\"" % (loc.line, self.filename.replace("\\", "/")))
            self.lastline = loc.line
        self.lines.append("  " * self.indent + text)

    def _analyse(self, nodes):
        """Where each variable is defined and used; which temporaries fold into their use;
        which variables are declared where first assigned."""
        blocks = self.ir.blocks
        self.defs, self.uses = {}, {}
        order = []

        def walk(ns, depth):
            for n in ns:
                if n[0] in ("block", "term"):
                    order.append((n[1], depth))
                elif n[0] == "if":
                    walk(n[2], depth + 1)
                    walk(n[3], depth + 1)
                elif n[0] in ("for", "while"):
                    order.append((n[1], depth + 1))
                    walk(n[2], depth + 1)
                    if n[0] == "for" and n[3]:
                        walk(n[3], depth + 1)
                elif n[0] == "dowhile":
                    walk(n[3], depth + 1)
                    order.append((n[2], depth + 1))
                elif n[0] == "loop":
                    walk(n[1], depth + 1)
        walk(nodes, 0)
        self.depth = {}
        pos = {}
        for i, (lbl, d) in enumerate(order):
            self.depth.setdefault(lbl, d)
            pos.setdefault(lbl, i)
        self.pos = pos
        for lbl, blk in blocks.items():
            for i, st in enumerate(blk.body):
                if isinstance(st, ir.Del):
                    continue
                if isinstance(st, ir.Assign):
                    self.defs.setdefault(st.target.name, []).append((lbl, i))
                    if isinstance(st.value, ir.Var):
                        vs = [st.value]
                    else:
                        vs = st.value.list_vars() if hasattr(st.value, "list_vars") else []
                else:
                    vs = st.list_vars()
                for v in vs:
                    self.uses.setdefault(v.name, []).append((lbl, i))
        cfg = compute_cfg_from_blocks(blocks)
        self.doms = cfg.dominators()
        # temporaries that fold into their single use in the same block
        self.fold = set()
        for lbl, blk in blocks.items():
            body = blk.body
            for i, st in enumerate(body):
                if not (isinstance(st, ir.Assign) and st.target.name.startswith("$")):
                    continue
                name = st.target.name
                d = self.defs.get(name, [])
                u = [x for x in self.uses.get(name, []) if x != (lbl, i)]
                if len(d) != 1 or len(u) != 1 or u[0][0] != lbl:
                    continue
                if not calls.pure(self, st.value):
                    continue
                j = u[0][1]
                if j <= i:
                    continue
                ok = True
                reads = {v.name for v in st.value.list_vars()} if hasattr(
                    st.value, "list_vars") else set()
                for k in range(i + 1, j):
                    s2 = body[k]
                    if isinstance(s2, ir.Del):
                        continue
                    if not (isinstance(s2, ir.Assign) and calls.pure(self, s2.value)
                            and s2.target.name not in reads):
                        ok = False
                        break
                if ok:
                    self.fold.add(name)
        # variables declared where first assigned: the first assignment is at depth 0
        # and its block dominates every block naming the variable
        self.inline_decl = set()
        for name, d in self.defs.items():
            if name in self.fold:
                continue
            first = min(d, key=lambda x: (pos.get(x[0], 1 << 30), x[1]))
            lbl = first[0]
            mentions = self.uses.get(name, []) + d
            if self.depth.get(lbl, 1) == 0 and all(
                    lbl in self.doms.get(m[0], ()) and (m[0] != lbl or m[1] >= first[1])
                    for m in mentions):
                self.inline_decl.add(name)
            elif all(m[0] == lbl and m[1] >= first[1] for m in mentions) and len(d) == 1:
                self.inline_decl.add(name)
        self.declared = set()

    # ---- the function ----------------------------------------------------------------

    def lower(self):
        try:
            nodes = structure(self.ir)
        except StructureError as e:
            raise self.error(str(e)) from None
        self._analyse(nodes)
        params = self._params()
        self.emit_nodes(nodes)
        if self.kind == "kernel" and getattr(self, "uses_dynshared", False):
            params.append("dv_i64 dv__dynbytes")  # the launch's dynamic shared bytes
        for _, et, _, cn in self.shared_params:
            params.append("DV_SHARED_MEM %s *%s" % (et, cn))
        if self.kind == "kernel" and not params:
            # a kernel of no arguments: one unused parameter (OpenCL's expansion of
            # DV_KERNEL appends its hidden ones after a comma); the launch passes 0
            params.append("dv_i32 dv__noargs")
        body = self.hoisted + self.top_decls + self.lines
        if self.kind == "kernel":
            head = "DV_KERNEL(%s%s) {" % (self.name, (", " + ", ".join(params)) if params else "")
        else:
            rt = self.return_type
            head = "DV_DEVICE %s %s(%s) {" % (
                "void" if rt in (types.none, types.void) else ctype(rt, "return value"),
                self.name, ", ".join(params) if params else "void")
        return "\n".join([head] + body + ["}"]) + "\n"

    def _params(self):
        out = []
        names = self.ir.arg_names
        self.params_vals = {}
        for i, (pname, ty) in enumerate(zip(names, self.argtypes)):
            static = calls.static_arg(ty)
            if static is not None and self.kind == "device":
                # known when the function is specialized: no C parameter
                self.params_vals[pname] = static
                continue
            self.params_vals[pname] = self._param(i, pname, self.cname(pname), unlit(ty), out)
        return out

    def _param(self, i, pname, c, ty, out):
        """The value of parameter `pname` (C name `c`, Numba type `ty`); appends its C
        parameters to `out`."""
        ty = unlit(ty)
        if isinstance(ty, types.Record) and self.kind == "kernel":
            # a record argument: one element, in device memory (a DeviceRecord)
            et = self.p.record(ty)
            out.append("DV_ARRAY(%s, %s)" % (et, c))
            self.hoisted.append(
                "  DV_GLOBAL_MEM %s *%s = (DV_GLOBAL_MEM %s *)((DV_GLOBAL_MEM char *)%s__base"
                " + %s__off);" % (et, c, et, c, c))
            return Rec("(&%s[0])" % c, ty, "global")
        if isinstance(ty, types.Array):
            if isinstance(ty.dtype, types.Record):
                self.p.record(ty.dtype)
            et = elem_ctype(ty.dtype)
            if self.kind == "kernel" and ty.layout == "C" and not isinstance(
                    ty.dtype, types.Record):
                # C-contiguous: a DV_ARRAY and its extents as scalars (a view's 136
                # bytes would be copied per thread by the simulator's block loop)
                out.append("DV_ARRAY(%s, %s)" % (et, c))
                shape = []
                for d in range(ty.ndim):
                    out.append("dv_i64 %s__n%d" % (c, d))
                    shape.append("%s__n%d" % (c, d))
                strides = _c_strides_expr(shape, ty.dtype)
                self.hoisted.append(
                    "  DV_GLOBAL_MEM %s *%s = (DV_GLOBAL_MEM %s *)((DV_GLOBAL_MEM char *)%s__base"
                    " + %s__off);" % (et, c, et, c, c))
                space = "global"
            elif self.kind == "kernel":
                out.append("DV_VIEW(%s, %s)" % (et, c))
                self.hoisted.append(
                    "  DV_GLOBAL_MEM %s *%s = (DV_GLOBAL_MEM %s *)((DV_GLOBAL_MEM char *)%s__base"
                    " + %s__off);" % (et, c, et, c, c))
                shape = ["%s__view.shape[%d]" % (c, d) for d in range(ty.ndim)]
                strides = ["%s__view.strides[%d]" % (c, d) for d in range(ty.ndim)]
                space = "global"
            else:
                space = self.arg_spaces.get(i, "global")
                q = {"global": "DV_GLOBAL_MEM ", "shared": "DV_SHARED_MEM ", "local": "",
                     "constant": "DV_CONSTANT_MEM "}[space]
                out.append("%s%s *%s" % (q, et, c))
                shape, strides = [], []
                for d in range(ty.ndim):
                    out.append("dv_i64 %s__s%d" % (c, d))
                    shape.append("%s__s%d" % (c, d))
                for d in range(ty.ndim):
                    out.append("dv_i64 %s__t%d" % (c, d))
                    strides.append("%s__t%d" % (c, d))
            return Arr(c, ty, shape, strides, space, pname)
        elif isinstance(ty, types.Complex) and self.kind == "kernel":
            # a complex argument: its two parts (a struct parameter has no size the
            # contract knows)
            rt = "float" if ty == types.complex64 else "double"
            out.append("%s %s__re" % (rt, c))
            out.append("%s %s__im" % (rt, c))
            return S("%s_make(%s__re, %s__im)" % (ctype(ty), c, c), ty)
        elif isinstance(ty, types.Boolean) and self.kind == "kernel":
            # OpenCL kernels take no bool parameters: a byte, 0 or 1
            out.append("unsigned char %s__b" % c)
            return S("(%s__b != 0)" % c, ty)
        elif is_scalar(ty):
            out.append("%s %s" % (ctype(ty, "argument %s" % pname), c))
            return S(c, ty)
        elif isinstance(ty, types.Record) and self.kind == "device":
            out.append("DV_GLOBAL_MEM unsigned char *%s" % c)
            return Rec(c, ty, "global")
        elif isinstance(ty, types.BaseTuple):
            # a tuple: its elements as parameters of their own, flattened in order
            return Tup([self._param(i, "%s.%d" % (pname, k), "%s__%d" % (c, k), t, out)
                        for k, t in enumerate(ty.types)])
        else:
            raise self.error("argument %s of type %s: a kernel takes arrays, numbers and "
                             "bools" % (pname, ty))

    # ---- control flow ----------------------------------------------------------------

    def emit_nodes(self, nodes):
        for n in nodes:
            k = n[0]
            if k == "block":
                self.emit_block(n[1])
            elif k == "term":
                self.emit_term(n[1])
            elif k == "if":
                blk = self.ir.blocks[n[1]]
                cond = self.cond(blk.terminator.cond, blk.terminator.loc)
                then, els = n[2], n[3]
                if not then:
                    self.emit("if (!%s) {" % _p(cond), blk.terminator.loc)
                    self._nested(els)
                    self.emit("}")
                else:
                    self.emit("if (%s) {" % cond, blk.terminator.loc)
                    self._nested(then)
                    if els:
                        self.emit("} else {")
                        self._nested(els)
                    self.emit("}")
            elif k == "for":
                if n[3] is not None:
                    self.top_decls.append("  bool dv_broke%d = false;" % n[1])
                    self.emit("dv_broke%d = false;" % n[1])
                self.emit_for(n[1], n[2])
                if n[3] is not None:
                    self.emit("if (!dv_broke%d) {" % n[1])
                    self._nested(n[3])
                    self.emit("}")
            elif k == "broke":
                self.emit("dv_broke%d = true;" % n[1])
            elif k == "while":
                blk = self.ir.blocks[n[1]]
                mark = len(self.lines)
                self.indent += 1
                cond = self.cond_block(blk)
                self.indent -= 1
                extra = self.lines[mark:]
                del self.lines[mark:]
                if any(not ln.startswith("#line") for ln in extra):
                    # the condition needs statements (a min, an atomic): evaluated on each
                    # iteration, inside the loop
                    self.emit("while (1) {", blk.terminator.loc)
                    self.lines.extend(extra)
                    self.indent += 1
                    self.emit("if (!%s) break;" % _p(cond), blk.terminator.loc)
                    self.indent -= 1
                else:
                    self.emit("while (%s) {" % cond, blk.terminator.loc)
                self._nested(n[2])
                self.emit("}")
            elif k == "dowhile":
                hdr, lt, body = n[1], n[2], n[3]
                self.emit("do {", self.ir.blocks[hdr].loc)
                self.indent += 1
                self.emit_nodes(body)
                blk = self.ir.blocks[lt]
                start, _ = _cond_tail(blk)
                for st in _body(blk)[:start]:
                    self.stmt(st)
                cond = self.cond_block(blk, start)
                self.indent -= 1
                self.emit("} while (%s);" % cond, blk.terminator.loc)
            elif k == "loop":
                self.emit("while (1) {")
                self._nested(n[1])
                self.emit("}")
            elif k == "break":
                self.emit("break;")
            elif k == "continue":
                self.emit("continue;")
            else:
                raise AssertionError(k)

    def _nested(self, nodes):
        self.indent += 1
        self.emit_nodes(nodes)
        self.indent -= 1

    def cond(self, var, loc):
        v = self.value(var, loc)
        return ops.truth(self, v, loc)

    def cond_block(self, blk, start=0):
        """The condition of `blk`'s branch as one expression: the block's statements from
        `start` are the condition's temporaries, folded into it."""
        for st in _body(blk)[start:]:
            self.fold.add(st.target.name)
            self.stmt(st)
        return self.cond(blk.terminator.cond, blk.terminator.loc)

    def emit_block(self, label):
        blk = self.ir.blocks[label]
        for st in blk.body[:-1]:
            self.stmt(st)

    def emit_term(self, label):
        t = self.ir.blocks[label].terminator
        if isinstance(t, ir.Return):
            if self.kind == "kernel":
                self.emit("return;", t.loc)
                return
            rt = self.return_type
            if rt in (types.none, types.void):
                self.emit("return;", t.loc)
            else:
                v = self.value(t.value, t.loc)
                self.emit("return %s;" % ops.cast(self, v, rt, t.loc), t.loc)
        elif isinstance(t, (ir.Raise, ir.StaticRaise, ir.DynamicRaise)
                        if hasattr(ir, "DynamicRaise") else (ir.Raise, ir.StaticRaise)):
            # Numba's kernels without debug: the exception ends the thread, unreported
            if self.kind == "kernel" or self.return_type in (types.none, types.void):
                self.emit("return; /* raise */", t.loc)
            else:
                self.emit("return %s; /* raise */" % ops.zero(self.return_type), t.loc)
        else:
            raise self.error("a %s at the end of a block" % type(t).__name__, t.loc)

    def emit_for(self, label, body):
        blk = self.ir.blocks[label]
        it = first = None
        firsts_ = []
        for st in blk.body[:-1]:
            if isinstance(st, ir.Del):
                continue
            if isinstance(st, ir.Assign) and isinstance(st.value, ir.Expr):
                op = st.value.op
                if op == "iternext":
                    it = self.value(st.value.value, st.loc)
                    continue
                if op == "pair_first":
                    first = st.target.name
                    firsts_.append(first)
                    continue
                if op == "pair_second":
                    continue
            if isinstance(st, ir.Assign) and isinstance(st.value, ir.Var) and \
                    st.value.name in firsts_:
                firsts_.append(st.target.name)
                continue
            raise self.error("a for loop over this iterator (only range(...) is taken): %s"
                             % st, st.loc)
        if not isinstance(it, Rng):
            raise self.error("a for loop over something other than range(...): iterate "
                             "with range over the indices", blk.loc)
        ty = it.ty
        ct = ctype(ty)
        # the loop's own variable: the user's, when the body's first statement assigns it
        # and nothing else does (then the loop reads as written: for (i = ...; ...))
        var = None
        bodyblk = self.ir.blocks[blk.terminator.truebr]
        firsts = [s for s in bodyblk.body if not isinstance(s, ir.Del)]
        if firsts and isinstance(firsts[0], ir.Assign) and isinstance(firsts[0].value, ir.Var) \
                and firsts[0].value.name in firsts_:
            user = firsts[0].target.name
            if len(self.defs.get(user, [])) == 1 and unlit(self.typemap[user]) == unlit(ty) \
                    and all(self._inside(m[0], body) for m in self.uses.get(user, [])):
                var = user
        if var is not None:
            c = self.cname(var)
            self.declared.add(var)
            self.skip = getattr(self, "skip", set())
            self.skip.add(id(firsts[0]))
        else:
            c = self.p.unique("dv_it") if False else self._fresh("it")
        start, stop, step = it.start, it.stop, it.step
        nonneg = start.nonneg and step.const is not None and step.const > 0
        for f in firsts_:
            self.vals[f] = S(c, ty, nonneg=nonneg)
        if var is not None:
            self.vals[var] = S(c, ty, nonneg=nonneg)
        if step.const is not None:
            cond = "%s %s %s" % (c, "<" if step.const > 0 else ">", _p(stop.c))
            inc = ("%s++" % c) if step.const == 1 else "%s += %s" % (c, _p(step.c))
        else:
            cond = "(%s > 0 ? %s < %s : %s > %s)" % (_p(step.c), c, _p(stop.c), c, _p(stop.c))
            inc = "%s += %s" % (c, _p(step.c))
        self.emit("for (%s %s = %s; %s; %s) {" % (ct, c, start.c, cond, inc), blk.loc)
        self._nested(body)
        self.emit("}")

    def _inside(self, label, nodes):
        for n in nodes:
            if n[0] in ("block", "term") and n[1] == label:
                return True
            if n[0] == "if" and (self._inside(label, n[2]) or self._inside(label, n[3])):
                return True
            if n[0] in ("for", "while") and (n[1] == label or self._inside(label, n[2])):
                return True
            if n[0] == "for" and n[3] and self._inside(label, n[3]):
                return True
            if n[0] == "dowhile" and (n[2] == label or self._inside(label, n[3])):
                return True
            if n[0] == "loop" and self._inside(label, n[1]):
                return True
        return False

    def _fresh(self, base):
        n = "dv_" + base
        i = 0
        while n in self.used_cnames:
            i += 1
            n = "dv_%s%d" % (base, i)
        self.used_cnames.add(n)
        return n

    # ---- statements ------------------------------------------------------------------

    def stmt(self, st):
        if isinstance(st, ir.Del):
            return
        if id(st) in getattr(self, "skip", ()):
            return
        loc = st.loc
        if isinstance(st, ir.Assign):
            self.assign(st.target, st.value, loc)
        elif isinstance(st, (ir.SetItem, ir.StaticSetItem)):
            arr = self.value(st.target, loc)
            if isinstance(st, ir.StaticSetItem) and ops.static_index_ok(st.index):
                idx = ops.static_index(self, st.index, loc)
            else:
                idx = self.value(st.index_var if isinstance(st, ir.StaticSetItem)
                                 else st.index, loc)
            val = self.value(st.value, loc)
            ops.setitem(self, arr, idx, val, st, loc)
        elif isinstance(st, ir.SetAttr):
            ops.setattr_(self, self.value(st.target, loc), st.attr, self.value(st.value, loc),
                         loc)
        elif isinstance(st, ir.Print):
            ops.print_(self, [self.value(a, loc) for a in st.args], loc)
        elif isinstance(st, ir.EnterWith):
            raise self.error("a `with` block inside a kernel", loc)
        else:
            raise self.error("the statement %s" % type(st).__name__, loc)

    def assign(self, target, value, loc):
        name = target.name
        if isinstance(value, ir.Arg):  # the parameter itself: its C name is the variable's
            self.declared.add(name)
            self.vals[name] = self.params_vals[value.name]
            return
        ty = unlit(self.typemap.get(name, types.none))
        v = self.rvalue(value, ty, loc, name)
        if is_scalar(ty) and not isinstance(v, K):
            if isinstance(v, S) and (name in self.fold or name.startswith("$")
                                     and not self.uses.get(name)):
                self.vals[name] = v
                return
            # a variable assigned once keeps what is known of its value
            nonneg = isinstance(v, S) and v.nonneg and len(self.defs.get(name, ())) == 1 and \
                (unlit(v.ty) == ty or calls._nonneg_cast(v, ty))
            c = self.cname(name)
            rhs = ops.cast(self, v, ty, loc)
            if name in self.inline_decl and name not in self.declared:
                self.declared.add(name)
                ct = ctype(ty, "variable %s" % name)
                if nonneg and ty == types.int32:
                    # a non-negative int32 assigned once (a thread index): held in 64 bits,
                    # the same values, and loops over it vectorize
                    ct = "dv_i64"
                self.emit("%s %s = %s;" % (ct, c, rhs), loc)
            else:
                self._declare_top(name, ty)
                self.emit("%s = %s;" % (c, rhs), loc)
            # a constant assigned once stays known (`N = 100; shared.array(N, ...)`)
            const = v.const if isinstance(v, S) and len(self.defs.get(name, ())) == 1 and \
                unlit(v.ty) == ty else None
            self.vals[name] = S(c, ty, const=const, nonneg=nonneg)
            return
        if isinstance(ty, types.BaseTuple) and ty.types and all(is_scalar(t) for t in ty.types) \
                and len(self.defs.get(name, ())) > 1 and isinstance(v, Tup):
            # a tuple of numbers given values in several places: a C variable per element
            items = []
            for k, (x, t) in enumerate(zip(v.items, ty.types)):
                c = "%s__%d" % (self.cname(name), k)
                if (name, k) not in self.declared:
                    self.declared.add((name, k))
                    self.top_decls.append("  %s %s;" % (ctype(t, "variable %s" % name), c))
                self.emit("%s = %s;" % (c, ops.cast(self, x, t, loc)), loc)
                items.append(S(c, t))
            self.vals[name] = Tup(items)
            return
        old = self.vals.get(name)
        if old is not None and old is not v and not _same(old, v):
            raise self.error("%s is given two different %s values (an array, tuple or range "
                             "chosen at run time): give each its own name" % (
                                 name, type(ty).__name__), loc)
        self.vals[name] = v

    def _declare_top(self, name, ty):
        if name in self.declared:
            return
        self.declared.add(name)
        self.top_decls.append("  %s %s;" % (ctype(ty, "variable %s" % name), self.cname(name)))

    def rvalue(self, value, ty, loc, target=None):
        if isinstance(value, ir.Var):
            return self.value(value, loc)
        if isinstance(value, ir.Arg):
            return self.params_vals[value.name]
        if isinstance(value, (ir.Const, ir.Global, ir.FreeVar)):
            return ops.constant(self, value.value, ty, loc)
        if isinstance(value, ir.Expr):
            return exprs.expr(self, value, ty, loc, target)
        raise self.error("the value %s" % type(value).__name__, loc)

    def value(self, var, loc):
        v = self.vals.get(var.name)
        if v is None:
            if var.name in getattr(self, "params_vals", {}):
                return self.params_vals[var.name]
            ty = unlit(self.typemap.get(var.name, types.none))
            if is_scalar(ty):
                # assigned on a path emitted later (a loop's back edge): its C variable
                self._declare_top(var.name, ty)
                return S(self.cname(var.name), ty)
            raise self.error("%s is used before it is given a value" % var.name, loc)
        return v


def _p(c):
    return paren(c)


def _same(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, Arr):
        return a.ptr == b.ptr and a.shape == b.shape and a.strides == b.strides
    if isinstance(a, K):
        return a.value is b.value
    if isinstance(a, Tup):
        return len(a.items) == len(b.items) and all(
            _same(x, y) or (isinstance(x, S) and isinstance(y, S) and x.c == y.c)
            for x, y in zip(a.items, b.items))
    if isinstance(a, Rng):
        return all(x.c == y.c for x, y in ((a.start, b.start), (a.stop, b.stop),
                                           (a.step, b.step)))
    return False
