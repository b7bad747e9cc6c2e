"""Only the optional C extension; everything else is in pyproject.toml.

``assay.tracing._speedups`` makes a traced call's RunTree in C (see the file's header). It is
optional: where it cannot be compiled (no C compiler or Python headers) the install goes on
and tracing uses the same code in Python.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("assay.tracing._speedups", ["src/assay/tracing/_speedups.c"],
                             optional=True)])
