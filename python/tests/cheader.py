"""A reader of include/devarray.h for the binding's checks (test_abi.py): the public
functions' prototypes, the structs and unions, the function pointer typedefs, the enum
constants and the integer macros.

It reads the header as the C compiler would see it without C++ (``#ifdef __cplusplus``
branches dropped), in any order and grouping of the declarations: each declaration is one
C statement, found by its shape, not by its place. It knows the few things the header is
made of (plain C declarations, DV_API in front of each public function, an X-macro list of
statuses) and fails loudly on a declaration it cannot read rather than skip it.
"""

import re

_INT_WORDS = {"char", "short", "int", "long", "signed", "unsigned", "float", "double", "void",
              "_Bool"}


class CType:
    """A C type as the checks compare it: a base name ("int", "unsigned int", "int64_t",
    "dv_stats", "char"), a count of pointer levels, an array length (fields) and, for a
    function pointer, its prototype."""

    def __init__(self, base, ptr=0, array=None, func=None):
        self.base, self.ptr, self.array, self.func = base, ptr, array, func

    def __repr__(self):
        s = self.base + "*" * self.ptr
        if self.func is not None:
            s = "%r(*)(%s)" % (self.func.ret, ", ".join(repr(p) for p in self.func.params))
        if self.array is not None:
            s += "[%d]" % self.array
        return s


class Proto:
    def __init__(self, name, ret, params):
        self.name, self.ret, self.params = name, ret, params  # params: [CType]


class Header:
    def __init__(self):
        self.functions = {}   # name -> Proto
        self.structs = {}     # name -> [(field name, CType)]
        self.unions = {}      # name -> [(field name, CType)]
        self.fn_types = {}    # typedef name -> Proto (function pointer typedefs)
        self.enums = {}       # typedef name -> {constant: value}
        self.constants = {}   # DV_* -> int (enum constants, statuses, integer macros)
        self.opaque = set()   # typedef struct X X; without a body
        self.attributes = set()  # macros that stand for attributes (or nothing)


class HeaderError(ValueError):
    pass


def _strip_comments(text):
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise HeaderError("unterminated comment")
            out.append(" " if "\n" not in text[i:j] else "\n" * text.count("\n", i, j))
            i = j + 2
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _int(s):
    s = s.strip()
    while s.startswith("(") and s.endswith(")"):
        s = s[1:-1].strip()
    m = re.fullmatch(r"(-?)(0[xX][0-9a-fA-F]+|[0-9]+)[uUlL]*", s)
    if not m:
        return None
    v = int(m.group(2), 0)
    return -v if m.group(1) else v


def _preprocess(text, hdr):
    """Join continued lines, keep the C branch of every conditional, record integer macros
    and the status X-macro; returns the text without directives."""
    text = text.replace("\\\n", " ")
    keep = []          # stack of (this branch taken, some branch taken, parent taken)
    out = []
    for line in text.split("\n"):
        s = line.strip()
        taken = all(k[0] for k in keep)
        if s.startswith("#"):
            d = s[1:].strip()
            word = d.split(None, 1)[0] if d else ""
            rest = d[len(word):].strip()
            if word in ("if", "ifdef", "ifndef"):
                if "__cplusplus" in rest:
                    cond = word == "ifndef" or rest.startswith("!")
                else:
                    cond = True  # the header's guard, the visibility attribute: first branch
                keep.append([cond, cond])
            elif word == "elif":
                keep[-1][0] = False  # only the header's first branches are read
            elif word == "else":
                keep[-1][0] = not keep[-1][1]
                keep[-1][1] = True
            elif word == "endif":
                keep.pop()
            elif word == "define" and taken:
                m = re.match(r"([A-Za-z_]\w*)(\([^)]*\))?\s*(.*)", rest)
                name, args, body = m.group(1), m.group(2), m.group(3)
                if re.fullmatch(r"\s*|.*(__attribute__|__declspec|_Pragma|\[\[).*", body):
                    hdr.attributes.add(name)
                if args is None:
                    v = _int(body)
                    if v is not None:
                        hdr.constants[name] = v
                elif name == "DV_STATUS_MAP":
                    for xm in re.finditer(r"\bX\(\s*(\w+)\s*,\s*([^,]+?)\s*,", body):
                        hdr.constants["DV_" + xm.group(1)] = _int(xm.group(2))
            out.append("")
            continue
        out.append(line if taken else "")
    return "\n".join(out)


