"""braid for Python: collectives on numpy arrays and CPU torch tensors.

    import braid
    comm = braid.init()              # rank, size, rendezvous from the launcher
    comm.allreduce(x)                # in place, x a numpy array or CPU tensor
    comm.finalize()

Buffers are passed to libbraid by address: no copies.  They must be
C-contiguous (and writeable where braid writes), of dtype float32, float64,
float16, bfloat16 (torch only), int32, int64 or uint8.  Every failure raises
braid.Error carrying braid's status and message.

A thin ctypes layer over the public C API (braid/braid.h); libbraid is found
through BRAID_LIBRARY, the build tree or install this package came from, or
the system's library path.
"""
import ctypes
import ctypes.util
import os

__all__ = ["Error", "Comm", "Request", "init", "SUM", "PROD", "MIN", "MAX",
           "AVG"]

SUM, PROD, MIN, MAX, AVG = "sum", "prod", "min", "max", "avg"
_OPS = {SUM: 0, PROD: 1, MIN: 2, MAX: 3, AVG: 4}
_DTYPES = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3,
           "int32": 4, "int64": 5, "uint8": 6}
_COLLS = {"allreduce": 0, "reduce_scatter": 1, "allgather": 2,
          "broadcast": 3, "barrier": 4}
_UNDEFINED = -32766  # BRAID_UNDEFINED


class Error(RuntimeError):
    """A braid call failed.  status is braid's status name ("timeout",
    "peer lost", ...), message braid_last_error()."""

    def __init__(self, call, status, message):
        self.call, self.status, self.message = call, status, message
        super().__init__(f"{call}: {status}: {message}")


def _library_candidates():
    env = os.environ.get("BRAID_LIBRARY")
    if env:
        return [env]
    out = []
    try:
        from . import _paths  # written by meson into the build tree
        here = os.path.dirname(os.path.realpath(__file__))
        if here.startswith(_paths.BUILD_ROOT + os.sep):
            out.append(_paths.BUILD_LIB)
        elif here.endswith(_paths.INSTALL_DIR):  # installed, maybe staged
            out.append(here[:len(here) - len(_paths.INSTALL_DIR)] +
                       _paths.INSTALL_LIB)
        out.append(_paths.INSTALL_LIB)
    except ImportError:
        pass
    found = ctypes.util.find_library("braid")
    if found:
        out.append(found)
    return out


def _load():
    tried = []
    for path in _library_candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("braid: cannot load libbraid; tried: " +
                      ("; ".join(tried) or "nothing (set BRAID_LIBRARY to "
                       "the path of libbraid.so)"))


_lib = _load()
_vp, _sz, _int = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
for _name, _args in {
        "braid_init": [ctypes.POINTER(_vp)],
        "braid_finalize": [_vp],
        "braid_comm_split": [_vp, _int, _int, ctypes.POINTER(_vp)],
        "braid_allreduce": [_vp, _vp, _sz, _int, _int, _vp],
        "braid_reduce_scatter": [_vp, _vp, _sz, _int, _int, _vp],
        "braid_allgather": [_vp, _vp, _sz, _int, _vp],
        "braid_broadcast": [_vp, _sz, _int, _int, _vp],
        "braid_barrier": [_vp],
        "braid_iallreduce": [_vp, _vp, _sz, _int, _int, _vp,
                             ctypes.POINTER(_vp)],
        "braid_test": [_vp, ctypes.POINTER(_int)],
        "braid_wait": [_vp],
        "braid_comm_choice": [_vp, _int, _sz, ctypes.c_char_p, _sz,
                              ctypes.c_char_p, _sz]}.items():
    getattr(_lib, _name).argtypes = _args
    getattr(_lib, _name).restype = _int
_lib.braid_comm_rank.argtypes = _lib.braid_comm_size.argtypes = [_vp]
_lib.braid_status_str.argtypes = [_int]
_lib.braid_status_str.restype = ctypes.c_char_p
_lib.braid_last_error.argtypes = []
_lib.braid_last_error.restype = ctypes.c_char_p


def _check(call, status):
    if status != 0:
        raise Error(call, _lib.braid_status_str(status).decode(),
                    _lib.braid_last_error().decode(errors="replace"))


class _Buf:
    """Address, element count, braid dtype of a numpy array or torch tensor
    (and whether it is a tensor, to make outputs of the same kind)."""

    def __init__(self, x, what, write):
        if hasattr(x, "data_ptr") and hasattr(x, "is_contiguous"):  # torch
            if x.device.type != "cpu":
                raise Error(what, "not supported", f"tensor on {x.device}: "
                            "only CPU tensors for now")
            if not x.is_contiguous():
                raise Error(what, "invalid argument", "tensor is not "
                            "contiguous")
            dtype = str(x.dtype).replace("torch.", "")
            self.addr, self.count, self.torch = x.data_ptr(), x.numel(), True
        elif hasattr(x, "__array_interface__"):  # numpy
            if not x.flags["C_CONTIGUOUS"]:
                raise Error(what, "invalid argument", "array is not "
                            "C-contiguous")
            if write and not x.flags["WRITEABLE"]:
                raise Error(what, "invalid argument", "array is read-only")
            dtype = x.dtype.name
            self.addr, self.count, self.torch = x.ctypes.data, x.size, False
        else:
            raise Error(what, "invalid argument", f"{type(x).__name__}: "
                        "expected a numpy array or a CPU torch tensor")
        if dtype not in _DTYPES:
            raise Error(what, "invalid argument", f"dtype {dtype} (braid "
                        f"takes {', '.join(_DTYPES)})")
        self.obj, self.dtype, self.dtype_name = x, _DTYPES[dtype], dtype


