import sys

from taskgate.cli.main import main

sys.exit(main())
