"""The binding's mirrors of devarray.h (python/devarray/_abi.py) against the header itself.

Every prototype the binding declares (return type, each parameter, their count), every
struct it mirrors (its fields' names, types and order), every DV_* constant it names: each
compared with include/devarray.h as tests/cheader.py reads it, in whatever order the header
declares them. The planted-drift cases change a temporary copy of the header one way each and
show that the check names the drift; the C cases compile the generated static assertions
(python/tools/gen_abi_check.py, built by CMake) against a drifted copy and show that the
build fails. Nothing here loads the library.
"""

import ctypes
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
HEADER = os.path.join(ROOT, "include", "devarray.h")
PKG = os.path.join(ROOT, "python", "devarray")
GEN = os.path.join(ROOT, "python", "tools", "gen_abi_check.py")

sys.path.insert(0, HERE)
import cheader  # noqa: E402


def _load_abi():
    """python/devarray/_abi.py alone (not through the package, which loads the library)."""
    spec = importlib.util.spec_from_file_location("devarray_abi_alone", os.path.join(PKG, "_abi.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


abi = _load_abi()

_SCALARS = {
    "char": ctypes.c_char, "signed char": ctypes.c_byte, "unsigned char": ctypes.c_ubyte,
    "short": ctypes.c_short, "unsigned short": ctypes.c_ushort, "int": ctypes.c_int,
    "unsigned int": ctypes.c_uint, "long": ctypes.c_long, "unsigned long": ctypes.c_ulong,
    "long long": ctypes.c_longlong, "unsigned long long": ctypes.c_ulonglong,
    "float": ctypes.c_float, "double": ctypes.c_double, "_Bool": ctypes.c_bool,
    "int8_t": ctypes.c_int8, "int16_t": ctypes.c_int16, "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64, "uint8_t": ctypes.c_uint8, "uint16_t": ctypes.c_uint16,
    "uint32_t": ctypes.c_uint32, "uint64_t": ctypes.c_uint64, "size_t": ctypes.c_size_t,
    "ptrdiff_t": ctypes.c_ssize_t,
}
_FUNCPTR = ctypes._CFuncPtr


def _name(py):
    return "None" if py is None else getattr(py, "__name__", repr(py))


def compatible(py, ct, hdr, abi=abi):
    """None when ctypes type `py` passes or holds C type `ct` (a cheader.CType) as the header
    declares it, else why not. A pointer may be c_void_p; ``char *`` c_char_p; an enum c_int
    (when abi.ENUM_TYPES lists it: the C check asserts its size); a struct its mirror; a
    function pointer a CFUNCTYPE of the same prototype."""
    if ct.array is not None:
        if not (isinstance(py, type) and issubclass(py, ctypes.Array)) or py._length_ != ct.array:
            return "%s is not an array of %d" % (_name(py), ct.array)
        return compatible(py._type_, cheader.CType(ct.base, ct.ptr), hdr, abi)
    fn = ct.func if ct.func is not None else (hdr.fn_types.get(ct.base) if ct.ptr == 0 else None)
    if fn is not None:
        if py is ctypes.c_void_p:
            return None
        if not (isinstance(py, type) and issubclass(py, _FUNCPTR)):
            return "%s for the function pointer %r" % (_name(py), ct)
        return _proto_diff(py._restype_, list(py._argtypes_), fn, hdr, abi)
    if ct.ptr:
        if py is ctypes.c_void_p:
            return None
        if ct.ptr == 1 and ct.base == "char" and py is ctypes.c_char_p:
            return None
        if isinstance(py, type) and issubclass(py, ctypes._Pointer):
            why = compatible(py._type_, cheader.CType(ct.base, ct.ptr - 1), hdr, abi)
            return None if why is None else "%s for %r: %s" % (_name(py), ct, why)
        return "%s for the pointer %r" % (_name(py), ct)
    if ct.base == "void":
        return None if py is None else "%s for void" % _name(py)
    if ct.base in hdr.enums:
        if py is not ctypes.c_int:
            return "%s for the enum %s (c_int)" % (_name(py), ct.base)
        if ct.base not in abi.ENUM_TYPES:
            return "enum %s passed as c_int but not in _abi.ENUM_TYPES" % ct.base
        return None
    if ct.base in hdr.structs:
        if py not in abi.STRUCTS or py.__name__ != ct.base:
            return "%s for the struct %s (its mirror in _abi.STRUCTS)" % (_name(py), ct.base)
        return None
    if ct.base in hdr.unions:
        if abi.STAND_INS.get(ct.base) is not py:
            return "%s for the union %s (not its stand-in)" % (_name(py), ct.base)
        return None
    if ct.base in _SCALARS:
        return None if py is _SCALARS[ct.base] else "%s for %s" % (_name(py), ct.base)
    return "%s for %r, a type this check does not know" % (_name(py), ct)


def _proto_diff(res, args, proto, hdr, abi=abi):
    why = compatible(res, proto.ret, hdr, abi)
    if why:
        return "returns %s" % why
    if len(args) != len(proto.params):
        return "%d parameters declared, the header has %d" % (len(args), len(proto.params))
    for i, (py, ct) in enumerate(zip(args, proto.params)):
        why = compatible(py, ct, hdr, abi)
        if why:
            return "parameter %d: %s" % (i + 1, why)
    return None


def drift(hdr, abi=abi):
    """Every difference between the binding's mirrors and the header `hdr`, as lines."""
    out = []
    for table in ("FUNCTIONS", "LEAN"):
        for name, (res, args) in getattr(abi, table).items():
            p = hdr.functions.get(name)
            if p is None:
                out.append("%s %s: not in the header" % (table, name))
                continue
            why = _proto_diff(res, args, p, hdr, abi)
            if why:
                out.append("%s %s: %s" % (table, name, why))
    for cls in abi.STRUCTS:
        fields = hdr.structs.get(cls.__name__)
        if fields is None:
            out.append("struct %s: not in the header" % cls.__name__)
            continue
        mine = [f[0] for f in cls._fields_]
        theirs = [f[0] for f in fields]
        if mine != theirs:
            out.append("struct %s: fields %s, the header has %s" % (cls.__name__, mine, theirs))
            continue
        for (fname, py), (_, ct) in zip(cls._fields_, fields):
            why = compatible(py, ct, hdr, abi)
            if why:
                out.append("struct %s.%s: %s" % (cls.__name__, fname, why))
    for name in sorted(vars(abi)):
        v = getattr(abi, name)
        if re.fullmatch(r"DV_[A-Z0-9_]+", name) and isinstance(v, int):
            if name not in hdr.constants:
                out.append("constant %s: not in the header" % name)
            elif hdr.constants[name] != v:
                out.append("constant %s: %d, the header has %d" % (name, v, hdr.constants[name]))
    for i, n in enumerate(abi.TYPE_NAMES):
        if hdr.constants.get("DV_" + n.upper()) != i:
            out.append("TYPE_NAMES[%d] %s: the header's DV_%s is %r"
                       % (i, n, n.upper(), hdr.constants.get("DV_" + n.upper())))
    for e in abi.ENUM_TYPES:
        if e not in hdr.enums:
            out.append("ENUM_TYPES %s: not an enum of the header" % e)
    return out


def _header_text():
    with open(HEADER) as f:
        return f.read()


def test_the_binding_matches_the_header():
    assert drift(cheader.parse(_header_text())) == []


def test_every_function_the_binding_calls_is_declared():
    """lib.dv_x anywhere in the package: in _abi.FUNCTIONS (else ctypes would call it with
    default conversions), and no module declares a C function of the library itself."""
    used = set()
    for dp, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(dp, f)) as fh:
                    src = fh.read()
                used |= set(re.findall(r"\blib\.(dv_\w+)", src))
                if f != "_lib.py":
                    assert "CDLL(library_path)" not in src, f
                    assert not re.search(r"\blib\.dv_\w+\.(argtypes|restype)", src), f
    assert sorted(used - set(abi.FUNCTIONS)) == []


def test_reordered_and_extended_header_reads_the_same():
    """The reader does not depend on the header's order or grouping: sections moved, a
    declaration split over more lines, functions added: no drift."""
    text = _header_text()
    hdr0 = cheader.parse(text)
    # move the streams-and-events prototypes (one declaration each) to the end
    protos = re.findall(r"^DV_API [^;]*\bdv_(?:stream|event)_\w+\([^;]*\);\n", text, re.M)
    assert len(protos) > 5
    for p in protos:
        text = text.replace(p, "", 1)
    end = text.rindex("#ifdef __cplusplus")
    text = (text[:end] + "/* regrouped */\n" + "".join(reversed(protos))
            + "DV_API dv_event *dv_event_retain(dv_event *e);\n"
            + "DV_API dv_status dv_array_unregister(dv_array *a);\n"
            + "#define DV_DEPRECATED(why) __attribute__((deprecated(why)))\n"
            + "DV_API DV_DEPRECATED(\"say unregister\") dv_status\n"
            + "    dv_array_unpin(dv_array *a) __attribute__((nonnull(1)));\n" + text[end:])
    hdr = cheader.parse(text)
    assert drift(hdr) == []
    assert set(hdr.functions) == set(hdr0.functions) | {"dv_event_retain", "dv_array_unregister",
                                                         "dv_array_unpin"}
    assert hdr.functions["dv_array_unpin"].ret.base == "dv_status"
    assert hdr.functions["dv_event_retain"].ret.base == "dv_event"


# ---- planted drift: one change of each kind, in a copy of the header --------------------------

def _plant(pattern, repl):
    text = _header_text()
    new, n = re.subn(pattern, repl, text, count=1, flags=re.M)
    assert n == 1, "the pattern %r no longer matches devarray.h: update the case" % pattern
    return new


PLANTS = [
    # (what, pattern, replacement, the words the report must contain)
    ("a return type", r"^DV_API int dv_array_ndim\(", "DV_API int64_t dv_array_ndim(",
     "FUNCTIONS dv_array_ndim: returns"),
    ("a parameter's type", r"(dv_context_set_dealloc_limits\([^;]*?)double max_ratio",
     r"\1float max_ratio", "dv_context_set_dealloc_limits: parameter 3"),
    ("a pointer's target", r"^DV_API const int64_t \*dv_array_shape\(",
     "DV_API const int32_t *dv_array_shape(", "FUNCTIONS dv_array_shape: returns"),
    ("a parameter added", r"dv_stream_synchronize\(dv_stream \*s\)",
     "dv_stream_synchronize(dv_stream *s, unsigned flags)",
     "dv_stream_synchronize: 1 parameters declared, the header has 2"),
    ("a parameter removed", r"dv_event_record\(dv_event \*e, dv_stream \*s\)",
     "dv_event_record(dv_event *e)", "dv_event_record: 2 parameters declared, the header has 1"),
    ("a lean prototype's parameter", r"(dv_to_device\([^;]*?)int copy",
     r"\1int64_t copy", "LEAN dv_to_device: parameter 4"),
    ("a function renamed", r"\bdv_array_is_pinned\(", "dv_array_pinned(",
     "dv_array_is_pinned: not in the header"),
    ("a struct field's type", r"(typedef struct dv_dim3 \{\s*uint32_t x;[^\n]*\n\s*)uint32_t y;",
     r"\1uint64_t y;", "struct dv_dim3.y"),
    ("a struct field renamed", r"(typedef struct dv_block \{[^}]*?)size_t offset;",
     r"\1size_t off;", "struct dv_block: fields"),
    ("struct fields reordered", r"(typedef struct dv_launch_config \{\s*)(dv_dim3 grid;[^\n]*\n\s*)(dv_dim3 block;[^\n]*\n)",
     r"\1\3  \2", "struct dv_launch_config: fields"),
    ("a struct field added", r"(typedef struct dv_kernel_param \{[^}]*?)(\} dv_kernel_param;)",
     r"\1  int flags;\n\2", "struct dv_kernel_param: fields"),
    ("a field's array length", r"char pci_bus_id\[32\];", "char pci_bus_id[48];",
     "struct dv_device_info.pci_bus_id"),
    ("a function pointer field", r"(dv_status \(\*alloc\)\(void \*state, size_t bytes, )dv_stream \*stream",
     r"\1int stream", "struct dv_memory_manager.alloc"),
    ("an enum value", r"DV_MEM_PINNED = 2", "DV_MEM_PINNED = 5", "constant DV_MEM_PINNED: 2, the header has 5"),
    ("an enum's implicit values", r"^(\s*)DV_INT8,", r"\1DV_INT8 = 2,", "TYPE_NAMES[1] int8"),
    ("a status value", r"X\(ERR_BUSY, 601,", "X(ERR_BUSY, 611,", "constant DV_ERR_BUSY: 601, the header has 611"),
    ("a macro value", r"#define DV_IPC_HANDLE_SIZE 128", "#define DV_IPC_HANDLE_SIZE 64",
     "constant DV_IPC_HANDLE_SIZE"),
]


@pytest.mark.parametrize("what,pattern,repl,words", PLANTS, ids=[p[0] for p in PLANTS])
def test_planted_drift_is_reported(what, pattern, repl, words):
    report = drift(cheader.parse(_plant(pattern, repl)))
    assert any(words in line for line in report), (what, report)


# ---- the C side: static assertions compiled against the header --------------------------------

def _cc():
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def _compile(tmp_path, header_text):
    inc = tmp_path / "include"
    inc.mkdir(exist_ok=True)
    (inc / "devarray.h").write_text(header_text)
    out = tmp_path / "abi_check.c"
    subprocess.run([sys.executable, GEN, str(out)], check=True)
    return subprocess.run([_cc(), "-std=c11", "-fsyntax-only", "-I", str(inc), str(out)],
                          capture_output=True, text=True)


@pytest.fixture
def cc():
    if not _cc():
        pytest.skip("no C compiler")


def test_c_check_passes_on_the_header(tmp_path, cc):
    r = _compile(tmp_path, _header_text())
    assert r.returncode == 0, r.stderr


C_PLANTS = [
    ("a struct field's type", r"(typedef struct dv_dim3 \{\s*uint32_t x;[^\n]*\n\s*)uint32_t y;",
     r"\1uint64_t y;", "dv_dim3"),
    ("a struct field added", r"(typedef struct dv_block \{\s*void \*buf;[^\n]*\n)",
     r"\1  int extra;\n", "dv_block"),
    ("a versioned struct grown", r"(uint64_t transfers_h2d, transfers_d2h, transfers_d2d;)",
     r"\1\n  uint64_t more;", "dv_stats"),
    ("an enum value", r"DV_ARG_VIEW = 3", "DV_ARG_VIEW = 7", "DV_ARG_VIEW"),
    ("an enum's size", r"(DV_WHERE_DEVICE = 1)", r"\1, DV_WHERE_BIG = 0x100000000", "dv_where"),
    ("a status value", r"X\(ERR_COMPILE, 403,", "X(ERR_COMPILE, 413,", "DV_ERR_COMPILE"),
]


@pytest.mark.parametrize("what,pattern,repl,words", C_PLANTS, ids=[p[0] for p in C_PLANTS])
def test_c_check_fails_on_planted_drift(tmp_path, cc, what, pattern, repl, words):
    r = _compile(tmp_path, _plant(pattern, repl))
    assert r.returncode != 0, what
    assert words in r.stderr, r.stderr
