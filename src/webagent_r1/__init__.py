"""webagent-r1: train web agents with end-to-end multi-turn RL."""

import os as _os

# The model shares the CPU with Chromium and the site servers. OpenMP threads that spin while
# waiting then steal the cores those need, and a descheduled thread stalls every parallel
# region: measured here, a 48-token generation took 48 s with 2 spinning threads next to one
# busy process and 10 s with passive waiting (the same as 1 thread). Set before torch loads;
# an explicit OMP_WAIT_POLICY in the environment wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
