"""Save and load posterior / agent states: a portable ``.npz`` of arrays plus JSON metadata, no pickle.

File layout (one ``.npz`` archive, readable by ``numpy.load(path, allow_pickle=False)`` from any language with a
zip + ``.npy`` reader)::

    "<tree path>"            one array per leaf, keyed by its ``jax.tree_util.keystr`` path (e.g. ".mean",
                             "[0]['params']['head']['kernel']")
    "__banditkit_meta__"     uint8 array holding UTF-8 JSON:
                             {format, banditkit_version, name, hyper, dtype, treedef,
                              leaves: [{key, path, shape, dtype, stored_dtype, kind}], meta}

``name`` / ``hyper`` are the backend's (``Posterior.name`` / ``Posterior.hyper``) when ``posterior=`` is given;
``meta`` is the caller's own JSON-serialisable dictionary (step counters, seeds, ...).  The file is written to a
temporary file in the target directory and moved into place with ``os.replace``, so a crash never leaves a
half-written checkpoint under the final name.

Typical use::

    checkpoint.save("run.npz", state, posterior=post, meta={"step": t})
    state, meta = checkpoint.load("run.npz", template=post.init(params))   # structure checked against template
    state, meta = checkpoint.restore("run.npz", post, params)              # the same, calling post.init for you

Without a template, ``load`` rebuilds the tree from the stored paths as nested ``dict`` / ``list`` (NamedTuple
fields become dict keys): enough to inspect a file, not to resume.  Extended dtypes are handled: JAX typed PRNG
keys are stored as their raw key data and re-wrapped; ``bfloat16`` and other ``ml_dtypes`` are stored bit-exactly
as unsigned integers of the same width.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
import zipfile
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["save", "load", "header", "restore", "describe", "FORMAT"]

FORMAT = "banditkit-checkpoint/1"
_META_KEY = "__banditkit_meta__"
_STANDARD_KINDS = "biufc"  # numpy kinds that .npy stores natively without pickle


# --------------------------------------------------------------------------------------------------------------
# JSON helpers
# --------------------------------------------------------------------------------------------------------------
def _jsonable(value: Any, *, strict: bool, where: str) -> Any:
    """A JSON-serialisable copy of ``value``; numpy/JAX scalars and small arrays become Python numbers/lists.

    With ``strict=False`` anything else becomes its ``repr`` (used for backend hyper-parameters, which may hold a
    likelihood object); with ``strict=True`` it raises ``TypeError`` naming the offending key.
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (np.generic, np.ndarray, jax.Array)):
        arr = np.asarray(value)
        if arr.dtype.kind in _STANDARD_KINDS and arr.dtype.kind != "c":
            return arr.tolist() if arr.ndim else arr.item()
    if isinstance(value, dict):
        return {str(k): _jsonable(v, strict=strict, where=f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # NamedTuple, e.g. a likelihood
        fields = {f: _jsonable(getattr(value, f), strict=strict, where=f"{where}.{f}") for f in value._fields}
        return {"__type__": type(value).__name__, **fields}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, strict=strict, where=f"{where}[{i}]") for i, v in enumerate(value)]
    if strict:
        raise TypeError(
            f"checkpoint metadata {where} is a {type(value).__name__}, which JSON cannot store; pass numbers, "
            f"strings, lists or dicts in meta= (convert arrays with .tolist())"
        )
    return repr(value)


# --------------------------------------------------------------------------------------------------------------
# tree paths
# --------------------------------------------------------------------------------------------------------------
def _path_entry(k: Any) -> list:
    """One path component as JSON: ``["attr", name]``, ``["dict", key]``, ``["seq", i]`` or ``["flat", i]``."""
    if isinstance(k, jax.tree_util.GetAttrKey):
        return ["attr", k.name]
    if isinstance(k, jax.tree_util.DictKey):
        key = k.key
        if not isinstance(key, (str, int)):
            key = repr(key)
        return ["dict", key]
    if isinstance(k, jax.tree_util.SequenceKey):
        return ["seq", k.idx]
    if isinstance(k, jax.tree_util.FlattenedIndexKey):
        return ["flat", k.key]
    return ["other", str(k)]


def _leaf_array(leaf: Any) -> tuple[np.ndarray, str, str]:
    """``(stored array, logical dtype name, kind)`` for one leaf; ``kind`` is ``"array"`` or ``"key:<impl>"``."""
    if isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        impl = str(jax.random.key_impl(leaf))
        return np.asarray(jax.random.key_data(leaf)), str(leaf.dtype), f"key:{impl}"
    if not isinstance(leaf, (np.ndarray, np.generic, jax.Array)):
        leaf = jnp.asarray(leaf)  # Python scalars take JAX's default dtype, as they would inside the filters
    arr = np.asarray(leaf)
    return arr, str(arr.dtype), "array"


