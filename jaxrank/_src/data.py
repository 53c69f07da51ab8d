"""Strict reader for data files: SVMlight/LIBSVM, ``.npz``, ``.npy`` and ``.csv``.

:func:`load_data` never returns a silently wrong matrix: a file that breaks
its format's rules is refused with an error naming the file (and the 1-based
line for text formats), instead of being read in some guessed way.

SVMlight/LIBSVM text is parsed by scikit-learn's ``load_svmlight_file`` (its
Cython loop, with ``zero_based=False``); this module also reads the file's
bytes, runs vectorised and regex checks that catch what scikit-learn accepts
silently (NaN/inf, ``1_0``, qid on some lines only, indices beyond
``n_features``), reads the qid column with one regex pass, and looks at lines
one by one in Python only once something is wrong, to say where.
"""

from __future__ import annotations

import bz2
import gzip
import io
import itertools
import math
import numbers
import os
import re
import warnings
import zipfile
import zlib

import numpy as np

_MAX_INDEX = 2**31 - 1  # scikit-learn parses feature indices into a C int
_INDEX = re.compile(rb"\+?[0-9]+\Z")
_QID = re.compile(rb"[+-]?[0-9]+\Z")
# An underscore outside a comment: Python's float()/int(), which scikit-learn
# uses, read "1_0" as 10.
_UNDERSCORE = re.compile(rb"\n[^#\n_]*_")  # searched in b"\n" + raw
# The second token of a line if it starts with "qid" (scikit-learn's test for a
# query id), searched in b"\n" + raw; group 1 is the rest of the token.
_QID_TOKEN = re.compile(rb"\n[ \t\r\f\v]*[^\s#]+[ \t\r\f\v]+qid([^\s#]*)")
# The start of each sample (non-blank, non-comment) line, in b"\n" + raw.
_SAMPLE_LINE = re.compile(rb"\n[ \t\r\f\v]*[^\s#]")
_REAL_KINDS = "biuf"  # bool, signed and unsigned integer, floating point
_COMPRESSORS = {"gz": "gzip", "bz2": "bzip2"}


