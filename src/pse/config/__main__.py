"""`python -m pse.config table` prints the README's configuration table; with no argument, `.env.example`."""

import sys

from pse.config import env_example, settings_table

print(settings_table() if sys.argv[1:] == ["table"] else env_example())
