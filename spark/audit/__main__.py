"""`python -m brook.spark.audit` and `spark-submit .../brook/spark/audit/__main__.py`.

spark-submit runs this file as a script, outside its package: hence the absolute import.
"""

import sys

from brook.spark.audit.job import main

if __name__ == "__main__":
    sys.exit(main(prog="brook.spark.audit"))