def load_data(path, *, n_features=None, return_groups=False):
    """Read a labelled data file into ``(X, y)`` or ``(X, y, groups)``.

    The format is chosen by the file name (case-insensitive), after removing a
    ``.gz`` or ``.bz2`` suffix, which is decompressed:

    * ``.npz``: a NumPy archive with arrays ``X`` ``[n, d]`` and ``y`` ``[n]``.
    * ``.npy``: one ``[n, d + 1]`` array; the last column is the label.
    * ``.csv``: ``n`` lines of ``d + 1`` comma-separated numbers, no header;
      the last column is the label; ``#`` starts a comment; blank lines are
      skipped.
    * anything else (``.svm``, ``.svmlight``, ``.libsvm``, ``.txt``, ``.dat``,
      or no extension): SVMlight/LIBSVM text, one sample per line::

          <label> [qid:<query>] <index>:<value> <index>:<value> ... [# comment]

      - Feature indices are **1-based** (as in SVMlight, LIBSVM and
        ``dump_svmlight_file(..., zero_based=False)``), positive integers,
        strictly increasing along a line; index 0 is an error, never a cue
        to shift the file. Feature ``i`` is column ``i - 1`` of ``X``.
      - The label is the first token, a finite number (``+1``, ``-1``,
        ``0``, ``2``, ``0.5``...), returned as float64 as written; what it
        means (binary, graded relevance) is up to the estimator.
      - ``qid:<integer>`` right after the label gives the line's query;
        lines with the same qid form one query (ranking group), contiguous
        or not. Either every line has a qid or none has.
      - Values are finite decimal numbers; ``nan``, ``inf`` and numbers that
        overflow float64 are errors; so is ``_`` inside a number.
      - Everything from ``#`` to the end of the line is a comment; blank and
        comment-only lines are skipped (they still count for line numbers).
        SVMlight's ``cost:`` and ``sid:`` and multi-label (``1,3``) labels
        are not supported.

    Dense data (``.npz``/``.npy``/``.csv``) must be real numbers: bool,
    integer or floating point arrays are returned with their dtype
    (``.csv``: float64); complex, text, structured and object arrays are
    refused (never cast), and object arrays are never unpickled
    (``allow_pickle=False``). NaN and infinite values are refused in every
    format.

    Args:
        path: file name (``str`` or ``os.PathLike``).
        n_features: the number of features the caller expects (e.g. the
            ``n_features_in_`` of the model a test file is scored with),
            an int >= 1. SVMlight files are widened to ``n_features``
            columns, and a feature index above ``n_features`` is an error;
            dense files must have exactly ``n_features`` feature columns.
            ``None`` (default): SVMlight files get as many columns as their
            largest index.
        return_groups: return the query ids as a third value. Without it, a
            file with ``qid:`` columns is an error (it holds several queries,
            which must not be pooled into one ranking by accident).

    Returns:
        ``(X, y)``, or ``(X, y, groups)`` if ``return_groups``:

        * ``X``: ``[n, d]`` ``scipy.sparse`` CSR float64 matrix (SVMlight) or
          NumPy array (dense formats).
        * ``y``: ``[n]`` labels (float64 for text formats).
        * ``groups``: ``[n]`` int64 query ids (the ``qid:`` values), or
          ``None`` if the file has none (always ``None`` for dense formats).

    Raises:
        TypeError: ``path`` is not a file name; ``n_features`` is not an int;
            ``return_groups`` is not a bool; a dense file holds complex, text,
            structured or object data (the message names the file, the array
            and its dtype; for ``.csv`` the line and column).
        FileNotFoundError: ``path`` does not exist.
        ValueError: ``path`` is a directory or cannot be read; a ``.gz`` or
            ``.bz2`` file is corrupt or truncated; ``n_features < 1``; the
            file breaks the format rules above (message: ``<file>, line <k>:
            <problem>``, ``k`` 1-based); the file has ``qid:`` columns and
            ``return_groups`` is False; the file holds no samples; a
            feature index exceeds ``n_features``, or a dense file's column
            count differs from it; an ``.npz`` lacks ``X`` or ``y`` or their
            shapes disagree.

    References:
        T. Joachims, SVMlight file format,
        https://www.cs.cornell.edu/people/tj/svm_light/ ("Input file format");
        C.-C. Chang and C.-J. Lin, LIBSVM FAQ (data format, 1-based indices).

    Examples:
        >>> import os, tempfile
        >>> from jaxrank import load_data
        >>> d = tempfile.TemporaryDirectory()
        >>> p = os.path.join(d.name, "train.svm")
        >>> with open(p, "w") as f:
        ...     _ = f.write("2 qid:1 1:0.5 3:1\\n0 qid:1 2:1\\n1 qid:7 1:1 # doc 3\\n")
        >>> X, y, groups = load_data(p, return_groups=True)
        >>> X.toarray()
        array([[0.5, 0. , 1. ],
               [0. , 1. , 0. ],
               [1. , 0. , 0. ]])
        >>> y, groups
        (array([2., 0., 1.]), array([1, 1, 7]))
        >>> load_data(p)
        Traceback (most recent call last):
        ...
        ValueError: ... holds ranking queries ...
        >>> d.cleanup()
    """
    path = _check_path(path)
    n_features = _check_n_features(n_features)
    if not isinstance(return_groups, (bool, np.bool_)):
        raise TypeError(
            f"return_groups must be True or False; got {type(return_groups).__name__}."
        )
    low = path.lower()
    compression = (
        "gz" if low.endswith(".gz") else "bz2" if low.endswith(".bz2") else None
    )
    base = low[: -len(compression) - 1] if compression else low
    if base.endswith(".npz"):
        X, y = _load_npz(path, compression)
    elif base.endswith(".npy"):
        X, y = _load_npy(path, compression)
    elif base.endswith(".csv"):
        X, y = _load_csv(path, _read_bytes(path, compression))
    else:
        X, y, groups = _load_svmlight(path, compression, n_features)
        if groups is not None and not return_groups:
            raise ValueError(
                f"{path} holds ranking queries (a qid: on every line, "
                f"{len(np.unique(groups))} queries); reading it as one pooled ranking "
                "would be wrong. Pass return_groups=True to get (X, y, groups) with "
                "the query ids as groups; the jaxrank CLI uses them as query groups."
            )
        return (X, y, groups) if return_groups else (X, y)
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(
            f"{path} has {X.shape[1]} feature columns; expected "
            f"n_features={n_features}."
        )
    return (X, y, None) if return_groups else (X, y)


