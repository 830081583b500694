"""Declares the optional compiled extensions; all metadata lives in pyproject.toml."""

import os
import platform
import sys

from setuptools import Extension, setup

# Pure-Python install: nothing is compiled, the typed twins serve. Interpreters other than
# CPython (PyPy, GraalPy) never load the extensions (crawldedup/_env.py), so none are built.
if os.environ.get("CRAWLDEDUP_NO_EXTENSIONS") or platform.python_implementation() != "CPython":
    ext_modules = []
else:
    from Cython.Build import cythonize

    ext_modules = cythonize(
        [
            Extension(
                "crawldedup.bloom._bloom_c",
                ["src/crawldedup/bloom/_bloom_c.pyx"],
                include_dirs=["src/crawldedup/bloom"],
                depends=["src/crawldedup/bloom/_murmur3.h", "src/crawldedup/bloom/_bloom_portable.h"],
                # -O3, never -march=native: wheels must run on any CPU of their platform.
                extra_compile_args=["/O2"] if sys.platform == "win32" else ["-O3"],
            ),
            Extension(
                "crawldedup.canonical._canonical_c",
                ["src/crawldedup/canonical/_canonical_c.pyx"],
                extra_compile_args=["/O2"] if sys.platform == "win32" else ["-O3"],
            ),
        ],
        compiler_directives={"language_level": "3"},
    )

setup(ext_modules=ext_modules)
