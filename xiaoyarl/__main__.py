"""`python -m xiaoyarl` is the `xiaoyarl` command."""

import sys

from xiaoyarl.cli import main

sys.exit(main())