# --------------------------------------------------------------------- paths


def _check_path(path):
    try:
        path = os.fspath(path)
    except TypeError:
        raise TypeError(
            f"path must be a file name (str or os.PathLike); got {type(path).__name__}."
        ) from None
    path = os.fsdecode(path)
    if os.path.isdir(path):
        raise ValueError(f"{path} is a directory, expected a data file.")
    if not os.path.exists(path):
        raise FileNotFoundError(f"data file {path} does not exist.")
    return path


def _check_n_features(n_features):
    if n_features is None:
        return None
    if isinstance(n_features, (bool, np.bool_)) or not isinstance(
        n_features, numbers.Integral
    ):
        raise TypeError(
            f"n_features must be an int or None; got {type(n_features).__name__}."
        )
    if n_features < 1:
        raise ValueError(f"n_features must be >= 1; got {n_features}.")
    return int(n_features)


def _open(path):
    try:
        return open(path, "rb")
    except OSError as e:
        raise ValueError(f"cannot read data file {path}: {e.strerror or e}.") from None


def _read_bytes(path, compression):
    """The file's content, decompressed; ValueError naming the file if it fails."""
    with _open(path) as fh:
        try:
            if compression == "gz":
                with gzip.GzipFile(fileobj=fh, mode="rb") as f:
                    return f.read()
            if compression == "bz2":
                with bz2.BZ2File(fh, "rb") as f:
                    return f.read()
            raw = fh.read()
        except (OSError, EOFError, zlib.error) as e:
            if compression is None:
                raise ValueError(f"cannot read data file {path}: {e}.") from None
            raise ValueError(
                f"cannot read data file {path}: it is not a valid, complete "
                f"{_COMPRESSORS[compression]} file ({type(e).__name__}: {e})."
            ) from None
    if raw[:2] == b"\x1f\x8b" or (raw[:3] == b"BZh" and raw[4:10] == b"1AY&SY"):
        kind = "gzip" if raw[:2] == b"\x1f\x8b" else "bzip2"
        raise ValueError(
            f"{path} is {kind}-compressed but its name does not end in "
            f"{'.gz' if kind == 'gzip' else '.bz2'}; rename it so it is decompressed."
        )
    return raw


def _show(token, limit=40):
    text = token.decode("utf-8", "replace") if isinstance(token, bytes) else str(token)
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


# ------------------------------------------------------------------ SVMlight


def _parse(source):
    """scikit-learn's 1-based parse of a file object: ``(X, y)``."""
    from sklearn.datasets import load_svmlight_file

    # query_id=False: scikit-learn grows its qid array with np.append per line
    # (quadratic in the lines); _check_parsed reads qids with one regex pass.
    return load_svmlight_file(source, dtype=np.float64, zero_based=False)


