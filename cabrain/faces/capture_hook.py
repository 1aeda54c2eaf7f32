"""The command Claude Code runs on each hook event: ``<python> -S <this file>``, which is
``cabrain capture`` without the set-up of site-packages that every Python start pays otherwise (about
15 ms of each event's wall time). The service path imports only the standard library and this
package, found from this file's place; the embedded path (no ``CABRAIN_API_URL``) needs the
installed dependencies, so it sets site-packages up first.
"""

import os
import sys

# Run as a script, Python put this file's folder first on the path, where it would shadow
# top-level modules (this folder has an ``mcp.py``); the package's root goes there instead.
sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if not (os.environ.get("CABRAIN_API_URL") or "").strip() and "site" not in sys.modules:
    import site

    site.main()

from cabrain.faces.capture import main

if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # everything is written and closed; skip the interpreter's tear-down (milliseconds)
