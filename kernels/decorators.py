"""All Numba plumbing for colmz kernels lives here (numbagg style).

Kernels elsewhere are plain Python functions decorated with :func:`jit`. This module decides
how they compile (the reasons are in ``docs/kernels.md``):

* ``cache=True`` always: compile cost is paid once per machine (or per Spark worker image), not
  once per process. **One cache for every entry point**: ``NUMBA_CACHE_DIR`` when that is set
  (set it to a writable, node-local directory on Spark executors, ``docs/kernels.md``), and
  otherwise :func:`default_cache_dir` -- the same per-user directory for ``python``, the
  ``colmz`` command, ``scripts/main`` and the Spark workers they start, which this module
  exports as ``NUMBA_CACHE_DIR`` at import so child processes inherit it. (Numba's own
  default, ``__pycache__`` beside each module, would give a second cache beside whatever a
  command chose.) :func:`colmz.set_cache_dir` changes it, but only before the first kernel is
  compiled, because Numba fixes a function's cache directory when it is decorated.
* Never ``parallel=True``: Spark already runs one Python worker per core, and cached parallel
  kernels can crash when loaded with another thread count (``docs/kernels.md``).
* ``nogil=True`` so a thread pool (Dask, notebook helpers) can run kernels side by side.
* ``boundscheck`` follows ``COLMZ_BOUNDSCHECK=1`` for debugging sessions.

Set ``NUMBA_DISABLE_JIT=1`` to run every kernel as the Python function it is written as; the
tests use this mode to check the kernels' own Python against their references as well.

Loading from the cache. Numba's cache loader first *refreshes* the target context: it imports
and registers every typing and lowering registry Numba has (its whole NumPy, typed-container
and random-number support), which costs about half a second once per process -- more than
loading all the kernels one call needs. Cached machine code needs none of it: it needs the
runtime's symbols (the NRT allocator, Numba's C helpers), which the context and
``rtsys.initialize`` install. colmz's dispatchers therefore load cached overloads with
:class:`LightCache`, which initialises the runtime only; a real compilation (a cache miss)
still goes through Numba's compiler, which refreshes the contexts itself. This is what a CLI
call or a Spark task that consolidates once per process saves.
"""

from __future__ import annotations

import ctypes
import os
import tempfile

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.caching import FunctionCache
from numba.extending import intrinsic, overload

__all__ = ["jit", "JIT_OPTIONS", "default_cache_dir", "DISPATCHERS", "LightCache", "enable_light_loading", "load8",
           "load8_le", "copy_from_address", "SHORT_COPY", "prefetch"]

def default_cache_dir() -> str:
    """The kernel cache directory every colmz entry point uses when ``NUMBA_CACHE_DIR`` is unset.

    ``$XDG_CACHE_HOME/colmz/numba`` (``~/.cache/colmz/numba`` without ``XDG_CACHE_HOME``);
    where no home directory can be written, ``<tmp>/colmz-numba-<uid>`` (per user, so two users
    of one machine never share, or fight over, a cache). With ``NUMBA_CACHE_DIR`` set, that.

    >>> isinstance(default_cache_dir(), str)
    True
    """
    env = os.environ.get("NUMBA_CACHE_DIR")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "colmz", "numba")
    try:
        os.makedirs(path, exist_ok=True)
        if os.access(path, os.W_OK):
            return path
    except OSError:  # no (writable) home: a container user, a read-only image
        pass
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), f"colmz-numba-{uid}")


def use_default_cache_dir() -> None:
    """Point Numba's cache at :func:`default_cache_dir` when ``NUMBA_CACHE_DIR`` is unset, and
    export it so processes started from here (Spark's Python workers) use the same cache.
    Runs at import, before any kernel is decorated."""
    if os.environ.get("NUMBA_CACHE_DIR") or os.environ.get("NUMBA_DISABLE_JIT") == "1":
        return
    path = default_cache_dir()
    os.environ["NUMBA_CACHE_DIR"] = path
    from numba.core import config

    config.CACHE_DIR = path


use_default_cache_dir()

JIT_OPTIONS: dict[str, object] = {
    "cache": True,
    "nogil": True,
    "boundscheck": os.environ.get("COLMZ_BOUNDSCHECK", "") == "1",
}