def _load_svmlight(path, compression, n_features):
    """``(X, y, groups or None)`` from an SVMlight file; see :func:`load_data`."""
    raw = _read_bytes(path, compression)  # for the checks (and error lines)
    try:
        # A plain file is parsed from disk as scikit-learn does itself (iterating
        # a BytesIO is slower); a compressed one from the bytes read at once
        # (faster than BZ2File.readline).
        with _open(path) if compression is None else io.BytesIO(raw) as source:
            X, y = _parse(source)
    except (ValueError, OverflowError) as e:
        _raise_svmlight_error(path, raw, n_features, None, f"scikit-learn: {e}")
    n = X.shape[0]
    if n == 0:
        raise ValueError(f"{path} holds no samples (it is empty or only comments).")
    bad, groups = _check_parsed(raw, X, y, n_features)
    if bad is not None:
        _raise_svmlight_error(path, raw, n_features, bad, "a line breaks the rules")
    if n_features is not None and X.shape[1] < n_features:
        X.resize((n, n_features))
    return X, y, groups


def _nth_sample_start(raw, row):
    """Byte offset in ``raw`` of the line of sample ``row`` (0-based)."""
    match = next(itertools.islice(_SAMPLE_LINE.finditer(b"\n" + raw), row, None))
    return match.start()


def _check_parsed(raw, X, y, n_features, expect_qid=None):
    """Vectorised checks of scikit-learn's parse ``(X, y)`` of ``raw``.

    Returns ``(bad, groups)``: ``bad`` is None if all is well, else the byte
    offset in ``raw`` of the start of a line that breaks a rule (-1 if it
    cannot tell which); ``groups`` the int64 qids or None. ``expect_qid``:
    None (every sample has a qid or none has), True or False.
    """
    if b"_" in raw:
        match = _UNDERSCORE.search(b"\n" + raw)
        if match:
            return match.start(), None
    rows = []  # a bad sample of each kind
    for bad, rows_of in ((~np.isfinite(y), None), (~np.isfinite(X.data), X.indptr)):
        if bad.any():
            i = int(np.argmax(bad))
            rows.append(
                i if rows_of is None else np.searchsorted(rows_of, i, "right") - 1
            )
    if n_features is not None and X.shape[1] > n_features:
        i = int(np.argmax(X.indices >= n_features))
        rows.append(np.searchsorted(X.indptr, i, "right") - 1)
    if rows:
        return _nth_sample_start(raw, int(min(rows))), None
    if b"qid" not in raw:
        found = []
    else:
        # the token after the label of each line if it starts with "qid", as
        # scikit-learn tells a qid (it must be "qid:<integer>")
        found = [(m.start(), m.group(1)) for m in _QID_TOKEN.finditer(b"\n" + raw)]
        for start, rest in found:
            if rest[:1] != b":":
                return start, None
    n = X.shape[0]
    if len(found) not in ((0, n) if expect_qid is None else ((0, n)[expect_qid],)):
        with_qid, status = {start for start, _ in found}, expect_qid
        for match in _SAMPLE_LINE.finditer(b"\n" + raw):
            has_qid = match.start() in with_qid
            if status is None:
                status = has_qid
            elif has_qid != status:
                return match.start(), None
        return -1, None
    if not found:
        return None, None
    try:
        return None, np.array([rest[1:] for _, rest in found]).astype(np.int64)
    except (ValueError, OverflowError):
        for start, rest in found:
            if not (_QID.match(rest[1:]) and -(2**63) <= int(rest[1:]) < 2**63):
                return start, None
        return -1, None


def _first_sample(raw):
    """``(line number, has qid)`` of the first sample line of ``raw``, or None."""
    match = _SAMPLE_LINE.search(b"\n" + raw)
    if match is None:
        return None
    start = match.start()
    end = raw.find(b"\n", start)
    parts = raw[start : None if end < 0 else end].split(b"#", 1)[0].split()
    return raw.count(b"\n", 0, start) + 1, len(parts) > 1 and parts[1].startswith(
        b"qid"
    )