def _encode(arr: np.ndarray) -> np.ndarray:
    """Bit-exact storable form: standard numpy dtypes as is, extended ones (bfloat16, float8...) as uint views."""
    if arr.dtype.kind in _STANDARD_KINDS:
        return arr
    if arr.dtype.itemsize in (1, 2, 4, 8):
        return np.ascontiguousarray(arr).view(np.dtype(f"u{arr.dtype.itemsize}"))
    raise TypeError(f"cannot store arrays of dtype {arr.dtype} in a checkpoint")


def _decode(stored: np.ndarray, dtype_name: str, kind: str) -> Any:
    if kind.startswith("key:"):
        return jax.random.wrap_key_data(jnp.asarray(stored), impl=kind[4:])
    a = stored if str(stored.dtype) == dtype_name else stored.view(jnp.dtype(dtype_name))
    if a.dtype.itemsize == 8 and a.dtype.kind in "fiuc" and not jax.config.jax_enable_x64:
        return a  # a 64-bit leaf stays a NumPy array (lossless) when JAX would silently cast it to 32 bits
    return jnp.asarray(a)


def describe(tree: Any) -> list[dict]:
    """Per-leaf description used in the metadata and for structure checks: ``key``, ``path``, ``shape``, ``dtype``."""
    out = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            shape, dtype = tuple(leaf.shape), str(leaf.dtype)
        else:
            a = leaf if isinstance(leaf, (np.ndarray, np.generic, jax.Array)) else jnp.asarray(leaf)
            shape, dtype = tuple(np.shape(a)), str(a.dtype)
        out.append(
            {
                "key": jax.tree_util.keystr(path),
                "path": [_path_entry(k) for k in path],
                "shape": list(shape),
                "dtype": dtype,
            }
        )
    return out


# --------------------------------------------------------------------------------------------------------------
# save
# --------------------------------------------------------------------------------------------------------------
def save(path: str | os.PathLike, state: Any, *, posterior: Any = None, meta: dict | None = None) -> str:
    """Write ``state`` (any pytree of arrays) to ``path`` atomically; returns the path written.

    Args:
      path: target file (conventionally ``*.npz``; the name is used exactly as given). Its directory must exist.
      state: a posterior or agent state (NamedTuple / dict / list of arrays, JAX PRNG keys allowed).
      posterior: the :class:`~banditkit.posteriors.Posterior` that made ``state``; its ``name`` and ``hyper`` are
        recorded so ``load`` can check them.
      meta: extra JSON-serialisable information (e.g. ``{"step": 1000, "seed": 0}``).

    Raises:
      TypeError: ``meta`` is not a dict or holds a value JSON cannot store; a leaf has an unsupported dtype.
      ValueError: the target directory does not exist, or ``state`` has no array leaves.
    """
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(folder):
        raise ValueError(f"cannot save checkpoint to {target!r}: directory {folder!r} does not exist; create it first")
    if meta is not None and not isinstance(meta, dict):
        raise TypeError(f"meta must be a dict of JSON-serialisable values, got {type(meta).__name__}")
    user_meta = _jsonable(meta or {}, strict=True, where="meta")

    leaves_with_path, treedef = jax.tree_util.tree_flatten_with_path(state)
    if not leaves_with_path:
        raise ValueError("state has no array leaves to save; pass the state returned by post.init / post.update")
    leaf_info = describe(state)
    arrays: dict[str, np.ndarray] = {}
    float_dtypes = set()
    for info, (_, leaf) in zip(leaf_info, leaves_with_path, strict=True):
        arr, dtype_name, kind = _leaf_array(leaf)
        stored = _encode(arr)
        if info["key"] in arrays or info["key"] == _META_KEY:
            raise ValueError(f"two leaves of the state share the tree path {info['key']!r}; cannot store it by path")
        arrays[info["key"]] = stored
        info.update(dtype=dtype_name, stored_dtype=str(stored.dtype), kind=kind)
        if kind == "array" and jnp.issubdtype(arr.dtype, jnp.floating):
            float_dtypes.add(dtype_name)

    from banditkit._version import __version__

    header = {
        "format": FORMAT,
        "banditkit_version": __version__,
        "name": getattr(posterior, "name", None) if posterior is not None else None,
        "hyper": _jsonable(dict(getattr(posterior, "hyper", {}) or {}), strict=False, where="hyper")
        if posterior is not None
        else None,
        "dtype": sorted(float_dtypes)[0] if len(float_dtypes) == 1 else sorted(float_dtypes),
        "treedef": str(treedef),
        "leaves": leaf_info,
        "meta": user_meta,
    }
    arrays[_META_KEY] = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)

    with atomic_file(target, ".npz") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
        fh.flush()
        os.fsync(fh.fileno())
    return target