def _empty_like(buf, count):
    if buf.torch:
        import torch
        return torch.empty(count, dtype=buf.obj.dtype)
    import numpy
    return numpy.empty(count, dtype=buf.obj.dtype)


def _op(op, what):
    if op not in _OPS:
        raise Error(what, "invalid argument", f"op {op!r} (one of "
                    f"{', '.join(_OPS)})")
    return _OPS[op]


class Request:
    """A non-blocking all-reduce in flight.  Its buffers stay referenced
    until it completes."""

    def __init__(self, handle, keep):
        self._h, self._keep, self.done = handle, keep, False

    def test(self):
        """True once complete (raising braid.Error if it failed)."""
        if not self.done:
            flag = _int(0)
            st = _lib.braid_test(self._h, ctypes.byref(flag))
            if flag.value or st != 0:
                self.done, self._keep = True, None
            _check("braid_test", st)
        return self.done

    def wait(self):
        if not self.done:
            self.done = True
            st = _lib.braid_wait(self._h)
            self._keep = None
            _check("braid_wait", st)


class Comm:
    """A communicator.  Collective calls must be made by every rank, in the
    same order."""

    def __init__(self, handle):
        self._h = _vp(handle)
        self.rank = _lib.braid_comm_rank(self._h)
        self.size = _lib.braid_comm_size(self._h)

    def allreduce(self, x, op=SUM, out=None):
        """Reduces x over all ranks into out (default: x itself); returns
        the result."""
        src = _Buf(x, "allreduce", out is None)
        dst = _Buf(out, "allreduce", True) if out is not None else src
        if dst.count != src.count or dst.dtype != src.dtype:
            raise Error("allreduce", "invalid argument", "out must match x "
                        "in size and dtype")
        _check("braid_allreduce", _lib.braid_allreduce(
            src.addr, dst.addr, src.count, src.dtype, _op(op, "allreduce"),
            self._h))
        return dst.obj

    def iallreduce(self, x, op=SUM, out=None):
        """Non-blocking allreduce: returns a Request (test/wait)."""
        src = _Buf(x, "iallreduce", out is None)
        dst = _Buf(out, "iallreduce", True) if out is not None else src
        if dst.count != src.count or dst.dtype != src.dtype:
            raise Error("iallreduce", "invalid argument", "out must match "
                        "x in size and dtype")
        req = _vp()
        _check("braid_iallreduce", _lib.braid_iallreduce(
            src.addr, dst.addr, src.count, src.dtype,
            _op(op, "iallreduce"), self._h, ctypes.byref(req)))
        return Request(req, (src.obj, dst.obj))

    def reduce_scatter(self, x, op=SUM, out=None):
        """x holds size equal blocks; rank r gets the reduction of every
        rank's block r (a new array or tensor unless out is given)."""
        src = _Buf(x, "reduce_scatter", False)
        if src.count % self.size:
            raise Error("reduce_scatter", "invalid argument", f"{src.count} "
                        f"elements do not split into {self.size} blocks")
        n = src.count // self.size
        out = _empty_like(src, n) if out is None else out
        dst = _Buf(out, "reduce_scatter", True)
        if dst.count != n or dst.dtype != src.dtype:
            raise Error("reduce_scatter", "invalid argument", f"out must "
                        f"hold {n} elements of {src.dtype_name}")
        _check("braid_reduce_scatter", _lib.braid_reduce_scatter(
            src.addr, dst.addr, n, src.dtype, _op(op, "reduce_scatter"),
            self._h))
        return out

    def allgather(self, x, out=None):
        """Every rank's x, in rank order, in one flat array or tensor."""
        src = _Buf(x, "allgather", False)
        out = _empty_like(src, src.count * self.size) if out is None else out
        dst = _Buf(out, "allgather", True)
        if dst.count != src.count * self.size or dst.dtype != src.dtype:
            raise Error("allgather", "invalid argument", f"out must hold "
                        f"{src.count * self.size} elements of "
                        f"{src.dtype_name}")
        _check("braid_allgather", _lib.braid_allgather(
            src.addr, dst.addr, src.count, src.dtype, self._h))
        return out

    def broadcast(self, x, root=0):
        """x of rank root, into x on every rank (in place)."""
        buf = _Buf(x, "broadcast", True)
        _check("braid_broadcast", _lib.braid_broadcast(
            buf.addr, buf.count, buf.dtype, root, self._h))
        return x

    def barrier(self):
        _check("braid_barrier", _lib.braid_barrier(self._h))

    def split(self, color, key=0):
        """A new communicator of the ranks with the same color, ordered by
        (key, rank); None for color None."""
        new = _vp()
        _check("braid_comm_split", _lib.braid_comm_split(
            self._h, _UNDEFINED if color is None else color, key,
            ctypes.byref(new)))
        return Comm(new.value) if new.value else None

    def choice(self, coll, nbytes):
        """(candidate, reason) the dispatcher picks for coll of nbytes."""
        cand, why = ctypes.create_string_buffer(96), \
            ctypes.create_string_buffer(96)
        if coll not in _COLLS:
            raise Error("choice", "invalid argument", f"collective {coll!r}")
        _check("braid_comm_choice", _lib.braid_comm_choice(
            self._h, _COLLS[coll], nbytes, cand, 96, why, 96))
        return cand.value.decode(), why.value.decode()

    def finalize(self):
        if self._h:
            h, self._h = self._h, None
            _check("braid_finalize", _lib.braid_finalize(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.finalize()


def init():
    """The world communicator, from the launcher's environment (braidrun,
    torchrun, mpirun, srun), as braid_init."""
    h = _vp()
    _check("braid_init", _lib.braid_init(ctypes.byref(h)))
    return Comm(h.value)