def _raise_svmlight_error(path, raw, n_features, bad, detected):
    """Raise ValueError naming the first line found to break a rule.

    ``bad``: byte offset of a bad line's start, or None/-1 (unknown: the file
    is searched chunk by chunk).
    """
    first = _first_sample(raw)
    found = None
    if bad is not None and bad >= 0:
        end = raw.find(b"\n", bad)
        line = raw[bad : None if end < 0 else end]
        found = _scan_lines(line, n_features, raw.count(b"\n", 0, bad) + 1, first)
    if found is None:
        found = _locate_problem(raw, n_features, first)
    if found is None:  # the scan should always find what the checks saw
        raise ValueError(f"cannot read data file {path}: {detected}.") from None
    line, problem = found
    raise ValueError(f"{path}, line {line}: {problem}.") from None


def _locate_problem(raw, n_features, first, chunk_size=1 << 18):
    """``(line, problem)`` of the first line of ``raw`` breaking a rule, or None.

    The bytes are cut at line ends into chunks of about ``chunk_size`` bytes;
    each chunk is parsed and checked like the whole file (fast), and only the
    first flagged chunk is scanned line by line in Python (slow).
    """
    start, lineno = 0, 1
    while start < len(raw):
        end = raw.find(b"\n", start + chunk_size)
        end = len(raw) if end < 0 else end + 1
        chunk = raw[start:end]
        try:
            X, y = _parse(io.BytesIO(chunk))
            bad = _check_parsed(chunk, X, y, n_features, first and first[1])[0]
        except (ValueError, OverflowError):
            bad = -1
        if bad is not None:
            found = _scan_lines(chunk, n_features, lineno, first)
            if found is not None:
                return found
        start, lineno = end, lineno + chunk.count(b"\n")
    return None


def _not_finite(token):
    """Why the non-finite number ``token`` is refused: spelled NaN/inf, or too large."""
    word = token.strip().lstrip(b"+-").lower()
    if word.startswith((b"nan", b"inf")):
        return ("is not finite (NaN and infinite values are not accepted)")
    return (f"overflows float64 (its magnitude exceeds {np.finfo(np.float64).max:.4g}, "
            "the largest float64)")


def _number(token):
    """``float(token)`` if ``token`` is a plain number (no ``_``), else None."""
    if b"_" in token:
        return None
    try:
        return float(token)
    except ValueError:
        return None


def _scan_lines(text, n_features, first_lineno, qid_line):
    """``(line, problem)`` for the first line of ``text`` breaking a rule, or None.

    Tokenises exactly as scikit-learn does (lines split at ``\\n``, ``#``
    starts a comment, tokens split on whitespace), checking every rule.
    ``first_lineno`` is the number of the first line of ``text``; ``qid_line``
    is ``(line number, has qid)`` of the file's first sample (None: not seen).
    """
    for lineno, line in enumerate(text.split(b"\n"), first_lineno):
        parts = line.split(b"#", 1)[0].split()
        if not parts:
            continue
        label, feats = parts[0], parts[1:]
        value = _number(label)
        if value is None:
            if b":" in label:
                return lineno, (
                    f"the line starts with {_show(label)}, not with a label; every "
                    "line must start with its label (a number such as +1, -1, 0 or 2)"
                )
            multi = " (multi-label lines are not supported)" if b"," in label else ""
            return lineno, f"label {_show(label)} is not a number{multi}"
        if not math.isfinite(value):
            return lineno, f"label {_show(label)} {_not_finite(label)}"
        has_qid = bool(feats) and feats[0].startswith(b"qid")
        if has_qid:
            q = feats[0][4:]
            if not (
                feats[0].startswith(b"qid:")
                and _QID.match(q)
                and -(2**63) <= int(q) < 2**63
            ):
                return lineno, (
                    f"{_show(feats[0])} is not a query id; expected qid:<integer>, "
                    "such as qid:12"
                )
            feats = feats[1:]
        if qid_line is None:
            qid_line = (lineno, has_qid)
        elif has_qid != qid_line[1]:
            return lineno, (
                f"this line {'has' if has_qid else 'has no'} qid: but line "
                f"{qid_line[0]} "
                f"{'has' if qid_line[1] else 'has none'}; either every line has a "
                "qid:<query> after its label or none has"
            )
        prev = 0
        for token in feats:
            index, colon, text = token.partition(b":")
            if not colon:
                return lineno, (
                    f"{_show(token)} has no colon; features are written index:value, "
                    "such as 3:0.5"
                )
            if index == b"qid":
                return lineno, (
                    f"{_show(token)} comes after a feature; qid:<query> must come "
                    "right after the label"
                )
            if index in (b"cost", b"sid"):
                return lineno, (
                    f"SVMlight's {index.decode()}:<value> ({_show(token)}) is not "
                    "supported by this reader"
                )
            if not _INDEX.match(index):
                return lineno, (
                    f"feature index {_show(index)} in {_show(token)} is not a positive "
                    "integer"
                )
            i = int(index)
            if i == 0:
                return lineno, (
                    f"feature index 0 in {_show(token)}; SVMlight/LIBSVM feature "
                    "indices start at 1 (scikit-learn's dump_svmlight_file writes "
                    "0-based indices unless given zero_based=False)"
                )
            if i > _MAX_INDEX:
                return lineno, f"feature index {i} is too large (at most {_MAX_INDEX})"
            if i == prev:
                return lineno, f"feature index {i} appears twice"
            if i < prev:
                return lineno, (
                    "feature indices must increase along a line; "
                    f"{i} comes after {prev}"
                )
            if n_features is not None and i > n_features:
                return lineno, (
                    f"feature index {i} exceeds n_features={n_features} (indices run "
                    f"from 1 to {n_features})"
                )
            value = _number(text)
            if value is None:
                return lineno, f"value {_show(text)} of feature {i} is not a number"
            if not math.isfinite(value):
                return lineno, f"value {_show(text)} of feature {i} {_not_finite(text)}"
            prev = i
    return None


