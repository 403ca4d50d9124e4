# Raw HTTP/1.1 on a socket for the integration tests' Python clients, where
# a test needs what curl hides: connections held open, what the server
# says before it closes one. Tests import it with
#   PYTHONPATH="$(dirname "$0")/../helpers" python3 ...
import json
import socket


def health(s):
    """GET /health on s: (status line, its JSON), or ("closed", {})."""
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    out = b""
    while b"\r\n\r\n" not in out or not out.endswith(b"}"):
        d = s.recv(4096)
        if not d:
            return "closed", {}
        out += d
    return out.split(b"\r\n")[0].decode(), json.loads(out.split(b"\r\n\r\n", 1)[1])


def answer(s):
    """The status line of all s says until it closes, then " closed";
    "open" if it does not close within s's timeout."""
    out = b""
    try:
        while True:
            d = s.recv(4096)
            if not d:
                return out.split(b"\r\n")[0].decode() + " closed"
            out += d
    except socket.timeout:
        return "open"
