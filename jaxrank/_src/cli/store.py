"""The command line's store of compiled fit programs (serialised executables on disk)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank._src import native
from jaxrank._src.cache import untrusted_directory


class ProgramStore:
    """Compiled single-fit programs kept on disk, keyed by their static facts.

    JAX's persistent compilation cache keys a program by its lowered module,
    so even a cache hit traces the solver in Python and lowers it to MLIR
    first: for a small fit in a fresh process (the CLI) that is most of the
    fit's wall time. This store keys the compiled executable of
    :data:`fit_one` by what determines it instead -- the model (a frozen
    dataclass, by ``repr``), the solver's static settings (``max_iter``, the
    plane cache, ...: ``Solver.static()``), the pytree structure, shapes and
    dtypes of the data and problem, the JAX/jaxlib versions, the backend and
    its devices, the CPU's feature flags, ``XLA_FLAGS`` and a digest of
    jaxrank's own source files -- and loads it without tracing, lowering or
    XLA compilation. Fits with a progress callback never use it (a program
    with a host callback cannot be serialised), nor do programs over several
    devices (they run, compiled in the process, without being stored).

    **File format (nothing is unpickled).** One file per program,
    ``<key>.jaxexe``: a magic line, the length of a JSON header, the JSON
    header (the input and output shapes and dtypes, the kept inputs, the
    device and the custom-call targets, checked field by field when read) and
    the executable's raw bytes
    as XLA serialises them (``Client.serialize_executable``). The call's
    pytrees are never stored: the input structure is that of the call's own
    arguments and the output structure is the one the caller gives
    (``out_tree``). A file that is not in this format (an older store's, a
    damaged or a planted one) is ignored and replaced by a new compilation.

    **Trust.** Loading a stored executable runs its code, as with JAX's own
    cache. The store therefore refuses (``PermissionError``) a directory
    that is not owned by the current user or that other users can write to
    (a group or other write bit), and reads only regular files owned by the
    current user that others cannot write to (checked on the open file).
    New files are created with ``O_EXCL`` and moved into place atomically.
    The checks use POSIX owners and modes; where there are none (Windows)
    they are skipped.

    Args:
        directory: path of a directory (created with mode ``0o700`` if
            missing).

    Raises:
        PermissionError: ``directory`` is not owned by the current user or is
            writable by other users.
        OSError: ``directory`` cannot be created.
    """

    _MAGIC = b"jaxrank-program 1\n"

    def __init__(self, directory):
        import os

        self.directory = os.fspath(directory)
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        problem = untrusted_directory(self.directory)
        if problem:
            raise PermissionError(problem)
        self._loaded = {}
        self.hits = 0
        self.misses = 0

    @staticmethod
    def _environment():
        import hashlib
        import os
        import platform

        import jaxlib

        h = hashlib.sha256()
        pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        for root, dirs, files in sorted(os.walk(pkg)):
            dirs.sort()
            for f in sorted(files):
                if f.endswith((".py", ".c")):
                    path = os.path.join(root, f)
                    h.update(os.path.relpath(path, pkg).encode())
                    with open(path, "rb") as fh:
                        h.update(fh.read())
        flags = ""
        try:
            with open("/proc/cpuinfo") as fh:
                flags = next((line for line in fh if line.startswith("flags")), "")
        except OSError:
            flags = platform.processor()
        devs = jax.devices()
        h.update(repr((jax.__version__, getattr(jaxlib, "__version__", ""),
                       jax.default_backend(), devs[0].device_kind, len(devs),
                       bool(jax.config.jax_enable_x64), os.environ.get("XLA_FLAGS", ""),
                       platform.machine(), flags)).encode())
        return h.hexdigest()

    def key(self, static, args, kwargs):
        """Hex key of a program: ``static`` facts plus the avals of the arguments."""
        import hashlib

        leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
        avals = [(tuple(np.shape(x)), str(jnp.result_type(x)),
                  bool(getattr(x, "weak_type", False))) for x in leaves]
        env = getattr(ProgramStore, "_env", None)
        if env is None:
            env = ProgramStore._env = self._environment()
        devices = sorted({str(d) for x in leaves if isinstance(x, jax.Array)
                          for d in x.devices()})
        return hashlib.sha256(
            repr((env, static, str(tree), avals, devices)).encode()).hexdigest()

    def run(self, lower, static, args, kwargs, *, out_tree):
        """``compiled(*args, **kwargs)`` of the program ``lower()`` lowers.

        ``lower``: no-argument function returning the ``jax.stages.Lowered``
        program; ``static``: ``repr``-able facts that, with the arguments'
        avals, determine the program; ``out_tree``: the pytree structure of
        its result (a program whose result has another structure is not
        stored). A stored executable that cannot be loaded or run is
        replaced by a new compilation.
        """
        import os

        k = self.key(static, args, kwargs)
        path = os.path.join(self.directory, k + ".jaxexe")
        compiled = self._loaded.get(k)
        from_disk = compiled is None
        if from_disk:
            compiled = self._read(path, args, kwargs, out_tree)
        if compiled is not None:
            try:
                # (errors of a bad executable surface when its results are read)
                out = jax.block_until_ready(compiled(*args, **kwargs))
                self._loaded[k] = compiled
                return out
            except Exception:  # a damaged or foreign executable: compile instead
                self._loaded.pop(k, None)
                self.hits -= int(from_disk)
                try:
                    os.remove(path)
                except OSError:
                    pass
        self.misses += 1
        # Compiled with JAX's persistent cache off: an executable that JAX
        # loaded from its cache (or compiled again in a process that had
        # loaded it) may not serialise completely on CPU (the copy then fails
        # to run, "Function ... not found"; docs/design_notes.md).
        compiled = _compile_without_jax_cache(lower)
        if compiled is None:
            compiled = lower().compile()
        else:
            self._write(path, compiled, out_tree)
        self._loaded[k] = compiled
        return compiled(*args, **kwargs)

    # -- the file format ----------------------------------------------------

    @staticmethod
    def _avals_json(avals):
        return [[list(a.shape), str(a.dtype), bool(a.weak_type)] for a in avals]

    @staticmethod
    def _avals_from_json(rows):
        from jax._src import core

        out = []
        for row in rows:
            shape, dtype, weak = row
            if not (isinstance(shape, list) and all(type(s) is int and s >= 0 for s in shape)
                    and isinstance(dtype, str) and isinstance(weak, bool)):
                raise ValueError("bad aval")
            out.append(core.ShapedArray(tuple(shape), np.dtype(dtype), weak_type=weak))
        return out

    def _header(self, compiled, out_tree):
        """The JSON header of a storable ``compiled`` (``None``: not storable)."""
        from jax._src.interpreters import pxla

        if compiled.out_tree != out_tree or compiled._params.const_args:
            return None
        u = getattr(compiled._executable, "_unloaded_executable", None)
        if not isinstance(u, pxla.UnloadedMeshExecutable):
            return None
        if (u.unordered_effects or u.ordered_effects or u.keepalive or u.host_callbacks
                or u.mut is not None or u.pgle_profiler is not None
                or len(u.device_list) != 1):
            return None
        device = u.device_list[0]
        shardings = list(u.input_shardings) + list(u.output_shardings)
        kinds = {getattr(s, "memory_kind", None) for s in shardings}
        if (not all(isinstance(s, jax.sharding.SingleDeviceSharding)
                    and s.device_set == {device} for s in shardings) or len(kinds) > 1
                or any(lay is not None for lay in u.dispatch_in_layouts)):
            return None
        infos = jax.tree_util.tree_leaves(compiled.args_info)
        if any(i.donated for i in infos) or u.all_args_info is None:
            return None
        calls = self._custom_calls(compiled)
        if calls is None:
            return None
        return {
            "custom_calls": calls,
            "name": str(u.name), "device": int(device.id),
            "memory_kind": kinds.pop() if kinds else None, "committed": bool(u.committed),
            "kept": sorted(int(i) for i in u.kept_var_idx),
            "all_in": self._avals_json(u.all_args_info.in_avals),
            "in": self._avals_json(u.input_avals), "out": self._avals_json(u.output_avals),
        }

    # Custom-call targets a stored program may hold: jaxrank's native kernels
    # (registered by native.load) and jaxlib's LAPACK kernels (set up by
    # _prepare_runtime). Tracing a program sets up what its custom calls need;
    # a stored program is not traced, so a program with any other target is
    # not stored (it might need a set-up this store does not know of).
    _CUSTOM_CALL_PREFIXES = ("jaxrank_", "lapack_")

    @classmethod
    def _custom_calls(cls, compiled):
        """Sorted custom-call targets of ``compiled`` (``None``: one is not allowed)."""
        import re

        text = compiled.as_text() or ""
        calls = sorted(set(re.findall(r'custom_call_target="([^"]+)"', text)))
        if not all(c.startswith(cls._CUSTOM_CALL_PREFIXES) for c in calls):
            return None
        return calls

    @staticmethod
    def _prepare_runtime(calls):
        """Set up what the custom calls ``calls`` of a stored program need to run."""
        if any(c.startswith("jaxrank_") for c in calls):
            native.load()
        if any(c.startswith("lapack_") for c in calls):
            # jaxlib fills its LAPACK function table when a LAPACK call is
            # lowered; without it the kernels call through null pointers.
            from jax._src.lib import lapack

            lapack.prepare_lapack_call("getrf", np.float32)

    def _write(self, path, compiled, out_tree):
        import json
        import os
        import tempfile

        try:
            header = self._header(compiled, out_tree)
            if header is None:
                return
            u = compiled._executable._unloaded_executable
            blob = u.backend.serialize_executable(u.xla_executable)
            head = json.dumps(header, sort_keys=True).encode()
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")  # O_EXCL, 0o600
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(self._MAGIC + len(head).to_bytes(8, "little") + head + bytes(blob))
                os.replace(tmp, path)
            except BaseException:
                try:
                    os.remove(tmp)
                except OSError:
                    pass
                raise
        except Exception:  # not serialisable or not writable: keep it in memory only
            pass

    @staticmethod
    def _read_trusted(path):
        """Bytes of ``path`` if it is a regular file only the current user can write."""
        import os
        import stat

        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        try:
            fd = os.open(path, flags)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                return None
            if hasattr(os, "getuid") and (st.st_uid != os.getuid()
                                          or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
                return None
            return fh.read()

    def _read(self, path, args, kwargs, out_tree):
        import json

        from jax._src import core, stages
        from jax._src.interpreters import pxla
        from jax._src.lib import xla_client

        data = self._read_trusted(path)
        if data is None or not data.startswith(self._MAGIC):
            return None
        try:
            start = len(self._MAGIC) + 8
            n = int.from_bytes(data[len(self._MAGIC):start], "little")
            h = json.loads(data[start:start + n].decode())
            blob = data[start + n:]
            if not isinstance(h, dict) or not blob:
                return None
            all_in = self._avals_from_json(h["all_in"])
            in_avals = self._avals_from_json(h["in"])
            out_avals = self._avals_from_json(h["out"])
            kept, calls = h["kept"], h["custom_calls"]
            if not (isinstance(calls, list) and all(isinstance(c, str) for c in calls)
                    and all(c.startswith(self._CUSTOM_CALL_PREFIXES) for c in calls)):
                return None
            if not (isinstance(kept, list) and all(type(i) is int for i in kept)
                    and [all_in[i] for i in kept] == in_avals and len(set(kept)) == len(kept)
                    and isinstance(h["committed"], bool) and isinstance(h["name"], str)
                    and type(h["device"]) is int
                    and (h["memory_kind"] is None or isinstance(h["memory_kind"], str))):
                return None
            leaves, in_tree = jax.tree_util.tree_flatten((args, kwargs))
            if [core.shaped_abstractify(x) for x in leaves] != all_in:
                return None
            if out_tree.num_leaves != len(out_avals):
                return None
            device = {d.id: d for d in jax.devices()}[h["device"]]
            # Register / set up the targets of its custom calls before XLA
            # loads it (nothing is traced on a hit).
            self._prepare_runtime(calls)
            backend = device.client
            devices = xla_client.DeviceList((device,))
            xla_exe = backend.deserialize_executable(blob, executable_devices=devices)
            sharding = jax.sharding.SingleDeviceSharding(device, memory_kind=h["memory_kind"])
            in_shardings = [sharding] * len(in_avals)
            out_shardings = [sharding] * len(out_avals)
            xla_in, xla_out = pxla._get_layouts_from_executable(
                xla_exe, [None] * len(in_avals), [None] * len(out_avals), 0, in_avals,
                out_avals)
            names = tuple(f"arg{i}" for i in range(len(all_in)))
            unloaded = pxla.UnloadedMeshExecutable(
                xla_executable=xla_exe, device_list=devices, backend=backend,
                input_avals=in_avals, input_shardings=in_shardings,
                output_avals=out_avals, output_shardings=out_shardings,
                committed=h["committed"], name=h["name"], unordered_effects=[],
                ordered_effects=[], keepalive=[], host_callbacks=[], kept_var_idx=set(kept),
                mut=None, xla_in_layouts=xla_in,
                dispatch_in_layouts=pxla.get_dispatch_layouts(xla_in, in_shardings, in_avals),
                xla_out_layouts=xla_out,
                all_args_info=pxla.AllArgsInfo(
                    all_in, core.DebugInfo("jit", h["name"], names, None)),
                pgle_profiler=None)
            args_info = in_tree.unflatten([stages.ArgInfo(a, False) for a in all_in])
            compiled = stages.Compiled(unloaded.load(), [], args_info, out_tree,
                                       no_kwargs=False)
        except Exception:  # stale, foreign or damaged file
            return None
        self.hits += 1
        return compiled


def _compile_without_jax_cache(lower):
    """``lower().compile()`` with JAX's persistent cache off for that one compilation."""
    from jax.experimental.compilation_cache import compilation_cache as cc

    was = bool(jax.config.jax_enable_compilation_cache)
    jax.config.update("jax_enable_compilation_cache", False)
    cc.reset_cache()
    try:
        return lower().compile()
    except Exception:
        return None
    finally:
        jax.config.update("jax_enable_compilation_cache", was)
        cc.reset_cache()
