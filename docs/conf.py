"""Sphinx configuration for banditkit's documentation (built by ``bash scripts/docs.sh`` into ``docs/_build/html``).

Why Sphinx and not MkDocs + mkdocstrings: the docstrings are Google-style with reStructuredText inside
(``:func:`` / ``:class:`` / ``:mod:`` roles, double-backquote literals carrying the update equations), which is
what Sphinx's autodoc + napoleon read natively; mkdocstrings would need the roles rewritten into Markdown
cross-references.  With MyST (through myst-nb) the hand-written Markdown pages, the README and the notebooks are
sources too, so one tool builds the whole site, and ``-W`` turns every broken reference or bad markup into a
failed build (CI runs it that way).  The notebooks are executed by the build (see below) and shown with
their outputs.
"""

from __future__ import annotations

import os
import sys

DOCS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(DOCS)
sys.path.insert(0, ROOT)  # document the checkout, whichever banditkit is installed
sys.path.insert(0, os.path.join(DOCS, "_ext"))

import banditkit  # noqa: E402  (after the path set-up above)

project = "banditkit"
author = "the banditkit developers"
copyright = "the banditkit developers, Apache-2.0"
release = banditkit.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "myst_nb",  # MyST Markdown (.md) and notebooks (.ipynb)
    "bkdocs",  # docs/_ext/bkdocs.py: the CLI's help and the Gymnasium ids, generated from the code
]

# README.md and CHANGELOG.md are included by index.md / changelog.md; docs/README.md is about building the docs.
exclude_patterns = ["_build", "README.md", "notebooks/.ipynb_checkpoints", "**/.ipynb_checkpoints"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"

# --- autodoc / napoleon -------------------------------------------------------------------------------------------
autodoc_default_options = {
    "member-order": "bysource",
    "no-value": True,  # registries and constants: their repr holds function addresses, not documentation
}
autodoc_typehints = "description"  # the signature line stays readable; the types go into the parameter list
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True  # show ``rank=20`` rather than the evaluated default object
autodoc_inherit_docstrings = False  # NamedTuple fields would otherwise read "Alias for field number 0"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_attr_annotations = True
add_module_names = False

# --- MyST / notebooks ---------------------------------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3  # the Markdown pages link to their own sections by slug (#2-posteriors ...)
# The notebooks (docs/notebooks links to the repository's notebooks/) are executed at every build, at their "docs"
# size (BANDITKIT_NB_SIZE=docs: short runs; the three take about 80 s on one core) with XLA's cheap compile pipeline
# (compiling is most of that time, as in the test suite), so each page shows the outputs it made.  A cell that fails
# fails the build.
os.environ.setdefault("BANDITKIT_NB_SIZE", "docs")  # the kernels inherit this process's environment
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
                           " --xla_llvm_disable_expensive_passes=true").strip()
nb_execution_mode = "force"
nb_execution_timeout = 600  # seconds per notebook
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
nb_execution_in_temp = True  # a notebook that writes a file writes it in a temporary folder, not in notebooks/

# --- HTML -----------------------------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"banditkit {release}"
html_static_path: list[str] = []
html_show_sourcelink = False
