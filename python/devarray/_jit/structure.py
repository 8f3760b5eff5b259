"""Numba IR's control-flow graph as structured C: if/else, for, while, do-while, break,
continue, return; never goto.

Why structured: the host simulator's region fission (docs/kernels.md) turns a kernel with
barriers into loops over a block's threads only when its barriers sit in structured,
uniform control flow (a statement list, for/while/do loops, no goto, no break out of a loop
that holds a barrier). Python's own statements are structured, so the graph Numba builds from
the bytecode can be read back into them:

- a loop (Numba's natural loops) is a ``for`` over a range when its header is the
  ``iternext`` of a range iterator, a ``while (cond)`` when its header only computes its
  condition, a ``do { } while (cond)`` when its one latch tests and the header has no other
  way in, else ``while (1)`` with ``break``;
- Python 3.11 writes ``while c: body`` as ``if c: do body while c``; ``uninvert`` puts the
  condition back on top when the two copies are the same code, so that it becomes a
  ``while (c)`` (a barrier under an ``if`` would keep the kernel from fission);
- a branch is an ``if``/``else`` whose arms meet at the branch's immediate post-dominator;
  an arm that never reaches it (``break``, ``continue``, ``return``) is an ``if`` alone,
  followed by the other arm at the same level.

``structure(func_ir)`` returns a tree of nodes (tuples) that ``lower`` walks:
``("block", label)`` the block's statements, ``("term", label)`` its return or raise,
``("if", label, then, else_)`` the branch ending block ``label``, ``("for", label, body)``,
``("while", label, body)``, ``("dowhile", header, latch, body)``, ``("loop", body)``,
``("break",)``, ``("continue",)``.
"""

from numba.core import ir
from numba.core.analysis import compute_cfg_from_blocks

_EXIT = "exit"


class StructureError(NotImplementedError):
    pass


def _succ(block):
    t = block.terminator
    if isinstance(t, ir.Jump):
        return [t.target]
    if isinstance(t, ir.Branch):
        return [t.truebr, t.falsebr]
    return []


def _body(block):
    return [s for s in block.body[:-1] if not isinstance(s, ir.Del)]


def _temps(blocks):
    """Names Numba made for values, not the user's variables: $-names, and the one-time
    loads of globals (`bool22 = global(bool)`)."""
    count, glob = {}, set()
    for blk in blocks.values():
        for st in blk.body:
            if isinstance(st, ir.Assign):
                count[st.target.name] = count.get(st.target.name, 0) + 1
                if isinstance(st.value, (ir.Global, ir.FreeVar)):
                    glob.add(st.target.name)
    return {n for n in count if n.startswith("$")} | {n for n in glob if count[n] == 1}


def _same_code(a, b, temps):
    """Whether statement lists a and b compute the same thing: the same operations on the
    same named variables and constants, their temporaries renamed one to one."""
    if len(a) != len(b):
        return False
    ren = {}

    def var(x, y):
        if x.name in temps and y.name in temps:
            return ren.setdefault(x.name, y.name) == y.name
        return x.name == y.name

    def val(x, y):
        if isinstance(x, ir.Var) and isinstance(y, ir.Var):
            return var(x, y)
        if type(x) is not type(y):
            return False
        if isinstance(x, (ir.Const, ir.Global, ir.FreeVar)):
            return type(x.value) is type(y.value) and x.value == y.value if not callable(
                x.value) else x.value is y.value
        if isinstance(x, ir.Expr):
            if x.op != y.op:
                return False
            xk, yk = x._kws, y._kws
            for k in ("fn", "attr", "index"):
                if xk.get(k) != yk.get(k):
                    return False
            for k in ("lhs", "rhs", "value", "func", "index_var"):
                xa, ya = xk.get(k), yk.get(k)
                if (xa is None) != (ya is None) or xa is not None and not val(xa, ya):
                    return False
            xs, ys = list(xk.get("args") or []), list(yk.get("args") or [])
            if len(xs) != len(ys) or not all(val(p, q) for p, q in zip(xs, ys)):
                return False
            if list(xk.get("kws") or []) or list(yk.get("kws") or []):
                return False
            return True
        return False

    for s, t in zip(a, b):
        if not (isinstance(s, ir.Assign) and isinstance(t, ir.Assign)):
            return False
        if s.target.name not in temps or t.target.name not in temps:
            return False
        if not var(s.target, t.target) or not val(s.value, t.value):
            return False
    return True