def _mode_of(target: str) -> int:
    """The permission bits a plain ``open(target, "w")`` leaves on ``target``."""
    try:
        return os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        pass
    try:  # Linux: read the umask without setting it (os.umask would change it for every thread meanwhile)
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_file(target: str, suffix: str) -> Iterator[str]:
    """A temporary path beside ``target`` (same folder, which must exist) to write to; moved onto ``target`` with
    ``os.replace`` when the block ends normally, removed when it raises — a crash never leaves a half-written file
    under the final name.  The file gets the permissions ``open(target, "w")`` would give it: those of the file it
    replaces, else ``0o666`` less the process umask (not ``mkstemp``'s private ``0o600``)."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=os.path.dirname(os.path.abspath(target)))
    os.close(fd)
    try:
        os.chmod(tmp, _mode_of(target))
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# --------------------------------------------------------------------------------------------------------------
# load
# --------------------------------------------------------------------------------------------------------------
def _read(path: str, with_arrays: bool = True) -> tuple[dict, dict[str, np.ndarray]]:
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint {path!r} does not exist")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path!r} is not a readable .npz checkpoint (not a zip archive); it may be truncated")
    try:
        with np.load(path, allow_pickle=False) as z:
            if _META_KEY not in z.files:
                raise ValueError(
                    f"{path!r} is not a banditkit checkpoint (no {_META_KEY!r} entry); write it with "
                    f"banditkit.checkpoint.save"
                )
            header = json.loads(bytes(z[_META_KEY]).decode("utf-8"))
            arrays = {k: z[k] for k in z.files if k != _META_KEY} if with_arrays else {}
    except ValueError as e:
        if "pickle" in str(e):
            raise ValueError(
                f"{path!r} holds pickled object data, which banditkit refuses to load (allow_pickle=False); "
                f"checkpoints written by banditkit.checkpoint.save never contain pickles"
            ) from e
        raise ValueError(f"{path!r} is not a readable .npz checkpoint ({e}); it may be truncated") from e
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise ValueError(
            f"{path!r} is not a readable .npz checkpoint ({e}); it may be truncated or not a checkpoint"
        ) from e
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(
            f"{path!r} has checkpoint format {header.get('format') if isinstance(header, dict) else None!r}; "
            f"this banditkit reads {FORMAT!r}"
        )
    return header, arrays


def _nest(leaves: list[tuple[list, Any]]) -> Any:
    """Nested dicts / lists from ``[(path entries, value)]`` (template-free load)."""
    if len(leaves) == 1 and not leaves[0][0]:
        return leaves[0][1]
    groups: dict[Any, list] = {}
    kinds = set()
    for entries, value in leaves:
        (kind, key), rest = entries[0], entries[1:]
        kinds.add(kind)
        groups.setdefault(key, []).append((rest, value))
    if kinds <= {"seq", "flat"}:
        return [_nest(groups[k]) for k in sorted(groups)]
    return {k: _nest(v) for k, v in groups.items()}


def _structure_diff(saved: list[dict], wanted: list[dict], saved_treedef: str, wanted_treedef: str) -> list[str]:
    problems = []
    s_by, w_by = {d["key"]: d for d in saved}, {d["key"]: d for d in wanted}
    missing = [k for k in w_by if k not in s_by]
    extra = [k for k in s_by if k not in w_by]
    if missing:
        problems.append(f"the template has leaves the file lacks: {missing}")
    if extra:
        problems.append(f"the file has leaves the template lacks: {extra}")
    for k in w_by:
        if k in s_by:
            s, w = s_by[k], w_by[k]
            if list(s["shape"]) != list(w["shape"]):
                problems.append(f"{k}: shape {tuple(s['shape'])} in the file, {tuple(w['shape'])} in the template")
            if s["dtype"] != w["dtype"]:
                problems.append(f"{k}: dtype {s['dtype']} in the file, {w['dtype']} in the template")
    if not problems and saved_treedef != wanted_treedef:
        problems.append(f"tree structure differs: file {saved_treedef}, template {wanted_treedef}")
    return problems


def _upgrade_factors(info: list[dict], values: list, wanted: list[dict]) -> tuple[list[dict], list, bool]:
    """Read a low-rank factor saved as one array ``C (d, D)`` (checkpoints written before low-rank blocks kept
    ``C = M B``, :class:`~banditkit.posteriors.covblocks.LowRankFactor`) as ``mix = I_d``, ``basis = C``: the same
    factor.  Applies where the template has ``K.mix`` and ``K.basis`` and the file has ``K`` alone; returns the
    upgraded ``(info, values, changed)``."""
    saved = {d["key"]: i for i, d in enumerate(info)}
    want = {d["key"]: d for d in wanted}
    info, values, changed = list(info), list(values), False
    for key, d in want.items():
        if not key.endswith(".basis"):
            continue
        old, mix = key[: -len(".basis")], key[: -len(".basis")] + ".mix"
        if mix not in want or old not in saved or key in saved or mix in saved:
            continue
        i = saved[old]
        c = values[i]
        if np.ndim(c) != 2:
            continue
        eye = np.eye(np.shape(c)[0], dtype=np.asarray(c).dtype)
        info[i] = dict(info[i], key=key, path=d["path"])
        info.append(dict(info[i], key=mix, path=want[mix]["path"], shape=list(eye.shape)))
        values.append(jnp.asarray(eye) if isinstance(c, jax.Array) else eye)
        changed = True
    return info, values, changed


def header(path: str | os.PathLike) -> dict:
    """The metadata :func:`load` returns, read without the arrays (``meta`` holds the caller's ``meta``)."""
    return _read(os.fspath(path), with_arrays=False)[0]


def load(path: str | os.PathLike, template: Any = None, *, posterior: Any = None) -> tuple[Any, dict]:
    """Read a checkpoint written by :func:`save`; returns ``(state, meta)``.

    Args:
      path: the checkpoint file.
      template: an example state with the wanted structure (e.g. ``post.init(params)``). The file's leaf paths,
        shapes and dtypes and the tree structure (including NamedTuple types) must match it exactly; the state
        is rebuilt with the template's treedef. Without it the state comes back as nested dicts / lists.  A
        low-rank factor stored as one array ``C`` (files from before ``LowRankFactor``) loads as ``(I, C)``.
      posterior: if given, its ``name`` and ``hyper`` must equal those recorded in the file.

    Returns:
      ``state`` (leaves as JAX arrays) and the metadata dict: ``name``, ``hyper``, ``dtype``, ``treedef``,
      ``banditkit_version``, ``format``, ``leaves`` and the caller's ``meta``.

    Raises:
      FileNotFoundError: no such file.
      ValueError: not a banditkit checkpoint, or the structure / backend differs (every difference is listed).
    """
    p = os.fspath(path)
    header, arrays = _read(p)
    info = header["leaves"]
    values = []
    for d in info:
        if d["key"] not in arrays:
            raise ValueError(f"checkpoint {p!r} is damaged: leaf {d['key']!r} listed in its metadata is missing")
        values.append(_decode(arrays[d["key"]], d["dtype"], d.get("kind", "array")))

    if posterior is not None:
        name = getattr(posterior, "name", None)
        hyper = _jsonable(dict(getattr(posterior, "hyper", {}) or {}), strict=False, where="hyper")
        if header.get("name") is not None and name != header["name"]:
            raise ValueError(f"checkpoint {p!r} was written by backend {header['name']!r}, not {name!r}")
        if header.get("hyper") is not None and hyper != header["hyper"]:
            diff = {
                k: (header["hyper"].get(k), hyper.get(k))
                for k in sorted(set(header["hyper"]) | set(hyper))
                if header["hyper"].get(k) != hyper.get(k)
            }
            raise ValueError(
                f"checkpoint {p!r} hyper-parameters differ from the posterior's (file, posterior): {diff}; "
                f"rebuild the posterior with the saved hyper-parameters (meta['hyper'])"
            )

    if template is None:
        state = _nest([(d["path"], v) for d, v in zip(info, values, strict=True)])
    else:
        wanted = describe(template)
        treedef = jax.tree_util.tree_structure(template)
        info, values, upgraded = _upgrade_factors(info, values, wanted)
        # an upgraded file's stored treedef names the old layout; its leaves (paths, shapes, dtypes) still must match
        problems = _structure_diff(info, wanted, str(treedef) if upgraded else header.get("treedef", ""),
                                   str(treedef))
        if problems:
            raise ValueError(
                f"checkpoint {p!r} does not match the template state:\n  - "
                + "\n  - ".join(problems)
                + "\n(was it saved from a different backend, model or dtype? meta['name'] = "
                f"{header.get('name')!r}, meta['dtype'] = {header.get('dtype')!r})"
            )
        by_key = {d["key"]: v for d, v in zip(info, values, strict=True)}
        state = jax.tree_util.tree_unflatten(treedef, [by_key[d["key"]] for d in wanted])
    return state, header


def restore(path: str | os.PathLike, posterior: Any, params: Any) -> tuple[Any, dict]:
    """Load a saved posterior state into ``posterior`` ready to resume.

    Calls ``posterior.init(params)`` (which also tells the backend the model's parameter structure) to get the
    template, checks the backend name / hyper-parameters and the structure, and returns ``(state, meta)``.
    """
    template = posterior.init(params)
    return load(path, template, posterior=posterior)
