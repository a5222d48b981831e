"""Build the one C extension (acp_fast.wire._framing); everything else is pure Python.

ACP_FAST_DEBUG=1 builds with line tracing, annotation and -O0 -g;
ACP_FAST_SANITIZE=1 adds ASan/UBSan. Without Cython or a compiler the
package still installs and runs on the pure-Python framer.
"""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

DEBUG = os.environ.get("ACP_FAST_DEBUG") == "1"
SANITIZE = os.environ.get("ACP_FAST_SANITIZE") == "1"


class BuildExt(build_ext):
    def finalize_options(self) -> None:
        from Cython.Build import cythonize

        directives = {"language_level": "3", "boundscheck": False, "wraparound": False}
        if DEBUG:
            directives.update(linetrace=True, profile=True)
        self.distribution.ext_modules = cythonize(
            self.distribution.ext_modules,
            compiler_directives=directives,
            annotate=DEBUG,
            compile_time_env={"ACP_FAST_DEBUG": DEBUG},
        )
        super().finalize_options()


cflags = ["-O0", "-g", "-DCYTHON_TRACE=1"] if DEBUG else ["-O3"]
ldflags: list[str] = []
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
        )
    ],
    cmdclass={"build_ext": BuildExt},
)
