"""Sphinx configuration of the sk_softmix documentation."""

import sk_softmix

project = "sk_softmix"
author = "the sk_softmix developers"
release = sk_softmix.__version__
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
]
autosummary_generate = True
numpydoc_show_class_members = False
html_theme = "pydata_sphinx_theme"
exclude_patterns = ["_build"]