# --------------------------------------------------------------------- dense


def _check_real_dtype(dtype, path, name):
    if dtype.kind not in _REAL_KINDS:
        raise TypeError(
            f"{path}: {name} has dtype {dtype}; expected real numbers (bool, integer "
            "or floating point). Complex, text, structured and object data are "
            "refused, not cast."
        )


def _check_finite(a, path, name):
    if a.dtype.kind != "f" or a.size == 0:
        return
    # In chunks of rows: np.isfinite of the whole array would be a temporary
    # of a quarter of a float32 array's size.
    step = max(1, (1 << 22) // max(1, a[0].size if a.ndim > 1 else 1))
    for i in range(0, a.shape[0], step):
        bad = ~np.isfinite(a[i:i + step])
        if bad.any():
            pos = tuple(int(j) for j in np.argwhere(bad)[0])
            pos = (pos[0] + i,) + pos[1:]
            at = f"{name}[{', '.join(map(str, pos))}]"
            raise ValueError(
                f"{path}: {at} is {a[pos]}; NaN and infinite values are not accepted."
            )


def _read_npy(f, path, name):
    """An array from an open ``.npy`` stream, dtype checked before loading."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version == (1, 0):
            dtype = fmt.read_array_header_1_0(f)[2]
        elif version == (2, 0):
            dtype = fmt.read_array_header_2_0(f)[2]
        else:
            dtype = None
        f.seek(0)
    except (ValueError, OSError, EOFError) as e:
        raise ValueError(
            f"cannot read data file {path}: {name} is not a valid .npy array ({e})."
        ) from None
    if dtype is not None:
        _check_real_dtype(dtype, path, name)
    try:
        return fmt.read_array(f, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise ValueError(
            f"cannot read data file {path}: {name} is not a valid .npy array ({e})."
        ) from None


def _stream(path, compression):
    if compression is None:
        return _open(path)
    return io.BytesIO(_read_bytes(path, compression))


def _load_npy(path, compression):
    with _stream(path, compression) as f:
        a = _read_npy(f, path, "the array")
    _check_real_dtype(a.dtype, path, "the array")  # also for header versions >= 3
    if a.ndim != 2 or a.shape[1] < 2:
        raise ValueError(
            f"{path}: an .npy data file must be a 2-D array [n, d + 1] with the label "
            f"in the last column; got shape {a.shape}."
        )
    _check_finite(a, path, "the array")
    return a[:, :-1], a[:, -1]


def _load_npz(path, compression):
    with _stream(path, compression) as f:
        try:
            z = zipfile.ZipFile(f)
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            raise ValueError(
                f"cannot read data file {path}: not a valid .npz archive ({e})."
            ) from None
        with z:
            names = z.namelist()
            if "X.npy" not in names or "y.npy" not in names:
                keys = sorted(n[:-4] for n in names if n.endswith(".npy"))
                raise ValueError(
                    f"cannot read data file {path}: an .npz data file needs arrays 'X' "
                    f"and 'y'; it has {keys}."
                )
            out = []
            for name in ("X", "y"):
                try:
                    # Read from the archive member as a stream (a BytesIO of
                    # the member's bytes would hold a second copy of X).
                    with z.open(name + ".npy") as member:
                        a = _read_npy(member, path, name)
                except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as e:
                    raise ValueError(
                        f"cannot read data file {path}: array {name!r} is corrupt "
                        f"({e})."
                    ) from None
                _check_real_dtype(a.dtype, path, name)
                out.append(a)
    X, y = out
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise ValueError(
            f"{path}: expected X of shape [n, d] and y of shape [n]; got X {X.shape} "
            f"and y {y.shape}."
        )
    _check_finite(X, path, "X")
    _check_finite(y, path, "y")
    return X, y


def _csv_rows(raw):
    """``(line number, fields)`` of the data lines, as ``numpy.loadtxt`` sees them."""
    for lineno, line in enumerate(raw.splitlines(), 1):
        line = line.split(b"#", 1)[0]
        if line.strip():
            yield lineno, [f.strip() for f in line.split(b",")]


def _csv_problem(path, raw):
    """Raise for the first bad field of a CSV file; return if none is found."""
    width = None
    for lineno, fields in _csv_rows(raw):
        if width is None:
            width = (lineno, len(fields))
        elif len(fields) != width[1]:
            raise ValueError(
                f"{path}, line {lineno}: {len(fields)} comma-separated fields, but "
                f"line {width[0]} has {width[1]}; every line needs the same number."
            )
        for col, field in enumerate(fields, 1):
            where = f"{path}, line {lineno}, column {col}"
            if not field:
                raise ValueError(f"{where}: empty field (missing value).")
            value = _number(field)
            if value is None:
                try:
                    complex(field.decode("ascii"))
                except (ValueError, UnicodeDecodeError):
                    hint = " (CSV data files have no header line)" if col == 1 else ""
                    raise TypeError(
                        f"{where}: {_show(field)} is text, not a number{hint}; "
                        "expected real numbers."
                    ) from None
                raise TypeError(
                    f"{where}: {_show(field)} is complex (dtype complex); expected "
                    "real numbers. Complex data are refused, not cast."
                )
            if not math.isfinite(value):
                raise ValueError(f"{where}: {_show(field)} {_not_finite(field)}.")


def _load_csv(path, raw):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*input contained no data")
        try:
            a = np.loadtxt(io.BytesIO(raw), delimiter=",", ndmin=2, dtype=np.float64)
        except ValueError as e:
            _csv_problem(path, raw)
            raise ValueError(f"cannot read data file {path}: {e}") from None
    if a.shape[0] == 0:
        raise ValueError(f"{path} holds no samples (it is empty or only comments).")
    if not np.isfinite(a).all():
        _csv_problem(path, raw)
        raise ValueError(f"{path}: NaN or infinite values are not accepted.")
    if a.shape[1] < 2:
        raise ValueError(
            f"{path}: a .csv data file needs at least 2 columns (features, then the "
            f"label); got {a.shape[1]}."
        )
    return a[:, :-1], a[:, -1]
