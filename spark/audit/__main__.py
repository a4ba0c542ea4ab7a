"""`python -m brook.spark.audit` and `spark-submit .../brook/spark/audit/__main__.py`.

spark-submit runs this file as a script, outside its package: Python then puts this
directory first on sys.path, where its modules would shadow others of the same name
(and of the standard library). It is taken off before anything is imported, and the
job is imported by its full name.
"""

import sys
from pathlib import Path

if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]

    from brook.spark.audit.job import main

    sys.exit(main(prog="brook.spark.audit"))