def _statements(text):
    """Top-level C statements: up to a ';' outside braces; a function body (a '{' after a
    ')') ends its statement at its closing brace."""
    stmts, depth, start, i, n = [], 0, 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == "{":
            if depth == 0 and text[start:i].rstrip().endswith(")"):
                j, d = i, 0
                while True:
                    if text[j] == "{":
                        d += 1
                    elif text[j] == "}":
                        d -= 1
                        if d == 0:
                            break
                    j += 1
                i = j + 1
                start = i  # a definition (a static inline function): not a declaration
                continue
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == ";" and depth == 0:
            st = " ".join(text[start:i].split())
            if st:
                stmts.append(st)
            start = i + 1
        i += 1
    if text[start:].strip():
        raise HeaderError("text after the last declaration: %r" % text[start:].strip()[:80])
    return stmts


def _split_top(s, sep=","):
    parts, depth, cur = [], 0, []
    for c in s:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def _declarator(decl, hdr, named=True):
    """(name, CType) of one declaration `decl` ("const int64_t *shape", "char name[256]",
    "dv_status (*alloc)(void *state, ...)"); name None when `named` is False and it has none."""
    decl = decl.strip()
    m = re.fullmatch(r"(.*?)\(\s*\*\s*(\w*)\s*\)\s*\((.*)\)", decl)
    if m:  # a function pointer
        ret = _declarator(m.group(1), hdr, named=False)[1]
        return m.group(2) or None, CType("fn", 0, None, Proto(m.group(2), ret, _params(m.group(3), hdr)))
    array = None
    m = re.fullmatch(r"(.*?)\[\s*([^\]]*)\s*\]", decl)
    if m:
        decl, n = m.group(1).strip(), m.group(2)
        if n == "":
            array = -1  # a parameter "T x[]": a pointer
        else:
            v = _int(n)
            if v is None:
                v = hdr.constants.get(n.strip())
            if v is None:
                raise HeaderError("array length %r in %r" % (n, decl))
            array = v
    toks = re.findall(r"[A-Za-z_]\w*|\*", decl)
    toks = [t for t in toks if t not in ("const", "volatile", "restrict", "struct", "enum",
                                         "union", "DV_API", "extern", "static", "inline")]
    name = None
    words = [t for t in toks if t != "*"]
    if toks and toks[-1] != "*" and words:
        last = words[-1]
        # a field always has a name; a parameter when a type comes before the last word
        if named or (len(words) >= 2 and last not in _INT_WORDS):
            name = last
            toks = toks[:-1]
    ptr = toks.count("*")
    base = " ".join(t for t in toks if t != "*")
    base = _canon(base)
    if not base:
        raise HeaderError("no type in %r" % decl)
    if array == -1:
        ptr, array = ptr + 1, None
    return name, CType(base, ptr, array)


def _canon(base):
    words = base.split()
    if not words or not all(w in _INT_WORDS for w in words):
        return base
    # the integer words in C's canonical spelling: "unsigned" -> "unsigned int" ...
    unsigned = "unsigned" in words
    signed = "signed" in words
    core = [w for w in words if w not in ("signed", "unsigned")]
    if core == ["long", "int"] or core == ["int", "long"]:
        core = ["long"]
    core = " ".join(core) or "int"
    if core in ("short int", "int short"):
        core = "short"
    if core in ("long long int",):
        core = "long long"
    if unsigned:
        return "unsigned " + core
    if signed and core == "char":
        return "signed char"
    return core


def _params(s, hdr):
    s = s.strip()
    if s in ("", "void"):
        return []
    return [_declarator(p, hdr, named=False)[1] for p in _split_top(s)]