def _cond_tail(block, temps=None):
    """The statements at the end of `block` that compute its branch's condition: the run
    of temporary assignments the condition depends on."""
    body = _body(block)
    if temps is None:
        temps = {s.target.name for s in body if isinstance(s, ir.Assign)
                 and (s.target.name.startswith("$")
                      or isinstance(s.value, (ir.Global, ir.FreeVar)))}
    need = {block.terminator.cond.name}
    start = len(body)
    for i in range(len(body) - 1, -1, -1):
        s = body[i]
        if not (isinstance(s, ir.Assign) and s.target.name in need):
            break
        if s.target.name not in temps:
            break
        need.discard(s.target.name)
        need.update(v.name for v in (s.value.list_vars() if hasattr(s.value, "list_vars")
                                     else []) if v.name in temps)
        start = i
    return start, body[start:]


def uninvert(func_ir):
    """Python 3.11's `if c: do body while c` back into `while c: body` where both copies
    of c are the same code: a new header block holds c, the guard and the latch jump to it."""
    blocks = func_ir.blocks
    cfg = compute_cfg_from_blocks(blocks)
    temps = _temps(blocks)
    changed = False
    for header, loop in cfg.loops().items():
        latches = [p for p, _ in cfg.predecessors(header) if p in loop.body]
        outside = [p for p, _ in cfg.predecessors(header) if p not in loop.body]
        if len(latches) != 1 or len(outside) != 1:
            continue
        lt, g = blocks[latches[0]], blocks[outside[0]]
        lterm, gterm = lt.terminator, g.terminator
        if not (isinstance(lterm, ir.Branch) and isinstance(gterm, ir.Branch)):
            continue
        if (lterm.truebr, lterm.falsebr) != (header, gterm.falsebr) or gterm.truebr != header:
            continue
        gs, gcode = _cond_tail(g, temps)
        ls, lcode = _cond_tail(lt, temps)
        if not gcode or not _same_code(gcode, lcode, temps):
            continue
        # a `continue` jumps to the guard's condition (3.11): it must reach the new header
        g_label = outside[0]
        continues = [p for p, _ in cfg.predecessors(g_label)
                     if p in loop.body or g_label in cfg.dominators().get(p, ())]
        if continues and gs != 0:
            continue  # the guard does more than test: not the shape Python makes
        new = max(blocks) + 1
        nb = ir.Block(scope=lt.scope, loc=lt.terminator.loc)
        for s in lcode:
            nb.append(s)
        nb.append(ir.Branch(lterm.cond, header, lterm.falsebr, lterm.loc))
        blocks[new] = nb
        for p in continues:
            t = blocks[p].terminator
            if isinstance(t, ir.Jump) and t.target == g_label:
                blocks[p].body[-1] = ir.Jump(new, t.loc)
            elif isinstance(t, ir.Branch):
                blocks[p].body[-1] = ir.Branch(t.cond, new if t.truebr == g_label else t.truebr,
                                               new if t.falsebr == g_label else t.falsebr, t.loc)
        for b, start in ((g, gs), (lt, ls)):
            keep = [s for s in b.body[:-1]]
            body = _body(b)
            drop = set(id(s) for s in body[start:])
            b.body = [s for s in keep if id(s) not in drop]
            b.append(ir.Jump(new, lterm.loc))
        changed = True
        break
    if changed:
        uninvert(func_ir)  # the graph changed: look again
    return func_ir


class _Loop:
    __slots__ = ("header", "body", "follow", "exits", "latch", "flag")

    def __init__(self, header, body, follow, exits, latch=None, flag=False):
        self.header, self.body, self.follow, self.exits = header, body, follow, exits
        self.latch, self.flag = latch, flag


