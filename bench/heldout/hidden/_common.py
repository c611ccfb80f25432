"""What every reference check shares: import the delivered module from the workspace given as argv[1]."""

import importlib
import sys


def delivered(module: str):
    sys.path.insert(0, sys.argv[1])
    sys.dont_write_bytecode = True
    return importlib.import_module(module)


def raises(error: type[BaseException], call, *args) -> bool:
    try:
        call(*args)
    except error:
        return True
    except Exception:
        return False
    return False