def _fields(body, hdr, where):
    fields = []
    for st in _split_top(body, ";"):
        if not st:
            continue
        m = re.fullmatch(r"(.*?)\(\s*\*\s*(\w+)\s*\)\s*\((.*)\)", st)
        if m:
            fields.append(_declarator(st, hdr))
            continue
        parts = _split_top(st)
        name, t = _declarator(parts[0], hdr)
        if name is None:
            raise HeaderError("a field without a name in %s: %r" % (where, st))
        fields.append((name, t))
        base_decl = parts[0][:parts[0].rfind(name)].rstrip(" *")
        for extra in parts[1:]:  # "uint64_t a, b, c": each declarator on the base type
            fields.append(_declarator(base_decl + " " + extra, hdr))
    return fields


def _enum_body(body, hdr):
    vals, nxt = {}, 0
    for item in _split_top(body):
        if not item:
            continue
        m = re.fullmatch(r"(\w+)\s*(?:=\s*(.+))?", item)
        if not m:
            raise HeaderError("enum item %r" % item)
        if m.group(2) is not None:
            v = _int(m.group(2))
            if v is None:
                v = vals.get(m.group(2).strip(), hdr.constants.get(m.group(2).strip()))
            if v is None:
                raise HeaderError("enum value %r" % item)
            nxt = v
        vals[m.group(1)] = nxt
        nxt += 1
    return vals


def _strip_attributes(st, hdr):
    """A statement without attributes: __attribute__((...)) and the header's own macros that
    stand for attributes (DV_API stays: it marks the public functions), with their arguments."""
    names = [m for m in hdr.attributes if m != "DV_API"] + ["__attribute__", "__declspec"]
    out, i = st, 0
    pat = re.compile(r"\b(%s)\b\s*" % "|".join(re.escape(n) for n in sorted(names, key=len,
                                                                              reverse=True)))
    while True:
        m = pat.search(out, i)
        if not m:
            break
        j = m.end()
        if j < len(out) and out[j] == "(":  # and its arguments, parentheses balanced
            d = 0
            while j < len(out):
                d += {"(": 1, ")": -1}.get(out[j], 0)
                j += 1
                if d == 0:
                    break
        out = out[:m.start()] + " " + out[j:]
        i = m.start()
    return " ".join(out.split())


def parse(text):
    """The Header read from the text of devarray.h."""
    hdr = Header()
    text = _preprocess(_strip_comments(text), hdr)
    for st in _statements(text):
        st = _strip_attributes(st, hdr)
        if st.startswith('extern "C"'):
            continue
        m = re.fullmatch(r"typedef (struct|union) (\w+)? ?\{(.*)\} (\w+)", st)
        if m:
            table = hdr.structs if m.group(1) == "struct" else hdr.unions
            table[m.group(4)] = _fields(m.group(3), hdr, m.group(4))
            continue
        m = re.fullmatch(r"typedef enum (\w+)? ?\{(.*)\} (\w+)", st)
        if m:
            body = m.group(2).strip()
            if re.fullmatch(r"DV_STATUS_MAP\(\w+\)", body):  # the X-macro: read at its #define
                hdr.enums[m.group(3)] = {k: v for k, v in hdr.constants.items()
                                         if k == "DV_OK" or k.startswith("DV_ERR_")}
            else:
                vals = _enum_body(body, hdr)
                hdr.enums[m.group(3)] = vals
                hdr.constants.update(vals)
            continue
        m = re.fullmatch(r"typedef struct (\w+) (\w+)", st)
        if m:
            hdr.opaque.add(m.group(2))
            continue
        m = re.fullmatch(r"typedef (.*\(\s*\*\s*(\w+)\s*\)\s*\(.*\))", st)
        if m:
            hdr.fn_types[m.group(2)] = _declarator(m.group(1), hdr)[1].func
            continue
        m = re.fullmatch(r"DV_API (.*?)\b(\w+)\s*\((.*)\)", st)
        if m:
            ret = _declarator(m.group(1), hdr, named=False)[1]
            hdr.functions[m.group(2)] = Proto(m.group(2), ret, _params(m.group(3), hdr))
            continue
        if st.startswith("struct ") and re.fullmatch(r"struct \w+", st):
            hdr.opaque.add(st.split()[1])  # a forward declaration (struct DLManagedTensor;)
            continue
        raise HeaderError("a declaration this reader does not know: %r" % st[:120])
    return hdr
