"""JAX's persistent compilation cache in the user's cache directory (estimators and CLI).

An estimator's first fit in a Python process compiles its programs; with
JAX's persistent compilation cache the next process loads them from disk
instead. :func:`use_compilation_cache` configures it; the estimators turn it
on by themselves at their first fit (:func:`auto_enable`) unless the user
opted out or configured JAX's cache already.

Where: ``$JAXRANK_CACHE_DIR``, else ``$XDG_CACHE_HOME/jaxrank``, else
``~/.cache/jaxrank``; JAX's files go to its ``jax/`` folder (the command
line also keeps compiled single fits in ``programs/``). The folders are
created private (mode ``0o700``), and a folder that is not the user's own or
that other users can write is not used (with a warning): cached programs are
executables that are run.

Two processes may share the folder: JAX writes an entry under its key once
and a reader that meets an entry still being written gets a read error, which
JAX reports as a warning and answers by compiling again.
"""

from __future__ import annotations

import os
import warnings

_OFF_VALUES = ("", "0", "false", "no", "off")

# None: not decided yet; True / False: decided for this process (by
# use_compilation_cache or the first auto_enable).
_state = {"decided": None}


def default_directory():
    """The jaxrank cache folder: ``$JAXRANK_CACHE_DIR``, ``$XDG_CACHE_HOME/jaxrank`` or
    ``~/.cache/jaxrank`` (str; not created)."""
    return os.environ.get("JAXRANK_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "jaxrank")


def untrusted_directory(path):
    """Why ``path`` cannot hold programs that will be run (``""`` when it can).

    A directory qualifies when it is owned by the current user and no other
    user can write to it (no group or other write bit). POSIX only: where
    there are no owners and modes (Windows) every directory qualifies.

    Args:
        path: an existing directory.

    Returns:
        str: ``""``, or one sentence naming ``path``, its owner or mode and
        the fix.
    """
    import stat

    if not hasattr(os, "getuid"):
        return ""
    try:
        st = os.stat(path)
    except OSError as e:
        return f"cannot read {path}: {e.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != os.getuid():
        return (f"{path} is owned by another user (uid {st.st_uid}); stored programs "
                "are run, so the directory must be your own")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (f"{path} is writable by other users (mode {stat.filemode(st.st_mode)}); "
                f"stored programs are run, so make it private: chmod go-w {path}")
    return ""


def private_directories(base, *parts):
    """Create ``base`` and ``base/part`` private (mode ``0o700``) and check them.

    Returns:
        ``""`` when every folder qualifies (:func:`untrusted_directory`), else
        the sentence of the first that does not.

    Raises:
        OSError: a folder cannot be created (an unwritable location).
    """
    folders = [base] + [os.path.join(base, p) for p in parts]
    for d in folders:
        os.makedirs(d, mode=0o700, exist_ok=True)
    for d in folders:
        problem = untrusted_directory(d)
        if problem:
            return problem
    return ""


def use_compilation_cache(directory=None, *, enabled=True):
    """Turn JAX's persistent compilation cache on (in jaxrank's folder) or keep it off.

    The estimators call this with the defaults at their first fit in a
    process, unless it was called before, ``$JAXRANK_NO_CACHE`` is set to a
    true value (``1``, ``yes``, ...), or JAX's ``jax_compilation_cache_dir``
    is already configured (then jaxrank leaves JAX's configuration alone).
    Turning it on sets JAX's global ``jax_compilation_cache_dir`` (and, when
    it has JAX's default of 1 s, ``jax_persistent_cache_min_compile_time_secs``
    to 0, so that small programs are kept too): the process's other JAX
    programs are cached there as well.

    Args:
        directory: the jaxrank cache folder (``str`` or path-like); ``None``:
            :func:`default_directory`. JAX's files go to its ``jax/`` folder.
        enabled: ``False`` keeps the cache off for the rest of the process
            (the opt-out from Python; the estimators then never turn it on).

    Returns:
        The folder JAX's cache uses (``str``), or ``None`` when it is off
        (``enabled=False``, JAX configured with another folder, or a folder
        that cannot be used: then a ``UserWarning`` says why).

    Raises:
        TypeError: ``directory`` not a path or ``enabled`` not a bool.
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be True or False; got {enabled!r}.")
    if directory is not None and not isinstance(directory, (str, os.PathLike)):
        raise TypeError(f"directory must be a path (str or os.PathLike); got "
                        f"{type(directory).__name__}.")
    _state["decided"] = enabled
    if not enabled:
        return None
    import jax

    base = os.fspath(directory) if directory is not None else default_directory()
    target = os.path.join(base, "jax")
    current = jax.config.jax_compilation_cache_dir
    if current:
        return current if os.path.abspath(current) == os.path.abspath(target) else None
    try:
        problem = private_directories(base, "jax")
    except OSError as e:
        problem = f"cannot create {e.filename or base}: {e.strerror}"
    if problem:
        warnings.warn(f"jaxrank: not using the compilation cache: {problem}.", UserWarning,
                      stacklevel=2)
        return None
    from jax.experimental.compilation_cache import compilation_cache

    jax.config.update("jax_compilation_cache_dir", target)
    # JAX decides at its first compilation whether the process uses the
    # cache; programs compiled before this call (input checks) made it decide
    # "no", so make it decide again.
    compilation_cache.reset_cache()
    # Every program, however quick to compile (an estimator's first fit also
    # compiles a few dozen small ones around its solver), unless the user set
    # JAX's threshold to something else than its default.
    if jax.config.jax_persistent_cache_min_compile_time_secs == 1.0:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return target


def auto_enable():
    """The estimators' call at a fit: :func:`use_compilation_cache` once per process,
    unless the user decided already or opted out (``$JAXRANK_NO_CACHE``)."""
    if _state["decided"] is not None:
        return
    if os.environ.get("JAXRANK_NO_CACHE", "").strip().lower() not in _OFF_VALUES:
        _state["decided"] = False
        return
    import jax

    if jax.config.jax_compilation_cache_dir:
        _state["decided"] = False  # the user's own JAX configuration
        return
    use_compilation_cache()
