"""Declares the optional compiled extensions; all metadata lives in pyproject.toml."""

import os

from setuptools import Extension, setup

# Pure-Python install: nothing is compiled, the typed twins serve.
if os.environ.get("CRAWLDEDUP_NO_EXTENSIONS"):
    ext_modules = []
else:
    from Cython.Build import cythonize

    ext_modules = cythonize(
        [Extension("crawldedup._bloom", ["src/crawldedup/_bloom.pyx"])],
        compiler_directives={"language_level": "3"},
    )

setup(ext_modules=ext_modules)