class Structurer:
    def __init__(self, func_ir):
        self.ir = func_ir
        self.blocks = func_ir.blocks
        self.cfg = compute_cfg_from_blocks(self.blocks)
        self.loops = self.cfg.loops()
        self.entry = self.cfg.entry_point()
        self._pdoms()
        self.active = set()

    def _pdoms(self):
        """Post-dominators, with the function's last return as its only exit: an early
        return (or a raise) ends its path without constraining where the others meet, so
        `if c: return` is an `if` alone and the code after it is not copied into an else."""
        nodes = list(self.blocks)
        rets = [n for n in nodes if isinstance(self.blocks[n].terminator, ir.Return)]
        final = max(rets) if rets else None
        succ = {n: _succ(self.blocks[n]) or ([_EXIT] if n == final else []) for n in nodes}
        allset = set(nodes) | {_EXIT}
        pd = {n: set(allset) for n in nodes}
        pd[_EXIT] = {_EXIT}
        changed = True
        while changed:
            changed = False
            for n in nodes:
                if not succ[n]:
                    continue
                new = set.intersection(*[pd[s] for s in succ[n]]) | {n}
                if new != pd[n]:
                    pd[n] = new
                    changed = True
        self.pd = pd

    def ipdom(self, n):
        cands = self.pd[n] - {n}
        best = None
        for c in cands:
            if best is None or len(self.pd[c]) > len(self.pd[best]):
                best = c
        return None if best == _EXIT else best

    def loc(self, label):
        return self.blocks[label].loc

    # ---- sequences -------------------------------------------------------------------

    def seq(self, start, stop, ctx, first=False):
        """Nodes from `start` up to `stop` (exclusive); (nodes, falls through to stop).
        `first`: start is a loop's header, taken as a block even though it is `stop`."""
        out = []
        cur = start
        guard = 0
        while True:
            guard += 1
            if guard > 100000:
                raise StructureError("control flow of %s is not structured"
                                     % self.ir.func_id.func_qualname)
            if cur == stop and not first:
                return out, True
            if cur is None:
                return out, False
            edge = None if first else self.edge(cur, stop, ctx)
            first = False
            if edge is not None:
                out.extend(edge)
                return out, False
            if cur in self.loops and cur not in self.active:
                node, after = self.loop(cur, ctx)
                out.append(node)
                cur = after
                continue
            if ctx and cur not in ctx[-1].body:
                raise StructureError("a jump out of two loops at once (line %s)"
                                     % self.loc(cur).line)
            blk = self.blocks[cur]
            if _body(blk):
                out.append(("block", cur))
            t = blk.terminator
            if isinstance(t, ir.Jump):
                cur = t.target
                continue
            if isinstance(t, ir.Branch):
                m = self.ipdom(cur)
                if m is not None and ctx and m not in ctx[-1].body:
                    m = None
                if m is not None and stop is not None and m != stop and m not in self.region(stop):
                    m = None
                then, tf = self.arm(t.truebr, m, stop, ctx)
                els, ef = self.arm(t.falsebr, m, stop, ctx)
                if m is None:
                    # both arms end (or run to `stop`): an arm that never falls through
                    # is an `if` alone, the other follows at this level
                    if not tf and ef:
                        out.append(("if", cur, then, []))
                        out.extend(els)
                        return out, True
                    if tf and not ef:
                        out.append(("if", cur, [], els))
                        out.extend(then)
                        return out, True
                    out.append(("if", cur, then, els))
                    return out, tf or ef
                if not tf and ef and els and then:
                    out.append(("if", cur, then, []))
                    out.extend(els)
                else:
                    out.append(("if", cur, then, els))
                cur = m
                continue
            out.append(("term", cur))
            return out, False

    def region(self, stop):
        """Blocks that reach `stop` (the current region's blocks)."""
        return self.pd.get(stop, set()) and {n for n in self.blocks if stop in self.pd[n]}

    def arm(self, target, merge, stop, ctx):
        if target == merge:
            return [], True
        return self.seq(target, merge if merge is not None else stop, ctx)

    def edge(self, target, stop, ctx):
        """Nodes for a jump to `target` that leaves the current loop's natural flow."""
        if not ctx:
            return None
        lp = ctx[-1]
        if (target == lp.header or target == lp.latch) and target != stop:
            return [("continue",)]
        brk = [("broke", lp.header), ("break",)] if lp.flag else [("break",)]
        if target == lp.follow and target != stop:
            return brk
        if target not in lp.body and target != lp.follow and target in lp.exits:
            nodes, falls = self.seq(target, lp.follow, ctx[:-1])
            return nodes + (brk if falls else [])
        return None

    # ---- loops -----------------------------------------------------------------------

    def loop(self, header, ctx):
        lp = self.loops[header]
        body = set(lp.body)
        exits = set(lp.exits)
        follow = None
        if len(exits) == 1:
            follow = next(iter(exits))
        elif exits:
            common = set.intersection(*[self.pd[e] for e in exits])
            common.discard(_EXIT)
            # the nearest common post-dominator of the exits
            for c in common:
                if follow is None or len(self.pd[c]) > len(self.pd[follow]):
                    follow = c
        L = _Loop(header, body, follow, exits)
        self.active.add(header)
        try:
            node = self._for(L, ctx) or self._while(L, ctx) or self._dowhile(L, ctx)
            if node is None:
                nodes, _ = self.seq(header, header, ctx + [L], first=True)
                node = ("loop", nodes)
        finally:
            self.active.discard(header)
        return node, follow

    def _for(self, L, ctx):
        hb = self.blocks[L.header]
        t = hb.terminator
        if not isinstance(t, ir.Branch):
            return None
        body = _body(hb)
        if not body or not any(isinstance(s, ir.Assign) and isinstance(s.value, ir.Expr)
                               and s.value.op == "iternext" for s in body):
            return None
        if t.truebr not in L.body:
            return None
        if t.falsebr != L.follow:
            if t.falsebr not in L.exits:
                return None
            # for ... else: the else part runs unless a break left the loop
            L.flag = True
            nodes, _ = self.seq(t.truebr, L.header, ctx + [L])
            els, falls = self.seq(t.falsebr, L.follow, ctx)
            return ("for", L.header, nodes, els)
        nodes, _ = self.seq(t.truebr, L.header, ctx + [L])
        return ("for", L.header, nodes, None)

    def _while(self, L, ctx):
        hb = self.blocks[L.header]
        t = hb.terminator
        if not isinstance(t, ir.Branch) or t.truebr not in L.body or t.falsebr != L.follow:
            return None
        start, tail = _cond_tail(hb)
        if start != 0 or len(_body(hb)) != len(tail):
            return None  # the header does more than compute the condition
        nodes, _ = self.seq(t.truebr, L.header, ctx + [L])
        return ("while", L.header, nodes)

    def _dowhile(self, L, ctx):
        preds = [p for p, _ in self.cfg.predecessors(L.header) if p in L.body]
        if len(preds) != 1:
            return None
        lt = preds[0]
        t = self.blocks[lt].terminator
        if not isinstance(t, ir.Branch) or t.truebr != L.header or t.falsebr != L.follow:
            return None
        if L.exits != {L.follow}:
            return None
        if any(p not in L.body for p, _ in self.cfg.predecessors(lt)):
            return None
        if lt == L.header:
            return ("dowhile", L.header, lt, [])
        nodes, falls = self.seq(L.header, lt, ctx + [_Loop(L.header, L.body, L.follow,
                                                               L.exits, lt)], first=True)
        if self._jumps_to(nodes):
            # a `continue` evaluates the condition: exact only if the latch computes
            # nothing else
            start, tail = _cond_tail(self.blocks[lt])
            if start != 0 or len(tail) != len(_body(self.blocks[lt])):
                return None
        return ("dowhile", L.header, lt, nodes)

    @staticmethod
    def _jumps_to(nodes):
        for n in nodes:
            if n[0] == "continue":
                return True
            if n[0] == "if" and (Structurer._jumps_to(n[2]) or Structurer._jumps_to(n[3])):
                return True
        return False


def structure(func_ir):
    """The structured tree of `func_ir` (see the module's docstring)."""
    uninvert(func_ir)
    s = Structurer(func_ir)
    nodes, _ = s.seq(s.entry, None, [])
    return nodes