#: Every dispatcher made by :func:`jit`, so :func:`colmz.set_cache_dir` can re-point their caches
#: (Numba fixes a function's cache directory when the function is decorated).
DISPATCHERS: list = []


class LightCache(FunctionCache):
    """Numba's function cache, loading overloads without refreshing the target context.

    Loading an overload from disk rebuilds its object code and links it against the runtime's
    symbols; the typing and lowering registries a refresh installs serve only compilation,
    which Numba's compiler refreshes for itself.
    """

    def load_overload(self, sig, target_context):
        from numba.core.runtime import rtsys

        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            try:
                return self._load_overload(sig, target_context)
            except ImportError:
                # The entry names a module this process cannot import: it was written by a
                # process that imported the kernel file under another name (a test runner
                # importing ``kernels.x`` from a source tree). A miss: compile, overwrite it.
                return None


def enable_light_loading(dispatcher) -> None:
    """Make ``dispatcher``'s cache (if it has an on-disk one) load through :class:`LightCache`."""
    cache = getattr(dispatcher, "_cache", None)
    if type(cache) is FunctionCache:
        cache.__class__ = LightCache


def jit(fn=None, *, inline: bool = False):
    """Compile ``fn`` in nopython mode with colmz's options (cached, GIL released).

    ``@jit(inline=True)`` marks a helper that kernels call: Numba inlines its body into each
    caller before typing (``inline="always"``) instead of compiling it as a function of its
    own, which it would then optimise again inside every caller. Called from Python it still
    compiles as a kernel.
    """
    if fn is None:
        return lambda f: jit(f, inline=inline)
    options = dict(JIT_OPTIONS, inline="always") if inline else JIT_OPTIONS
    dispatcher = numba.njit(**options)(fn)
    enable_light_loading(dispatcher)
    DISPATCHERS.append(dispatcher)
    return dispatcher


def load8(data, p):
    """Bytes ``p .. p + 7`` of the ``uint8`` array ``data`` as one big-endian ``uint64``
    (the caller keeps ``p + 8 <= len(data)``): the order word of 8 bytes, used by string
    ranking (``kernels/strings.py``) and order words (``kernels/read_merge.py``).

    Compiled, it is one unaligned 8-byte load and a byte swap (:func:`_load8_be`): eight
    byte loads ORed together are not combined by the compiler, because each index carries
    Numba's negative-index wraparound -- four times slower (900,000 16-byte keys, two words
    each: 7 ms against 1.7). Run as Python (``NUMBA_DISABLE_JIT=1``) it is the plain
    expression.

    >>> int(load8(np.frombuffer(b"abcdefgh", np.uint8), 0)) == int.from_bytes(b"abcdefgh", "big")
    True
    """
    return np.uint64(int.from_bytes(data[p:p + 8].tobytes(), "big"))


def _load8_intrinsic(byteswap: bool):
    # An intrinsic making one unaligned 8-byte load at &data[p], byte-swapped to big-endian
    # order when ``byteswap`` (else in the machine's little-endian order).
    @intrinsic
    def load(typingctx, data, p):
        sig = types.uint64(data, types.int64)

        def codegen(context, builder, signature, args):
            array, at = args
            view = context.make_array(signature.args[0])(context, builder, array)
            word = builder.bitcast(builder.gep(view.data, [at]), ir.IntType(64).as_pointer())
            value = builder.load(word, align=1)
            if byteswap:
                bswap = builder.module.declare_intrinsic("llvm.bswap", [ir.IntType(64)])
                value = builder.call(bswap, [value])
            return value

        return sig, codegen

    return load


_load8_be = _load8_intrinsic(True)
_load8_raw = _load8_intrinsic(False)


@overload(load8, inline="always")
def _load8_compiled(data, p):
    def impl(data, p):
        return _load8_be(data, np.int64(p))

    return impl


def load8_le(data, p):
    """Bytes ``p .. p + 7`` of the ``uint8`` array ``data`` as one little-endian ``uint64``
    (the caller keeps ``p + 8 <= len(data)``): the words a digest reads
    (``kernels/digest.py``). Compiled, one unaligned 8-byte load (:func:`_load8_raw`): the
    data may sit at any address (a part fetched into a ``bytes`` object). Run as Python, the
    plain expression.

    >>> int(load8_le(np.frombuffer(b"abcdefgh", np.uint8), 0)) == int.from_bytes(b"abcdefgh", "little")
    True
    """
    return np.uint64(int.from_bytes(data[p:p + 8].tobytes(), "little"))


