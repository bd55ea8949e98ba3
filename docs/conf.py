"""Sphinx configuration of the sk_softmix documentation.

Build (warnings are errors)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Add ``-D plot_gallery=0`` to render the gallery without running the examples.
No extension fetches anything over the network: intersphinx is not enabled,
so references to NumPy, scikit-learn or PyTorch objects render as plain code.
"""

import sk_softmix

project = "sk_softmix"
author = "the sk_softmix developers"
copyright = "the sk_softmix developers"
release = sk_softmix.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]

# -- API reference -------------------------------------------------------------

autosummary_generate = True
autodoc_default_options = {"member-order": "bysource"}
# The class template (docs/_templates/autosummary/class.rst) documents the
# methods itself; numpydoc's own member tables would repeat them.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# Structural numpydoc checks, reported as warnings (errors under -W):
# unknown or misordered sections, undocumented, unknown or untyped parameters,
# parameters without a description, missing Returns or Yields sections.
numpydoc_validation_checks = {
    "GL06",
    "GL07",
    "PR01",
    "PR02",
    "PR04",
    "PR07",
    "PR10",
    "RT01",
    "YD01",
}
numpydoc_validation_exclude = {
    # methods inherited from scikit-learn are documented there
    r"\.(get_params|set_params|get_metadata_routing|set_\w+_request)$",
    # a named tuple's own methods are Python's
    r"NoisyMixtureSample\.(count|index)$",
}

# -- Gallery ---------------------------------------------------------------------

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    # run every script, not only plot_*.py: each one prints what it found
    "filename_pattern": r".*",
    "image_scrapers": ("matplotlib",),
    "doc_module": ("sk_softmix",),
    "backreferences_dir": "generated/backreferences",
}

# -- HTML ------------------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = f"sk_softmix {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
