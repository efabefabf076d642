from __future__ import annotations

import sys

from engine_client.cli import main

sys.exit(main())
