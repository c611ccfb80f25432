"""The delivered product, measured from outside: it runs in an interpreter of its own, and tests reach it
through proxies.

A pytest check runs as two processes PSE starts side by side in the sandbox (`pse.tools`' run_pytest):

* the **product process** (`PRODUCT_BOOT`, `pse.product._server`): a plain `python -c` in the
  workspace, no test framework loaded, that imports the delivered modules and answers requests;
* the **checking process** (`CHECKER_MODULE`, `pse.product._checker`): pytest over one author's tests,
  which never imports delivered code (`ProductFinder` hands the tests proxies, `pse.product._proxies`),
  and writes the record PSE judges the run by to a pipe only it holds.

They talk over two pipes (`pse.product._channel`, values in `pse.product._values`). Nothing of the
product process is trusted: it can only answer requests, and its answers are rebuilt as plain values in
the checking process. docs/security.md has what this protects and what it does not.
"""

__all__ = ["CHECKER_MODULE", "PRODUCT_BOOT"]

CHECKER_MODULE = "pse.product._checker"
"""`python -I -m CHECKER_MODULE --channel R,W --report N ... -- PYTEST_ARGS`: the checking process."""
PRODUCT_BOOT = (
    "import sys;_p=sys.path.pop(0);from pse.product._server import serve;sys.path.insert(0,_p);del _p;serve()"
)
"""The product process's `python -c` program: PSE's server is imported before the workspace's folder is
on `sys.path` (nothing of the workspace may stand in for it), then the path is a plain run's again."""
