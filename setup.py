"""Declares the optional compiled extensions; all metadata lives in pyproject.toml."""

import os
import platform
import re
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError

# Set by the wheel builds and CI: an extension that does not compile fails the install instead
# of falling back to the pure-Python twin (crawldedup/_env.py applies the same rule at import).
REQUIRE_EXTENSIONS = bool(os.environ.get("CRAWLDEDUP_REQUIRE_EXTENSIONS"))
# What a missing or broken compiler raises: no compiler or Python.h (CCompilerError, ExecError),
# no MSVC on Windows (PlatformError).
COMPILE_ERRORS = (CCompilerError, ExecError, PlatformError)


def short_reason(exc: Exception) -> str:
    """The compile error in a few words: setuptools names a failed command with all its flags."""
    text = " ".join(str(exc).split())
    found = re.match(r"Command '\['([^']+)'.*(returned non-zero exit status \d+)", text)
    return f"{found.group(1)} {found.group(2)}" if found else text


class OptionalBuildExt(build_ext):
    """Builds each extension if it can; a failed one leaves its pure-Python twin to serve.

    All failures end in one warning line after the build. With ``CRAWLDEDUP_REQUIRE_EXTENSIONS``
    set, the first failure fails the build instead.
    """

    def build_extensions(self) -> None:
        self.failed = {}
        super().build_extensions()
        if self.failed:
            names = ", ".join(sorted(self.failed))
            reason = next(iter(self.failed.values()))
            print(
                f"WARNING: crawldedup: could not compile {names} ({reason}); installed the"
                " pure-Python twins, which give the same answers more slowly. For the compiled"
                " speed, install a C compiler and the Python headers (Debian: apt-get install"
                " build-essential python3-dev), then pip install --force-reinstall --no-cache-dir"
                " crawldedup; CRAWLDEDUP_REQUIRE_EXTENSIONS=1 makes this a failure.",
                file=sys.stderr,
                flush=True,
            )

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except COMPILE_ERRORS as exc:
            if REQUIRE_EXTENSIONS:
                print(
                    f"error: crawldedup: {ext.name} did not compile and CRAWLDEDUP_REQUIRE_EXTENSIONS is set",
                    file=sys.stderr,
                    flush=True,
                )
                raise
            self.failed[ext.name] = short_reason(exc)


def extension(name: str, pyx: str, **options: object) -> Extension:
    # -O3, never -march=native: wheels must run on any CPU of their platform.
    flags = ["/O2"] if sys.platform == "win32" else ["-O3"]
    return Extension(name, [pyx], extra_compile_args=flags, **options)


# Pure-Python install: nothing is compiled, the typed twins serve. Interpreters other than
# CPython (PyPy, GraalPy) never load the extensions (crawldedup/_env.py), so none are built.
if os.environ.get("CRAWLDEDUP_NO_EXTENSIONS") or platform.python_implementation() != "CPython":
    ext_modules = []
else:
    from Cython.Build import cythonize

    ext_modules = cythonize(
        [
            extension(
                "crawldedup.fingerprints._fingerprints_c",
                "src/crawldedup/fingerprints/_fingerprints_c.pyx",
                include_dirs=["src/crawldedup/fingerprints"],
                depends=["src/crawldedup/fingerprints/_murmur3.h", "src/crawldedup/fingerprints/_prefetch.h"],
            ),
            extension(
                "crawldedup.bloom._bloom_c",
                "src/crawldedup/bloom/_bloom_c.pyx",
                # Keys are hashed by the fingerprints' C (cimported through _fingerprints_c.pxd).
                include_dirs=["src/crawldedup/bloom", "src/crawldedup/fingerprints"],
                depends=[
                    "src/crawldedup/bloom/_bloom_portable.h",
                    "src/crawldedup/fingerprints/_prefetch.h",
                    "src/crawldedup/fingerprints/_fingerprints_c.pxd",
                ],
            ),
            extension("crawldedup.canonical._canonical_c", "src/crawldedup/canonical/_canonical_c.pyx"),
            extension(
                "crawldedup.content._simhash_c",
                "src/crawldedup/content/_simhash_c.pyx",
                # The one MurmurHash3 in C: the fingerprints', so both hash a key the same way.
                include_dirs=["src/crawldedup/fingerprints"],
                depends=["src/crawldedup/fingerprints/_murmur3.h"],
            ),
        ],
        compiler_directives={"language_level": "3"},
    )
    for module in ext_modules:
        # Lets setuptools skip a missing build output (build_ext --inplace) after a failed
        # compile; set here because cythonize() returns new Extension objects without it.
        module.optional = not REQUIRE_EXTENSIONS

setup(ext_modules=ext_modules, cmdclass={"build_ext": OptionalBuildExt})