@overload(load8_le, inline="always")
def _load8_le_compiled(data, p):
    def impl(data, p):
        return _load8_raw(data, np.int64(p))

    return impl


def copy_from_address(dst, at, address, size):
    """Copy ``size`` bytes from the raw ``address`` (memory the caller keeps alive) into
    the ``uint8`` array ``dst`` at ``at``: a gather of string values straight from the
    pieces' buffers (``kernels/read_merge.py``). As Python, ``ctypes.memmove``.

    Compiled, a value of up to :data:`SHORT_COPY` bytes is copied 8 bytes at a time, then
    byte by byte (fixed-size copies the compiler turns into single loads and stores), a
    longer one by libc's ``memcpy``: the call to ``memcpy`` with a variable size cost more
    than the copy for short keys (770,000 16-byte values gathered from 14 runs: 12.3 ms
    against 8.9, with each value's address and length side by side). A byte loop with
    Numba's index handling runs at a quarter of ``memcpy``'s speed.
    """
    ctypes.memmove(dst.ctypes.data + int(at), int(address), int(size))


#: Longest value :func:`copy_from_address` copies in 8-byte words rather than by ``memcpy``.
SHORT_COPY = 64


def _raw_copy(n: int):
    # An intrinsic copying n (a constant) bytes from a raw address to &dst[at].
    @intrinsic
    def copy(typingctx, dst, at, address):
        sig = types.void(dst, types.int64, types.int64)

        def codegen(context, builder, signature, args):
            out, where, origin = args
            view = context.make_array(signature.args[0])(context, builder, out)
            to = builder.gep(view.data, [where])
            cgutils.raw_memcpy(builder, to, builder.inttoptr(origin, to.type),
                               ir.Constant(ir.IntType(64), n), 1)

        return sig, codegen

    return copy


_copy8 = _raw_copy(8)
_copy1 = _raw_copy(1)


@intrinsic
def _memcpy_from_address(typingctx, dst, at, address, size):
    # memcpy(&dst[at], (void *) address, size).
    sig = types.void(dst, types.int64, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        out, where, origin, count = args
        view = context.make_array(signature.args[0])(context, builder, out)
        to = builder.gep(view.data, [where])
        cgutils.raw_memcpy(builder, to, builder.inttoptr(origin, to.type), count, 1)

    return sig, codegen


@overload(copy_from_address, inline="always")
def _copy_from_address_compiled(dst, at, address, size):
    def impl(dst, at, address, size):
        at = np.int64(at)
        address = np.int64(address)
        size = np.int64(size)
        if size > SHORT_COPY:
            _memcpy_from_address(dst, at, address, size)
            return
        q = np.int64(0)
        while q + 8 <= size:
            _copy8(dst, at + q, address + q)
            q += 8
        while q < size:
            _copy1(dst, at + q, address + q)
            q += 1

    return impl


def prefetch(address):
    """Ask the processor to bring the cache line at the raw ``address`` in ahead of a read
    (a hint: never faults, does nothing as Python). A gather from many runs reads each
    row's span and bytes from as many streams interleaved -- more than the hardware
    prefetcher follows (16-byte values from 14 runs: 6.1 ms, with the span of row
    ``i + 64`` and the bytes of row ``i + 32`` asked for ahead 4.3 ms)."""


@intrinsic
def _prefetch(typingctx, address):
    sig = types.void(types.int64)

    def codegen(context, builder, signature, args):
        (at,) = args
        byte_ptr = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = builder.module.declare_intrinsic(
            "llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32]))
        # a read (0), kept in every cache level (3), of data (1)
        builder.call(fn, [builder.inttoptr(at, byte_ptr), ir.Constant(i32, 0),
                          ir.Constant(i32, 3), ir.Constant(i32, 1)])

    return sig, codegen


@overload(prefetch, inline="always")
def _prefetch_compiled(address):
    def impl(address):
        _prefetch(np.int64(address))

    return impl
