"""Only the optional C extensions; everything else is in pyproject.toml.

``assay.tracing._speedups`` runs a sync traced call and makes its RunTree in C, takes the
writer's stored traces apart and converts LangGraph's steps for it (see the headers of
``_speedups.c``, ``_call.c``, ``_cuntangle.c`` and ``_cstep.c``); ``assay.server._csplit``
splits the usual multipart body of ingest and groups its parts into runs (``_csplit.c``);
``assay.store._cencode`` writes the writers' journal rows' JSON columns, admits the runs ingest
receives in one pass (``_cencode.c``), writes the fold's rows as PostgreSQL's COPY text
(``_ccopy.c``), derives the tracing writer's runs' dotted orders (``_corders.c``; the
segment's text is ``_cdotted.h``'s, shared with the writer) and an llm run's usage columns
(``_cusage.c``; a sender's time is read by ``_ctime.h``, shared with ``_cencode.c``), and
copies a journal batch for this process's fold to take instead of its JSON (``_cplain.c``). All
are optional: where they cannot be compiled (no C compiler or Python headers) the install
goes on and the same code runs in Python.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("assay.tracing._speedups",
                             ["src/assay/tracing/_speedups.c", "src/assay/tracing/_call.c",
                              "src/assay/tracing/_cuntangle.c", "src/assay/tracing/_cstep.c"],
                             depends=["src/assay/tracing/_speedups.h", "src/assay/_cdotted.h"],
                             optional=True),
                   Extension("assay.server._csplit", ["src/assay/server/_csplit.c"],
                             depends=["src/assay/_cuuid.h"], optional=True),
                   Extension("assay.store._cencode", ["src/assay/store/_cencode.c",
                                                        "src/assay/store/_ccopy.c",
                                                        "src/assay/store/_corders.c",
                                                        "src/assay/store/_cusage.c",
                                                        "src/assay/store/_cplain.c"],
                             depends=["src/assay/_cuuid.h", "src/assay/_cdotted.h",
                                      "src/assay/_ctime.h"],
                             optional=True)])
