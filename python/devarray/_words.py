"""The words NumPy and Numba use when they refuse what the binding refuses too.

The binding asks NumPy itself, on the error path only, what it raises for the same
operation on a host array of the same shape (a zero-stride probe: no memory), so that the
message is NumPy's own for the NumPy installed; where Numba's API refuses (its copies, its
order argument) the words are Numba's."""

import numpy as np

from ._lib import DtypeMismatchError


def _order_words(err):
    """A refused order in Numba's words (its reshape and ravel refuse it so)."""
    if getattr(err, "name", None) == "DV_ERR_BAD_ORDER":
        err.args = ("order not C|F|A",)
    return err


def _probe(shape, dtype=np.int8, writeable=False):
    """A NumPy array of `shape` over one element (zero strides): NumPy checks an operation
    on it as on any array of that shape, at no cost in memory."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, (0,) * len(shape),
                                           writeable=writeable)


def _as_numpy(err, numpy_op):
    """The exception to raise for `err` (the binding's refusal of an operation): when NumPy
    refuses numpy_op() too, `err` with NumPy's words if it is of NumPy's exception class
    (a DevarrayError keeps its status and detail), else NumPy's own exception; `err` as it
    is when NumPy accepts."""
    try:
        numpy_op()
    except Exception as e:  # noqa: BLE001 -- NumPy's refusal, whatever its class
        if isinstance(err, type(e)):
            err.args = e.args
            return err
        e.__cause__ = err
        return e
    return err


def _incompatible(err, dev, other):
    """Numba's words (check_array_compatibility) for the copies it refuses."""
    if getattr(err, "name", None) == "DV_ERR_DTYPE_MISMATCH":
        e = DtypeMismatchError(err.status, err.detail, err.where)
        e.args = ("incompatible dtype: %s vs. %s" % (dev.dtype, other.dtype),)
        return e
    if getattr(err, "name", None) == "DV_ERR_SHAPE_MISMATCH":
        err.args = ("incompatible shape: %s vs. %s" % (dev.shape, other.shape),)
    return err




def _shape_words(err, shape):
    """NumPy's words for a negative extent (NumPy refuses it before allocating anything)."""
    if any(n < 0 for n in shape):
        return _as_numpy(err, lambda: np.empty(shape, np.int8))
    return err
