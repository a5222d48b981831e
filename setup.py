"""Build the C extensions (acp_fast.wire._framing, acp_fast.wire._decode, acp_fast.observability._timing).

The rest is pure Python.

The extensions are optional: without Cython, or when compiling or linking fails
(no compiler, ``CC=false``), the build warns and the package installs on the
pure-Python twins (``acp_fast.wire.framing.IMPLEMENTATION == "python"``,
``acp_fast.wire.jsonrpc.DECODE_IMPLEMENTATION == "python"``,
``acp_fast.observability.timing.IMPLEMENTATION == "python"``).
Release builds are stripped (``-g0``, ``-s``): debug info is most of the
shared object's size and no user of a wheel has the sources it points at.

ACP_FAST_DEBUG=1 builds with line tracing, annotation and -O0 -g;
ACP_FAST_SANITIZE=1 adds ASan/UBSan. ACP_FAST_REQUIRE_EXTENSION=1 turns a
failed extension build back into an error (CI uses it to catch a broken build).
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

DEBUG = os.environ.get("ACP_FAST_DEBUG") == "1"
SANITIZE = os.environ.get("ACP_FAST_SANITIZE") == "1"
REQUIRE = os.environ.get("ACP_FAST_REQUIRE_EXTENSION") == "1"


def _skip(reason: str) -> None:
    if REQUIRE:
        raise SystemExit(f"acp_fast: the Cython extensions did not build ({reason}) and ACP_FAST_REQUIRE_EXTENSION=1")
    sys.stderr.write(
        f"WARNING: acp_fast: the Cython extensions were not built ({reason}); "
        "installing with the pure-Python twins (correct, slower).\n"
    )


class OptionalBuildExt(build_ext):
    """Cythonize and compile if possible; otherwise warn and build nothing."""

    def finalize_options(self) -> None:
        self.distribution.ext_modules = self._cythonized(self.distribution.ext_modules or [])
        super().finalize_options()

    @staticmethod
    def _cythonized(extensions: list[Extension]) -> list[Extension]:
        try:
            from Cython.Build import cythonize
        except ImportError:
            _skip("Cython is not installed")
            return []
        directives = {"language_level": "3", "boundscheck": False, "wraparound": False}
        if DEBUG:
            directives.update(linetrace=True, profile=True)
        try:
            return cythonize(
                extensions,
                compiler_directives=directives,
                annotate=DEBUG,
                compile_time_env={"ACP_FAST_DEBUG": DEBUG},
                force=True,  # never trust a generated .c left in the tree
            )
        except Exception as exc:
            _skip(f"cythonize failed: {exc}")
            return []

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            _skip(f"{type(exc).__name__}: {exc}")


cflags = ["-O0", "-g", "-DCYTHON_TRACE=1"] if DEBUG else ["-O3", "-g0"]
ldflags: list[str] = [] if DEBUG or SANITIZE else ["-s"]
if SANITIZE:
    cflags += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]
    ldflags += ["-fsanitize=address,undefined"]

setup(
    ext_modules=[
        Extension(
            "acp_fast.wire._framing",
            ["acp_fast/wire/_framing.pyx"],
            extra_compile_args=cflags,
            extra_link_args=ldflags,
        ),
        Extension(
            "acp_fast.wire._decode",
            ["acp_fast/wire/_decode.pyx"],
            extra_compile_args=cflags,
            extra_link_args=ldflags,
        ),
        Extension(
            "acp_fast.observability._timing",
            ["acp_fast/observability/_timing.pyx"],
            extra_compile_args=cflags,
            extra_link_args=ldflags,
        ),
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
